/**
 * The HTTP target: a small, real HTTP server on 127.0.0.1 that tests use as the
 * outbound peer of the `http` action (in workerd through vitest, and in the
 * end-to-end suite against `wrangler dev`). Plain Node, no dependencies.
 *
 * Routes (any method unless noted; every JSON answer is `application/json`):
 *
 *   /echo                      200 { method, path, query, headers, body }
 *                              `body` is the parsed JSON when the request body is
 *                              JSON (by content type, or when it parses), else its
 *                              text, or null when empty. `query` maps each name to
 *                              its value (an array when repeated); `headers` are
 *                              lower-cased.
 *   /broken-json               200 `application/json` whose body is not JSON: the
 *                              text "headers: " and the request's headers (to test
 *                              that echoed credentials are scrubbed from errors).
 *   POST /sha256               200 { sha256, bytes }: the hex SHA-256 and the length of
 *                              the request body as it arrived (at most 64 MiB)
 *   /big?bytes=N[&chunked=1]   200 text/plain of N bytes "x" (at most 64 MiB), with a
 *                              Content-Length, or streamed in chunks without one.
 *   /json?a=1&b=x&c=true       200 an object built from the query: values that look
 *                              like JSON (numbers, true/false/null, objects, arrays)
 *                              are parsed, others stay strings, repeated names give
 *                              arrays. `/json` alone gives {}.
 *   /users/:id                 200 { id, name: "User <id>", active, repos }
 *                              `active` is true unless `?active=false`; `repos` has
 *                              `?repos=N` entries (default 3, max 1000) named
 *                              "<id>-repo-<k>".
 *   /text                      200 text/plain: `?body=` if given, else
 *                              "hello from the trellis http target".
 *   /status/:code[/:key]       that status (200..599) with { status: code } (no body
 *                              for 204/304); `?retry_after=S` adds `Retry-After: S`
 *                              (S: delta-seconds, at most 9 digits, or an HTTP date
 *                              such as "Wed, 21 Oct 2015 07:28:00 GMT").
 *   /flaky/:key?fail=N&status=S&retry_after=R
 *                              the first N requests for `key` (default N=1) answer
 *                              status S (default 503) with { error: "flaky",
 *                              attempt, status } (plus `Retry-After: R` when given);
 *                              later ones answer 200 { ok: true, attempts }.
 *   /slow[/:key]?ms=N          waits N ms (capped at 60 000) then 200 { waited: N }; with
 *                              `&stamp=1` also { started_at, finished_at } (ms since the epoch).
 *   /mark/:key                 200 { key, count }: a request that only leaves a mark.
 *   /record/:key?fail=N&status=S
 *                              records the request's method and (lower-cased) headers
 *                              under `key`; the first N requests (default 0) answer
 *                              status S (default 503) with { error: "record", attempt,
 *                              status }, later ones 200 { ok: true, attempts, headers }.
 *   PUT /document/:key         stores the JSON body under `key` (204); GET /document/:key
 *                              answers it (200 application/json), 404 before any PUT.
 *                              A JSON document that a test changes while the Worker
 *                              reads it (a key set that gains a key).
 *   GET /recorded/:key         200 { key, requests: [{ method, headers }] }: what
 *                              /record/:key received, in order (not counted itself).
 *   /hits/:key                 200 { key, count }: how many requests `key` received
 *                              (not counted itself). `GET /hits` gives { counts }.
 *   POST /reset                200 { ok: true }: clears every counter (hits, flaky, record).
 *   anything else              404 { error: "not_found", path }.
 *
 * Counting: every request (but /hits, /recorded and /reset) is counted once under
 * each of its keys: the `:key` path segment of /flaky, /slow, /mark, /record and
 * /status/:code/:key, the `?key=` query parameter, and the `x-trellis-hit` header. It is also
 * counted under `path:<pathname>` (e.g. `/hits/path:%2Fstatus%2F404`) and under
 * `*` (all requests). Tests use this to assert "retried N times", "not retried"
 * or "no side effects".
 *
 * Robustness: bad input never crashes the server (bad URLs, bad JSON, huge
 * bodies: 413 past 64 MiB, aborted requests). The server listens on 127.0.0.1 only.
 *
 * Standalone: `node scripts/lib/http-target.mjs [--port N]` prints its URL on
 * stdout and exits when its standard input closes (Ctrl-D, or the parent going
 * away) or after 30 minutes, or on SIGINT/SIGTERM.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { ROUTES, routeNotFound, sendJson } from "./http-target-routes.mjs";

/** @typedef {import("./http-target-routes.mjs").TargetState} TargetState */

const MAX_BODY_BYTES = 64 * 1024 * 1024;
const STANDALONE_MAX_LIFETIME_MS = 30 * 60_000;

/**
 * @typedef {object} HttpTarget
 * @property {string} url     base URL, e.g. `http://127.0.0.1:41234` (no trailing slash)
 * @property {number} port
 * @property {(key: string) => number} hits   requests counted under `key` so far
 * @property {() => void} reset               clears every counter
 * @property {() => Promise<void>} close      stops the server (drops open connections)
 */

/**
 * Starts the HTTP target on 127.0.0.1.
 * @param {{ port?: number }} [options] `port` 0 (default) picks a free port.
 * @returns {Promise<HttpTarget>}
 */
export async function startHttpTarget({ port = 0 } = {}) {
  const state = newState();

  const server = createServer((req, res) => {
    handle(req, res, state).catch((err) => {
      // Never crash: answer 500 if we still can, otherwise drop the socket.
      try {
        if (!res.headersSent) sendJson(res, 500, { error: "internal", message: String(err?.message ?? err) });
        else res.destroy();
      } catch {
        /* socket already gone */
      }
    });
  });
  server.on("clientError", (_err, socket) => {
    try {
      if (socket.writable) socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
      else socket.destroy();
    } catch {
      /* ignore */
    }
  });
  server.keepAliveTimeout = 5_000;

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => {
      server.off("error", reject);
      resolve(undefined);
    });
  });
  server.on("error", () => {
    /* keep running: errors after listen are per-connection */
  });
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());

  let closing;
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    hits: (key) => state.counts.get(key) ?? 0,
    reset: () => {
      state.counts.clear();
      state.flakyAttempts.clear();
      state.recorded.clear();
    },
    close: () =>
      (closing ??= new Promise((resolve) => {
        for (const timer of state.timers) clearTimeout(timer);
        state.timers.clear();
        server.close(() => resolve(undefined));
        server.closeAllConnections();
      })),
  };
}

/** @returns {TargetState} */
function newState() {
  return { counts: new Map(), flakyAttempts: new Map(), recorded: new Map(), documents: new Map(), timers: new Set() };
}

/**
 * Answers one request: /hits and /reset read and clear the counters; every
 * other request is counted under its keys, its body read, then its route runs.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {TargetState} state
 */
async function handle(req, res, state) {
  let url;
  try {
    url = new URL(req.url ?? "/", "http://127.0.0.1");
  } catch {
    req.resume();
    return sendJson(res, 400, { error: "bad_url" });
  }
  const method = (req.method ?? "GET").toUpperCase();
  const segments = url.pathname.split("/").filter(Boolean).map(safeDecode);
  const [route = "", a, b] = segments;

  // Counters are read and cleared without being counted themselves.
  if (route === "hits") {
    req.resume();
    if (a === undefined) return sendJson(res, 200, { counts: Object.fromEntries(state.counts) });
    return sendJson(res, 200, { key: a, count: state.counts.get(a) ?? 0 });
  }
  if (route === "recorded" && a !== undefined) {
    req.resume();
    return sendJson(res, 200, { key: a, requests: state.recorded.get(a) ?? [] });
  }
  if (route === "reset") {
    req.resume();
    if (method !== "POST") return sendJson(res, 405, { error: "method_not_allowed", allow: "POST" }, { allow: "POST" });
    state.counts.clear();
    state.flakyAttempts.clear();
    state.recorded.clear();
    return sendJson(res, 200, { ok: true });
  }

  for (const k of requestKeys(req, url, route, a, b)) state.counts.set(k, (state.counts.get(k) ?? 0) + 1);

  let body;
  try {
    body = await readBody(req);
  } catch (err) {
    if (/** @type {any} */ (err)?.code === "TOO_LARGE") {
      return sendJson(res, 413, { error: "too_large", limit: MAX_BODY_BYTES }, { connection: "close" });
    }
    return; // aborted by the client
  }
  const answer = Object.hasOwn(ROUTES, route) ? ROUTES[route] : undefined;
  return (answer ?? routeNotFound)({ req, res, url, method, a, b, body, state });
}

/**
 * The keys a request is counted under.
 * @param {import("node:http").IncomingMessage} req
 * @param {URL} url
 * @param {string} route
 * @param {string | undefined} a
 * @param {string | undefined} b
 */
function requestKeys(req, url, route, a, b) {
  /** @type {Set<string>} */
  const keys = new Set(["*", `path:${url.pathname}`]);
  if ((route === "flaky" || route === "slow" || route === "mark" || route === "record") && a) keys.add(a);
  if (route === "status" && b) keys.add(b);
  const queryKey = url.searchParams.get("key");
  if (queryKey) keys.add(queryKey);
  const headerKey = req.headers["x-trellis-hit"];
  for (const k of Array.isArray(headerKey) ? headerKey : headerKey ? [headerKey] : []) {
    for (const part of k.split(",")) if (part.trim()) keys.add(part.trim());
  }
  return keys;
}

/** @param {string} s */
function safeDecode(s) {
  try {
    return decodeURIComponent(s);
  } catch {
    return s;
  }
}

/**
 * Reads the request body (bounded).
 * @param {import("node:http").IncomingMessage} req
 * @returns {Promise<Buffer>}
 */
function readBody(req) {
  return new Promise((resolve, reject) => {
    /** @type {Buffer[]} */
    const chunks = [];
    let size = 0;
    let tooLarge = false;
    req.on("data", (chunk) => {
      if (tooLarge) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        tooLarge = true;
        chunks.length = 0;
        return; // keep draining so the 413 can be delivered
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (tooLarge) reject(Object.assign(new Error("body too large"), { code: "TOO_LARGE" }));
      else resolve(Buffer.concat(chunks));
    });
    req.on("error", reject);
    req.on("aborted", () => reject(new Error("aborted")));
  });
}

// Standalone: print the URL, stop when stdin closes, on a signal, or after 30 minutes.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const i = process.argv.indexOf("--port");
  const port = i > 0 ? Number(process.argv[i + 1]) || 0 : 0;
  const target = await startHttpTarget({ port });
  process.stdout.write(`${target.url}\n`);
  const stop = () => {
    target.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  setTimeout(stop, STANDALONE_MAX_LIFETIME_MS).unref();
  process.stdin.on("end", stop);
  process.stdin.on("close", stop);
  process.stdin.on("error", stop);
  process.stdin.resume();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  process.once("SIGHUP", stop);
}
