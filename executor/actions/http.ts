import { EngineError } from "../../lib/errors.ts";
import { renderJsonTemplate, renderTemplate } from "../../lib/expr/template.ts";
import { isCredentialHeader, type Json } from "../../schemas/index.ts";
import { resolveSecrets } from "../secrets.ts";
import type { ActionContext, ActionHandler } from "./types.ts";

/**
 * The largest response body read, in bytes: a peer that answers more fails
 * the call with `http.response_too_large` (not retryable) instead of filling
 * the executor's memory (128 MB per isolate, shared by the tasks of a group).
 * A task's output is capped far lower anyway (1,000,000 characters of JSON);
 * this leaves room for a mapping that keeps only part of a larger answer.
 */
export const MAX_HTTP_RESPONSE_BYTES = 4 * 1024 * 1024;

/**
 * `http`: one request rendered from Handlebars templates over the action
 * input. Output `{ status, headers, body }`. 429, 5xx, network errors and
 * timeouts are retryable (with the server's `Retry-After`); other 4xx are not.
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
    const body = renderBody(implementation.body_template, input, headers);
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
      throw EngineError.retryable(
        "http.status",
        `${implementation.method} ${redact(url)} answered ${response.status}`,
        retryAfterMs(response.headers.get("retry-after")),
      );
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

function renderBody(template: string | undefined, input: Json, headers: Headers): string | undefined {
  if (template === undefined) {
    return undefined;
  }
  const rendered = renderJsonTemplate(template, input, { strict: true });
  if (rendered.json) {
    if (!headers.has("content-type")) {
      headers.set("content-type", "application/json");
    }
    return JSON.stringify(rendered.value);
  }
  return rendered.text;
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

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) {
    return undefined;
  }
  const seconds = Number(header.trim());
  if (Number.isFinite(seconds) && seconds >= 0) {
    return Math.round(seconds * 1000);
  }
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
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
