/**
 * The local MCP peer: the reference server @modelcontextprotocol/server-everything,
 * run as child processes on 127.0.0.1 (under scripts/lib/listen-localhost.mjs,
 * since it listens on all interfaces by itself), behind a small recording
 * proxy that lets tests see what reached the server.
 *
 * One child speaks Streamable HTTP (endpoint `/mcp`); with `sse: true` a second
 * speaks the older HTTP+SSE transport (endpoint `/sse`, messages to `/message`).
 *
 * Proxy URLs (each on its own 127.0.0.1 port, `url` and `sseUrl`):
 *   /k/<key>/mcp        the server's `/mcp`, with every request recorded under <key>
 *   /mcp, anything else forwarded as is (recorded under `_`)
 *   GET /_stats/<key>   { key, requests, methods: { "<json-rpc method>": n },
 *                         calls: [{ name, arguments }], authorization: [values] }
 *                       (`tools/call` requests in `calls`; the `authorization`
 *                       header of each request, "" when absent)
 *
 * Tests give each test its own key, so "this tool was never called" is a
 * question about that key alone.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { createServer, request } from "node:http";
import { connect } from "node:net";
import { fileURLToPath } from "node:url";
import { freePort } from "./wrangler-dev.mjs";

const SERVER_ENTRY = fileURLToPath(
  new URL("../../node_modules/@modelcontextprotocol/server-everything/dist/index.js", import.meta.url),
);
const PRELOAD = new URL("./listen-localhost.mjs", import.meta.url).href;
const STARTUP_TIMEOUT_MS = 20_000;
const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * @typedef {object} KeyStats
 * @property {string} key
 * @property {number} requests
 * @property {Record<string, number>} methods
 * @property {{ name: string, arguments: unknown }[]} calls
 * @property {string[]} authorization
 */

/**
 * @typedef {object} McpPeer
 * @property {string} url       Streamable HTTP proxy base, e.g. `http://127.0.0.1:41234` (endpoint `/mcp`)
 * @property {string | undefined} sseUrl  HTTP+SSE proxy base (endpoint `/sse`), when started with `sse`
 * @property {(key: string) => KeyStats} stats
 * @property {() => Promise<void>} close
 */

/**
 * Starts server-everything and its recording proxies.
 * @param {{ sse?: boolean }} [options]
 * @returns {Promise<McpPeer>}
 */
export async function startMcpPeer({ sse = false } = {}) {
  if (!existsSync(SERVER_ENTRY))
    throw new Error(`@modelcontextprotocol/server-everything is not installed (${SERVER_ENTRY}): run npm install`);
  /** @type {Map<string, KeyStats>} */
  const stats = new Map();
  /** @type {Array<() => Promise<void>>} */
  const stoppers = [];
  const stop = async () => {
    for (const s of stoppers.reverse()) await s().catch(() => {});
  };
  try {
    const streamable = await startServerProcess("streamableHttp");
    stoppers.push(streamable.stop);
    const proxy = await startProxy(streamable.port, stats);
    stoppers.push(proxy.close);
    let sseUrl;
    if (sse) {
      const child = await startServerProcess("sse");
      stoppers.push(child.stop);
      const sseProxy = await startProxy(child.port, stats);
      stoppers.push(sseProxy.close);
      sseUrl = sseProxy.url;
    }
    return {
      url: proxy.url,
      sseUrl,
      stats: (key) => stats.get(key) ?? emptyStats(key),
      close: stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** @param {string} key @returns {KeyStats} */
function emptyStats(key) {
  return { key, requests: 0, methods: {}, calls: [], authorization: [] };
}

/**
 * Runs `node --import listen-localhost.mjs server-everything <mode>` on a free port.
 * @param {"streamableHttp" | "sse"} mode
 * @returns {Promise<{ port: number, stop: () => Promise<void> }>}
 */
async function startServerProcess(mode) {
  const port = await freePort();
  const child = spawn(process.execPath, ["--import", PRELOAD, SERVER_ENTRY, mode], {
    // A bare environment: the server has a `get-env` tool that would show whatever it inherits.
    env: { PATH: process.env.PATH ?? "", PORT: String(port) },
    stdio: ["ignore", "ignore", "pipe"],
  });
  let output = "";
  child.stderr?.on("data", (chunk) => {
    output = (output + chunk.toString("utf8")).slice(-8_192);
  });
  /** @type {{ code: number | null } | undefined} */
  let exited;
  const exitedPromise = new Promise((resolve) => child.once("exit", (code) => resolve((exited = { code }))));
  const stop = async () => {
    if (exited) return;
    child.kill("SIGTERM");
    const timer = setTimeout(() => child.kill("SIGKILL"), 3_000);
    await exitedPromise;
    clearTimeout(timer);
  };
  const deadline = Date.now() + STARTUP_TIMEOUT_MS;
  while (!(await canConnect(port))) {
    if (exited || Date.now() > deadline) {
      await stop();
      throw new Error(`server-everything (${mode}) did not start on 127.0.0.1:${port}: ${output}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return { port, stop };
}

/** @param {number} port @returns {Promise<boolean>} */
function canConnect(port) {
  return new Promise((resolve) => {
    const socket = connect({ port, host: "127.0.0.1" });
    socket.once("connect", () => {
      socket.destroy();
      resolve(true);
    });
    socket.once("error", () => resolve(false));
  });
}

/**
 * The recording proxy in front of one server process.
 * @param {number} targetPort
 * @param {Map<string, KeyStats>} stats
 * @returns {Promise<{ url: string, close: () => Promise<void> }>}
 */
async function startProxy(targetPort, stats) {
  const server = createServer(async (req, res) => {
    try {
      const url = new URL(req.url ?? "/", "http://127.0.0.1");
      const statsRoute = /^\/_stats\/([^/]+)$/.exec(url.pathname);
      if (statsRoute) {
        const key = decodeURIComponent(statsRoute[1] ?? "");
        const body = JSON.stringify(stats.get(key) ?? emptyStats(key));
        res.writeHead(200, { "content-type": "application/json" });
        res.end(body);
        return;
      }
      const keyed = /^\/k\/([^/]+)(\/.*)$/.exec(url.pathname);
      const key = keyed ? decodeURIComponent(keyed[1] ?? "_") : "_";
      const path = `${keyed ? keyed[2] : url.pathname}${url.search}`;
      const body = await readBody(req);
      record(stats, key, req, body);
      const headers = { ...req.headers, host: `127.0.0.1:${targetPort}` };
      if (body !== undefined) headers["content-length"] = String(body.length);
      const upstream = request({ host: "127.0.0.1", port: targetPort, method: req.method, path, headers }, (answer) => {
        res.writeHead(answer.statusCode ?? 502, answer.headers);
        answer.pipe(res);
      });
      upstream.on("error", (err) => {
        if (!res.headersSent) res.writeHead(502, { "content-type": "text/plain" });
        res.end(`proxy: ${err.message}`);
      });
      // A client that goes away (a closed SSE stream) ends the upstream request too.
      res.on("close", () => upstream.destroy());
      upstream.end(body);
    } catch (err) {
      if (!res.headersSent) res.writeHead(500, { "content-type": "text/plain" });
      res.end(`proxy: ${/** @type {Error} */ (err)?.message ?? err}`);
    }
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => resolve(undefined));
  });
  const { port } = /** @type {import("node:net").AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve(undefined));
      }),
  };
}

/**
 * @param {Map<string, KeyStats>} stats
 * @param {string} key
 * @param {import("node:http").IncomingMessage} req
 * @param {Buffer | undefined} body
 */
function record(stats, key, req, body) {
  const entry = stats.get(key) ?? emptyStats(key);
  stats.set(key, entry);
  entry.requests += 1;
  entry.authorization.push(String(req.headers.authorization ?? ""));
  if (body === undefined || body.length === 0) return;
  let parsed;
  try {
    parsed = JSON.parse(body.toString("utf8"));
  } catch {
    return;
  }
  for (const message of Array.isArray(parsed) ? parsed : [parsed]) {
    const method = typeof message?.method === "string" ? message.method : undefined;
    if (!method) continue;
    entry.methods[method] = (entry.methods[method] ?? 0) + 1;
    if (method === "tools/call")
      entry.calls.push({ name: String(message.params?.name ?? ""), arguments: message.params?.arguments ?? null });
  }
}

/** @param {import("node:http").IncomingMessage} req @returns {Promise<Buffer | undefined>} */
async function readBody(req) {
  if (req.method === "GET" || req.method === "HEAD") return undefined;
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) throw new Error("request body too large");
    chunks.push(chunk);
  }
  return Buffer.concat(chunks);
}
