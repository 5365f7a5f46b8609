import { EngineError } from "../../lib/errors.ts";
import { retryAfterMs } from "../../lib/retry.ts";
import { buildValue } from "../../lib/expr/mapping.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import { isCredentialHeader, type Json } from "../../schemas/common.ts";
import { resolveSecrets } from "../secrets.ts";
import type { ActionContext, ActionHandler } from "./types.ts";

/**
 * The largest response body read, in bytes: a peer that answers more fails
 * the call with `http.response_too_large` (not retryable) instead of filling
 * the executor's memory (128 MB per isolate, shared by the tasks of a group).
 * A body this large leaves the task as a blob (docs/architecture.md, "Blobs"),
 * and the next step reads it back whole, so it is bounded by memory, not by a row.
 */
export const MAX_HTTP_RESPONSE_BYTES = 32 * 1024 * 1024;

/**
 * The most characters of JSON the values computed for a structured `body` may total
 * (`mapping.too_large`): as large as a response body, so a step can send on what
 * another received. A `body_template` renders at most MAX_TEMPLATE_OUTPUT characters.
 */
export const MAX_HTTP_BODY_CHARS = MAX_HTTP_RESPONSE_BYTES;

/**
 * `http`: one request rendered from Handlebars templates over the action
 * input, its body from `body_template` or built from a structured `body`
 * (see {@link renderBody}). Output `{ status, headers, body }`. 429, 5xx, network errors and
 * timeouts are retryable (with the server's `Retry-After`); other 4xx are not. A 429 is
 * `throttled`: the limits the call held pause for its `Retry-After` (executor/limits.ts).
 */
export const httpAction: ActionHandler<"http"> = {
  async run(action, input, context) {
    const implementation = action.implementation;
    const url = renderUrl(implementation.url_template, input, context.env);
    if (!/^https?:\/\//i.test(url)) {
      throw EngineError.terminal("http.bad_url", `url_template rendered "${url}", which is not an http(s) URL`);
    }
    const headers = new Headers();
    for (const [name, template] of Object.entries(implementation.headers ?? {})) {
      // Credential headers are `$env:` references only (checked at registration); never templates.
      headers.set(
        name,
        isCredentialHeader(name)
          ? resolveSecrets(template, context.env)
          : renderTemplate(template, input, { strict: true }),
      );
    }
    if (implementation.idempotency === true && !headers.has(IDEMPOTENCY_HEADER)) {
      headers.set(IDEMPOTENCY_HEADER, idempotencyKeyOf(context));
    }
    const body = renderBody(implementation, input, headers);
    context.note?.({ method: implementation.method, url: redact(url) });
    let response: Response;
    try {
      response = await context.fetch(url, {
        method: implementation.method,
        headers,
        body,
        signal: context.signal,
        redirect: "follow",
      });
    } catch (error) {
      if (context.signal.aborted) {
        throw error;
      }
      throw EngineError.retryable(
        "http.network",
        `${implementation.method} ${redact(url)} failed: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    context.note?.({ status: response.status });
    const responseBody = await readBody(response, implementation.response);
    if (response.status === 429 || response.status >= 500) {
      const message = `${implementation.method} ${redact(url)} answered ${response.status}`;
      const after = retryAfterMs(response.headers.get("retry-after"));
      throw response.status === 429
        ? EngineError.throttled("http.status", message, after)
        : EngineError.retryable("http.status", message, after);
    }
    if (response.status >= 400) {
      throw EngineError.terminal("http.status", `${implementation.method} ${redact(url)} answered ${response.status}`);
    }
    return { status: response.status, headers: Object.fromEntries(response.headers), body: responseBody };
  },
};

/** Sent with `idempotency: true`; a header the definition sets itself is left as it is. */
const IDEMPOTENCY_HEADER = "Idempotency-Key";

function idempotencyKeyOf(context: ActionContext): string {
  if (context.run === undefined) {
    throw EngineError.terminal("http.no_idempotency_key", "idempotency: true needs a step's run.idempotency_key");
  }
  return context.run.idempotency_key;
}

/** A leading `$env:NAME` in a url_template: the deployment's base URL (a declared var or secret). */
const ENV_PREFIX = /^\$env:[A-Z_][A-Z0-9_]*/;

/**
 * The request URL: the template rendered over the input (values URL-escaped,
 * absent ones an error). A leading `$env:NAME` is resolved apart from the
 * rendering, so run data can never name a variable: only the definition's
 * own text can.
 */
function renderUrl(template: string, input: Json, env: Env): string {
  const prefix = ENV_PREFIX.exec(template)?.[0] ?? "";
  const base = prefix === "" ? "" : resolveSecrets(prefix, env);
  return base + renderTemplate(template.slice(prefix.length), input, { escape: "url", strict: true });
}

/**
 * The request body; sets `content-type: application/json` for a JSON body when the
 * definition sets no content type.
 * - `body`: built from its sources over `{ input }` (`buildValue`), sent as JSON; no body
 *   when it is itself an optional path that selects nothing.
 * - `body_template`: rendered; text that parses as JSON is sent as JSON, other text as it
 *   is, unless the body is meant as JSON ({@link isMeantAsJson}): then `http.invalid_body`,
 *   and nothing is sent.
 */
function renderBody(
  implementation: { body_template?: string | undefined; body?: Json | undefined },
  input: Json,
  headers: Headers,
): string | undefined {
  if (implementation.body !== undefined) {
    const built = buildValue(implementation.body, { input }, "body", MAX_HTTP_BODY_CHARS);
    if (!built.found) {
      return undefined;
    }
    setDefaultJsonType(headers);
    return JSON.stringify(built.value);
  }
  const template = implementation.body_template;
  if (template === undefined) {
    return undefined;
  }
  const text = renderTemplate(template, input, { strict: true });
  const parsed = parseJson(text);
  if (parsed.ok) {
    setDefaultJsonType(headers);
    return JSON.stringify(parsed.value);
  }
  if (isMeantAsJson(template, headers.get("content-type"))) {
    throw invalidBody(text, parsed.reason);
  }
  return text;
}

function parseJson(text: string): { ok: true; value: unknown } | { ok: false; reason: string } {
  try {
    return { ok: true, value: JSON.parse(text) };
  } catch (error) {
    return { ok: false, reason: error instanceof Error ? error.message : String(error) };
  }
}

function setDefaultJsonType(headers: Headers): void {
  if (!headers.has("content-type")) {
    headers.set("content-type", "application/json");
  }
}

/** `application/json`, or any `…/…+json` type (`application/problem+json`), with or without parameters. */
const JSON_MEDIA_TYPE = /^\s*[\w.-]+\/(?:[\w.+-]*\+)?json\s*(?:;|$)/i;

/**
 * A body template is meant as JSON when the definition says so with a JSON content type, or,
 * setting none, when its text starts with `{` (not a mustache's `{{`) or `[`: the engine
 * would send it as JSON. Broken JSON is then refused rather than sent as `text/plain`.
 * Another declared type (`text/plain`) sends any text as it is.
 */
function isMeantAsJson(template: string, declared: string | null): boolean {
  if (declared !== null) {
    return JSON_MEDIA_TYPE.test(declared);
  }
  return /^\s*(?:\[|\{(?!\{))/.test(template);
}

/** Where the rendered text stops being JSON: the parser's message and the text just before that position. */
function invalidBody(text: string, reason: string): EngineError {
  // V8 names the offset ("… in JSON at position 20 (line 1 column 21)"); show the text up to it.
  const position = /at position (\d+)/.exec(reason)?.[1];
  const where =
    position === undefined
      ? `the text starts ${JSON.stringify(text.slice(0, 80))}`
      : `the text before position ${position} ends ${JSON.stringify(text.slice(Math.max(0, Number(position) - 80), Number(position)))}`;
  return EngineError.terminal(
    "http.invalid_body",
    `body_template rendered text that is not JSON, and the request is sent as JSON, so nothing was sent: ${reason}; ${where}. ` +
      "Write a value into JSON with {{json value}} (it quotes and escapes), or build the body with `body`",
  );
}

async function readBody(response: Response, mode: "json" | "text" | undefined): Promise<Json> {
  const text = await readTextCapped(response, MAX_HTTP_RESPONSE_BYTES);
  const isJson =
    mode === "json" || (mode === undefined && /\bjson\b/i.test(response.headers.get("content-type") ?? ""));
  if (!isJson || text === "") {
    return text;
  }
  try {
    return JSON.parse(text);
  } catch {
    if (response.ok) {
      throw EngineError.terminal(
        "http.invalid_json",
        `the response (${response.status}) is not JSON: ${text.slice(0, 200)}`,
      );
    }
    return text;
  }
}

/** The body as UTF-8 text, reading at most `maxBytes` (a larger body is cancelled, not buffered). */
async function readTextCapped(response: Response, maxBytes: number): Promise<string> {
  const tooLarge = () =>
    EngineError.terminal(
      "http.response_too_large",
      `the response body is larger than ${maxBytes} bytes (the limit of the http action)`,
    );
  const declared = response.headers.get("content-length");
  if (declared !== null && Number(declared) > maxBytes) {
    await response.body?.cancel();
    throw tooLarge();
  }
  // A declared length frames the body: no more can arrive, and the runtime's own
  // text() is cheaper than reading chunk by chunk (10 ms on the 100-way fan-out).
  if (response.body === null || (declared !== null && /^\d+$/.test(declared.trim()))) {
    return response.text();
  }
  // Chunks are collected as bytes and decoded once (a reply is mostly one or two chunks).
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  for (let next = await reader.read(); !next.done; next = await reader.read()) {
    received += next.value.byteLength;
    if (received > maxBytes) {
      await reader.cancel();
      throw tooLarge();
    }
    chunks.push(next.value);
  }
  if (chunks.length === 1 && chunks[0] !== undefined) {
    return new TextDecoder().decode(chunks[0]);
  }
  const bytes = new Uint8Array(received);
  let offset = 0;
  for (const chunk of chunks) {
    bytes.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return new TextDecoder().decode(bytes);
}

/** URLs may carry tokens in their query; errors show only origin and path. */
function redact(url: string): string {
  try {
    const parsed = new URL(url);
    return `${parsed.origin}${parsed.pathname}`;
  } catch {
    return "<invalid url>";
  }
}
