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
 *                              for 204/304); `?retry_after=S` adds `Retry-After: S`.
 *   /flaky/:key?fail=N&status=S&retry_after=R
 *                              the first N requests for `key` (default N=1) answer
 *                              status S (default 503) with { error: "flaky",
 *                              attempt, status } (plus `Retry-After: R` when given);
 *                              later ones answer 200 { ok: true, attempts }.
 *   /slow[/:key]?ms=N          waits N ms (capped at 60 000) then 200 { waited: N }.
 *   /mark/:key                 200 { key, count }: a request that only leaves a mark.
 *   /hits/:key                 200 { key, count }: how many requests `key` received
 *                              (not counted itself). `GET /hits` gives { counts }.
 *   POST /reset                200 { ok: true }: clears every counter (hits, flaky).
 *   anything else              404 { error: "not_found", path }.
 *
 * Counting: every request (but /hits and /reset) is counted once under each of
 * its keys: the `:key` path segment of /flaky, /slow, /mark and /status/:code/:key,
 * the `?key=` query parameter, and the `x-trellis-hit` header. It is also
 * counted under `path:<pathname>` (e.g. `/hits/path:%2Fstatus%2F404`) and under
 * `*` (all requests). Tests use this to assert "retried N times", "not retried"
 * or "no side effects".
 *
 * Robustness: bad input never crashes the server (bad URLs, bad JSON, huge
 * bodies: 413 past 8 MiB, aborted requests). The server listens on 127.0.0.1 only.
 *
 * Standalone: `node scripts/lib/http-target.mjs [--port N]` prints its URL on
 * stdout and exits when its standard input closes (Ctrl-D, or the parent going
 * away) or after 30 minutes, or on SIGINT/SIGTERM.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

const MAX_BODY_BYTES = 8 * 1024 * 1024;
const MAX_SLOW_MS = 60_000;
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
  /** @type {Map<string, number>} */
  const counts = new Map();
  /** @type {Map<string, number>} */
  const flakyAttempts = new Map();
  /** @type {Set<ReturnType<typeof setTimeout>>} */
  const timers = new Set();

  const count = (/** @type {string} */ key) => counts.set(key, (counts.get(key) ?? 0) + 1);

  const server = createServer((req, res) => {
    handle(req, res).catch((err) => {
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

  /**
   * @param {import("node:http").IncomingMessage} req
   * @param {import("node:http").ServerResponse} res
   */
  async function handle(req, res) {
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
      if (a === undefined) return sendJson(res, 200, { counts: Object.fromEntries(counts) });
      return sendJson(res, 200, { key: a, count: counts.get(a) ?? 0 });
    }
    if (route === "reset") {
      req.resume();
      if (method !== "POST")
        return sendJson(res, 405, { error: "method_not_allowed", allow: "POST" }, { allow: "POST" });
      counts.clear();
      flakyAttempts.clear();
      return sendJson(res, 200, { ok: true });
    }

    // Count the request under each of its keys.
    /** @type {Set<string>} */
    const keys = new Set(["*", `path:${url.pathname}`]);
    if ((route === "flaky" || route === "slow" || route === "mark") && a) keys.add(a);
    if (route === "status" && b) keys.add(b);
    const queryKey = url.searchParams.get("key");
    if (queryKey) keys.add(queryKey);
    const headerKey = req.headers["x-trellis-hit"];
    for (const k of Array.isArray(headerKey) ? headerKey : headerKey ? [headerKey] : []) {
      for (const part of k.split(",")) if (part.trim()) keys.add(part.trim());
    }
    for (const k of keys) count(k);

    let body;
    try {
      body = await readBody(req);
    } catch (err) {
      if (/** @type {any} */ (err)?.code === "TOO_LARGE") {
        return sendJson(res, 413, { error: "too_large", limit: MAX_BODY_BYTES }, { connection: "close" });
      }
      return; // aborted by the client
    }

    switch (route) {
      case "echo":
        return sendJson(res, 200, {
          method,
          path: url.pathname,
          query: queryObject(url.searchParams, false),
          headers: { ...req.headers },
          body: parseBody(body, req.headers["content-type"]),
        });
      case "json":
        return sendJson(res, 200, queryObject(url.searchParams, true));
      case "big": {
        const total = clampInt(url.searchParams.get("bytes"), 0, 0, 64 * 1024 * 1024);
        const chunked = url.searchParams.get("chunked") === "1";
        res.writeHead(200, { "content-type": "text/plain", ...(chunked ? {} : { "content-length": total }) });
        const block = Buffer.alloc(64 * 1024, "x");
        for (let sent = 0; sent < total && !res.destroyed; sent += block.length) {
          const piece = block.subarray(0, Math.min(block.length, total - sent));
          if (!res.write(piece)) await new Promise((resolve) => res.once("drain", resolve).once("close", resolve));
        }
        return res.end();
      }
      case "broken-json": {
        const text = `headers: ${JSON.stringify(req.headers)}`;
        res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
        return res.end(text);
      }
      case "users": {
        if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
        const n = clampInt(url.searchParams.get("repos"), 3, 0, 1000);
        return sendJson(res, 200, {
          id: a,
          name: `User ${a}`,
          active: url.searchParams.get("active") !== "false",
          repos: Array.from({ length: n }, (_, i) => `${a}-repo-${i + 1}`),
        });
      }
      case "text": {
        const text = url.searchParams.get("body") ?? "hello from the trellis http target";
        res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
        return res.end(text);
      }
      case "status": {
        const code = Number(a);
        if (!Number.isInteger(code) || code < 200 || code > 599) {
          return sendJson(res, 400, { error: "bad_status", status: a ?? null });
        }
        const extra = retryAfterHeader(url.searchParams);
        if (code === 204 || code === 304) {
          res.writeHead(code, extra);
          return res.end();
        }
        return sendJson(res, code, { status: code }, extra);
      }
      case "flaky": {
        if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
        const fail = clampInt(url.searchParams.get("fail"), 1, 0, 1_000_000);
        const status = clampInt(url.searchParams.get("status"), 503, 200, 599);
        const attempt = (flakyAttempts.get(a) ?? 0) + 1;
        flakyAttempts.set(a, attempt);
        if (attempt <= fail) {
          return sendJson(res, status, { error: "flaky", attempt, status }, retryAfterHeader(url.searchParams));
        }
        return sendJson(res, 200, { ok: true, attempts: attempt });
      }
      case "slow": {
        const ms = clampInt(url.searchParams.get("ms"), 0, 0, MAX_SLOW_MS);
        await new Promise((resolve) => {
          const timer = setTimeout(done, ms);
          timers.add(timer);
          function done() {
            clearTimeout(timer);
            timers.delete(timer);
            res.off("close", done);
            resolve(undefined);
          }
          res.on("close", done); // client gave up: stop waiting
        });
        if (res.destroyed || res.writableEnded) return;
        return sendJson(res, 200, { waited: ms });
      }
      case "mark":
        if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
        return sendJson(res, 200, { key: a, count: counts.get(a) ?? 0 });
      default:
        return sendJson(res, 404, { error: "not_found", path: url.pathname });
    }
  }

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
    hits: (key) => counts.get(key) ?? 0,
    reset: () => {
      counts.clear();
      flakyAttempts.clear();
    },
    close: () =>
      (closing ??= new Promise((resolve) => {
        for (const timer of timers) clearTimeout(timer);
        timers.clear();
        server.close(() => resolve(undefined));
        server.closeAllConnections();
      })),
  };
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
 * @param {string | null} raw
 * @param {number} fallback
 * @param {number} min
 * @param {number} max
 */
function clampInt(raw, fallback, min, max) {
  if (raw === null || raw.trim() === "") return fallback;
  const n = Math.trunc(Number(raw));
  if (!Number.isFinite(n)) return fallback;
  return Math.min(max, Math.max(min, n));
}

/** @param {URLSearchParams} params */
function retryAfterHeader(params) {
  const ra = params.get("retry_after");
  return ra !== null && /^\d{1,6}$/.test(ra.trim()) ? { "retry-after": ra.trim() } : {};
}

/**
 * @param {URLSearchParams} params
 * @param {boolean} coerce parse JSON-looking values
 */
function queryObject(params, coerce) {
  /** @type {Map<string, unknown[]>} */
  const byName = new Map();
  for (const [name, raw] of params) {
    const values = byName.get(name) ?? [];
    values.push(coerce ? coerceValue(raw) : raw);
    byName.set(name, values);
  }
  /** @type {Record<string, unknown>} */
  const out = {};
  for (const [name, values] of byName) {
    // defineProperty: a name like "__proto__" becomes a plain own key.
    Object.defineProperty(out, name, {
      value: values.length === 1 ? values[0] : values,
      enumerable: true,
      writable: true,
      configurable: true,
    });
  }
  return out;
}

/** @param {string} raw */
function coerceValue(raw) {
  const t = raw.trim();
  if (t === "true") return true;
  if (t === "false") return false;
  if (t === "null") return null;
  if (/^-?(0|[1-9]\d*)(\.\d+)?([eE][+-]?\d+)?$/.test(t)) {
    const n = Number(t);
    if (Number.isFinite(n)) return n;
  }
  if ((t.startsWith("{") && t.endsWith("}")) || (t.startsWith("[") && t.endsWith("]"))) {
    try {
      return JSON.parse(t);
    } catch {
      /* not JSON: keep the string */
    }
  }
  return raw;
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

/**
 * @param {Buffer} body
 * @param {string | undefined} contentType
 */
function parseBody(body, contentType) {
  if (body.length === 0) return null;
  const text = body.toString("utf8");
  const looksJson = /\bjson\b/i.test(contentType ?? "") || /^\s*[[{"]/.test(text);
  if (looksJson) {
    try {
      return JSON.parse(text);
    } catch {
      /* fall through to text */
    }
  }
  return text;
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {unknown} value
 * @param {Record<string, string>} [headers]
 */
function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
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
