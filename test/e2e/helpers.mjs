/**
 * Shared helpers for the end-to-end suite (node:test, against `wrangler dev`).
 *
 * `scripts/e2e.mjs` starts one HTTP target and one `wrangler dev` for the whole
 * suite and passes their addresses in the environment:
 *   TRELLIS_URL              the Worker, e.g. http://127.0.0.1:41234
 *   TRELLIS_TOKEN            a valid bearer token
 *   TRELLIS_HTTP_TARGET_URL  the HTTP target (scripts/lib/http-target.mjs)
 *   TRELLIS_OTLP_URL         the OTLP receiver runs are exported to (scripts/lib/otlp-receiver.mjs)
 *
 * Run alone (`node --test test/e2e/greet.test.mjs`), a test file starts its own
 * pair and stops it when its tests end. Pointing TRELLIS_URL at a running
 * `npm run dev` (TRELLIS_TOKEN=dev-token) works too; every test uses fresh,
 * random definition ids, so runs don't collide.
 */
import { spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { after } from "node:test";
import { fileURLToPath } from "node:url";
import { startHttpTarget } from "../../scripts/lib/http-target.mjs";
import { startOtlpReceiver } from "../../scripts/lib/otlp-receiver.mjs";
import { startPeers } from "../../scripts/lib/peers.mjs";
import { startWranglerDev } from "../../scripts/lib/wrangler-dev.mjs";

export const TERMINAL = new Set(["completed", "failed", "cancelled"]);
/** A dotted error code such as `auth.missing_token`. */
export const DOTTED_CODE = /^[a-z][a-z0-9_-]*(\.[a-z0-9_-]+)+$/;

/** @type {Promise<{ url: string, token: string, target: string, otlp: string }> | undefined} */
let envPromise;
/** @type {Array<() => Promise<void>>} */
const ownStops = [];

// Stop whatever this file started itself (nothing under scripts/e2e.mjs) once its tests are done.
after(async () => {
  for (const stop of ownStops.reverse()) {
    await stop().catch(() => {});
  }
});

/**
 * The suite's environment, starting a private HTTP target and `wrangler dev`
 * when scripts/e2e.mjs did not provide one.
 * @returns {Promise<{ url: string, token: string, target: string, otlp: string }>}
 */
export function env() {
  envPromise ??= (async () => {
    if (process.env.TRELLIS_URL) {
      return {
        url: process.env.TRELLIS_URL.replace(/\/$/, ""),
        token: process.env.TRELLIS_TOKEN ?? "dev-token",
        target: process.env.TRELLIS_HTTP_TARGET_URL ?? (await ownTarget()),
        otlp: process.env.TRELLIS_OTLP_URL ?? "",
      };
    }
    const token = "e2e-token";
    // The peers scripts/e2e.mjs and `npm run dev` start (scripts/lib/peers.mjs), containers in local mode.
    const peers = await startPeers();
    ownStops.push(peers.stop);
    const otlpKey = `otlp-${randomBytes(12).toString("hex")}`;
    const otlp = await startOtlpReceiver({ authorization: `Bearer ${otlpKey}` });
    ownStops.push(otlp.close);
    const dev = await startWranglerDev({
      vars: {
        API_TOKENS: `${token},e2e-second-token`,
        JOURNAL_SIGNING_KEY: freshSigningKey(),
        ...peers.vars,
        ...peers.secrets,
        OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
        OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${otlpKey}`,
      },
    });
    ownStops.push(dev.stop);
    return { url: dev.url, token, target: peers.vars.HTTP_TARGET_URL ?? "", otlp: otlp.url };
  })();
  return envPromise;
}

async function ownTarget() {
  const t = await startHttpTarget({ port: 0 });
  ownStops.push(t.close);
  return t.url;
}

/** A fresh base64 PKCS#8 Ed25519 private key. */
export function freshSigningKey() {
  return generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");
}

/** A definition id that no other test (or earlier run) uses: `<prefix>-<8 hex>`. */
export function uid(/** @type {string} */ prefix) {
  return `${prefix}-${randomBytes(4).toString("hex")}`;
}

/**
 * @typedef {object} ApiResponse
 * @property {number} status
 * @property {Headers} headers
 * @property {any} json   the parsed body, or undefined when it is not JSON
 * @property {string} text
 */

/**
 * Calls the API. `token: null` sends no Authorization header; a string sends that one.
 * @param {string} method
 * @param {string} path
 * @param {{ body?: unknown, rawBody?: string, token?: string | null, headers?: Record<string, string>, timeoutMs?: number }} [options]
 * @returns {Promise<ApiResponse>}
 */
export async function api(method, path, { body, rawBody, token, headers = {}, timeoutMs = 30_000 } = {}) {
  const e = await env();
  /** @type {Record<string, string>} */
  const h = { ...headers };
  const bearer = token === undefined ? e.token : token;
  if (bearer !== null) {
    h.authorization = `Bearer ${bearer}`;
  }
  let payload;
  if (rawBody !== undefined) {
    payload = rawBody;
    h["content-type"] ??= "application/json";
  } else if (body !== undefined) {
    payload = JSON.stringify(body);
    h["content-type"] = "application/json";
  }
  const res = await fetch(`${e.url}${path}`, {
    method,
    headers: h,
    body: payload,
    signal: AbortSignal.timeout(timeoutMs),
  });
  const text = await res.text();
  let json;
  try {
    json = text ? JSON.parse(text) : undefined;
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, json, text };
}

/** A short description of a response for assertion messages. */
export function show(/** @type {ApiResponse} */ res) {
  return `HTTP ${res.status}: ${res.text.length > 2000 ? `${res.text.slice(0, 2000)}…` : res.text}`;
}

/**
 * Registers a definition bundle; throws unless the API answers 200/201.
 * @param {Record<string, unknown[]>} bundle
 */
export async function register(bundle) {
  const res = await api("POST", "/v1/definitions", { body: bundle });
  if (res.status !== 201 && res.status !== 200) {
    throw new Error(`register failed: ${show(res)}`);
  }
  return res.json;
}

/**
 * Starts a run; returns the raw response.
 * @param {string} workflowId
 * @param {Record<string, unknown>} body  `{ input, version?, idempotency_key?, mode? }`
 */
export function startRun(workflowId, body) {
  return api("POST", `/v1/workflows/${encodeURIComponent(workflowId)}/runs`, { body });
}

/**
 * Polls `GET /v1/runs/{id}` until the run is terminal.
 * @param {string} runId
 * @param {{ timeoutMs?: number, intervalMs?: number }} [options]
 * @returns {Promise<any>} the terminal run
 */
export async function waitForRun(runId, { timeoutMs = 60_000, intervalMs = 100 } = {}) {
  const deadline = Date.now() + timeoutMs;
  let last;
  while (Date.now() < deadline) {
    last = await api("GET", `/v1/runs/${encodeURIComponent(runId)}`);
    if (last.status !== 200) {
      throw new Error(`GET run ${runId}: ${show(last)}`);
    }
    if (TERMINAL.has(last.json?.status)) {
      return last.json;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(`run ${runId} not terminal after ${timeoutMs} ms; last: ${last ? show(last) : "none"}`);
}

/**
 * Asserts the contract's error shape: `{ error: { code: "<dotted.code>", message, details? } }`.
 * @param {import("node:assert/strict")} assert
 * @param {ApiResponse} res
 * @param {number | number[]} status
 */
export function assertError(assert, res, status) {
  const allowed = Array.isArray(status) ? status : [status];
  assert.ok(allowed.includes(res.status), `expected ${allowed.join(" or ")}, got ${show(res)}`);
  assert.equal(typeof res.json?.error, "object", `no error object: ${show(res)}`);
  assert.match(String(res.json.error.code), DOTTED_CODE, `error.code is not dotted: ${show(res)}`);
  assert.equal(typeof res.json.error.message, "string", `error.message missing: ${show(res)}`);
  assert.ok(res.json.error.message.length > 0, "error.message is empty");
}

/** A detail's path as a dotted string, whatever its form (array, JSON pointer, string). */
export function detailPath(/** @type {any} */ detail) {
  const p = detail?.path;
  if (Array.isArray(p)) {
    return p.join(".");
  }
  if (typeof p === "string") {
    return p
      .replace(/^\//, "")
      .replaceAll("/", ".")
      .replace(/\[(\d+)\]/g, ".$1");
  }
  return "";
}

/** The `trellis` CLI of this repository (cli/trellis.ts). */
export const CLI = fileURLToPath(new URL("../../cli/trellis.ts", import.meta.url));

/** The environment the CLI runs with: the suite's Worker and token, as TRELLIS_URL and TRELLIS_TOKEN. */
export async function cliEnv() {
  const { url, token } = await env();
  return { ...process.env, TRELLIS_URL: url, TRELLIS_TOKEN: token };
}

/**
 * Runs the CLI to its end, from the repository root, as a user would type it.
 * `onLine` sees stdout line by line while it runs.
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string }>}
 */
export async function trellis(/** @type {string[]} */ args, /** @type {(line: string) => void} */ onLine = () => {}) {
  const childEnv = await cliEnv();
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [CLI, ...args], {
      cwd: fileURLToPath(new URL("../..", import.meta.url)),
      env: childEnv,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let pending = "";
    child.stdout.on("data", (chunk) => {
      stdout += chunk;
      pending += chunk;
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      lines.forEach(onLine);
    });
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}
