/**
 * The answering routes of the HTTP target (scripts/lib/http-target.mjs says
 * what each answers), one function per route, and their helpers. The target
 * itself counts every request and reads its body before a route runs.
 */

import { createHash } from "node:crypto";

const MAX_SLOW_MS = 60_000;

/**
 * The target's counters, and the timers of /slow (cleared by close()).
 * @typedef {object} TargetState
 * @property {Map<string, number>} counts          requests per key
 * @property {Map<string, number>} flakyAttempts   requests per /flaky key
 * @property {Map<string, { method: string, headers: Record<string, unknown> }[]>} recorded  requests per /record key
 * @property {Map<string, Buffer>} documents       JSON documents per /document key
 * @property {Set<ReturnType<typeof setTimeout>>} timers
 */

/**
 * What a route gets: the request, its URL and the two path segments after the
 * route's name, its body (read whole) and the target's state.
 * @typedef {object} TargetRequest
 * @property {import("node:http").IncomingMessage} req
 * @property {import("node:http").ServerResponse} res
 * @property {URL} url
 * @property {string} method
 * @property {string | undefined} a
 * @property {string | undefined} b
 * @property {Buffer} body
 * @property {TargetState} state
 */

/**
 * The routes by the first segment of the path; anything else is {@link routeNotFound}.
 * @type {Record<string, (request: TargetRequest) => unknown>}
 */
export const ROUTES = {
  "echo": echoRoute,
  "json": jsonRoute,
  "big": bigRoute,
  "broken-json": brokenJsonRoute,
  "users": usersRoute,
  "text": textRoute,
  "status": statusRoute,
  "flaky": flakyRoute,
  "record": recordRoute,
  "slow": slowRoute,
  "mark": markRoute,
  "document": documentRoute,
  "sha256": sha256Route,
};

/** @param {TargetRequest} request */
export function routeNotFound({ res, url }) {
  return sendJson(res, 404, { error: "not_found", path: url.pathname });
}

/** @param {TargetRequest} request */
function echoRoute({ req, res, url, method, body }) {
  return sendJson(res, 200, {
    method,
    path: url.pathname,
    query: queryObject(url.searchParams, false),
    headers: { ...req.headers },
    body: parseBody(body, req.headers["content-type"]),
  });
}

/** @param {TargetRequest} request */
function jsonRoute({ res, url }) {
  return sendJson(res, 200, queryObject(url.searchParams, true));
}

/** @param {TargetRequest} request */
async function bigRoute({ res, url }) {
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

/** @param {TargetRequest} request */
function sha256Route({ res, body }) {
  return sendJson(res, 200, { sha256: createHash("sha256").update(body).digest("hex"), bytes: body.length });
}

/** @param {TargetRequest} request */
function brokenJsonRoute({ req, res }) {
  const text = `headers: ${JSON.stringify(req.headers)}`;
  res.writeHead(200, { "content-type": "application/json", "content-length": Buffer.byteLength(text) });
  return res.end(text);
}

/** @param {TargetRequest} request */
function usersRoute({ res, url, a }) {
  if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  const n = clampInt(url.searchParams.get("repos"), 3, 0, 1000);
  return sendJson(res, 200, {
    id: a,
    name: `User ${a}`,
    active: url.searchParams.get("active") !== "false",
    repos: Array.from({ length: n }, (_, i) => `${a}-repo-${i + 1}`),
  });
}

/** @param {TargetRequest} request */
function textRoute({ res, url }) {
  const text = url.searchParams.get("body") ?? "hello from the trellis http target";
  res.writeHead(200, { "content-type": "text/plain; charset=utf-8", "content-length": Buffer.byteLength(text) });
  return res.end(text);
}

/** @param {TargetRequest} request */
function statusRoute({ res, url, a }) {
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

/** @param {TargetRequest} request */
function flakyRoute({ res, url, a, state }) {
  if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  const fail = clampInt(url.searchParams.get("fail"), 1, 0, 1_000_000);
  const status = clampInt(url.searchParams.get("status"), 503, 200, 599);
  const attempt = (state.flakyAttempts.get(a) ?? 0) + 1;
  state.flakyAttempts.set(a, attempt);
  if (attempt <= fail) {
    return sendJson(res, status, { error: "flaky", attempt, status }, retryAfterHeader(url.searchParams));
  }
  return sendJson(res, 200, { ok: true, attempts: attempt });
}

/** @param {TargetRequest} request */
function recordRoute({ req, res, url, method, a, state }) {
  if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  const fail = clampInt(url.searchParams.get("fail"), 0, 0, 1_000);
  const status = clampInt(url.searchParams.get("status"), 503, 200, 599);
  const requests = state.recorded.get(a) ?? [];
  requests.push({ method, headers: { ...req.headers } });
  state.recorded.set(a, requests);
  if (requests.length <= fail) {
    return sendJson(res, status, { error: "record", attempt: requests.length, status });
  }
  return sendJson(res, 200, { ok: true, attempts: requests.length, headers: { ...req.headers } });
}

/** @param {TargetRequest} request */
async function slowRoute({ res, url, state }) {
  const ms = clampInt(url.searchParams.get("ms"), 0, 0, MAX_SLOW_MS);
  const startedAt = Date.now();
  await new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    state.timers.add(timer);
    function done() {
      clearTimeout(timer);
      state.timers.delete(timer);
      res.off("close", done);
      resolve(undefined);
    }
    res.on("close", done); // client gave up: stop waiting
  });
  if (res.destroyed || res.writableEnded) return;
  // `?stamp=1`: when the wait began and ended (ms since the epoch), so tests can see calls overlap.
  const stamps = url.searchParams.get("stamp") === "1" ? { started_at: startedAt, finished_at: Date.now() } : {};
  return sendJson(res, 200, { waited: ms, ...stamps });
}

/** @param {TargetRequest} request */
function markRoute({ res, url, a, state }) {
  if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  return sendJson(res, 200, { key: a, count: state.counts.get(a) ?? 0 });
}

/** @param {TargetRequest} request */
function documentRoute({ res, url, method, a, body, state }) {
  if (!a) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  if (method === "PUT") {
    try {
      JSON.parse(body.toString("utf8"));
    } catch {
      return sendJson(res, 400, { error: "not_json" });
    }
    state.documents.set(a, body);
    res.writeHead(204);
    return res.end();
  }
  const document = state.documents.get(a);
  if (document === undefined) return sendJson(res, 404, { error: "not_found", path: url.pathname });
  res.writeHead(200, { "content-type": "application/json", "content-length": document.length });
  return res.end(document);
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

/**
 * @param {URLSearchParams} params
 * @returns {Record<string, string>}
 */
function retryAfterHeader(params) {
  const ra = params.get("retry_after")?.trim() ?? null;
  if (ra === null) return {};
  // Delta-seconds, or an HTTP date (IMF-fixdate, e.g. "Wed, 21 Oct 2015 07:28:00 GMT"), as RFC 9110 allows.
  const date =
    /^[A-Z][a-z]{2}, \d{2} [A-Z][a-z]{2} \d{4} \d{2}:\d{2}:\d{2} GMT$/.test(ra) && !Number.isNaN(Date.parse(ra));
  return /^\d{1,9}$/.test(ra) || date ? { "retry-after": ra } : {};
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
export function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}
