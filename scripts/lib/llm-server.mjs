/**
 * The local LLM peer: a small OpenAI- and Anthropic-compatible HTTP server on
 * 127.0.0.1 with deterministic answers (scripts/lib/llm-answers.mjs), for the
 * `llm` action's tests (in workerd through vitest, and under `npm run dev`).
 * Plain Node, no dependencies. No streaming: a request with `stream: true` is
 * answered 400, since the engine never streams.
 *
 * Routes (with or without the `/v1` prefix, so either base URL works):
 *
 *   POST /v1/chat/completions  OpenAI Chat Completions. Structured output when
 *                              `response_format` is `json_schema` (the answer is
 *                              built from its schema) or `json_object`; a forced
 *                              function call (`tool_choice: { type: "function",
 *                              function: { name } }` or `"required"`) is answered as a tool call
 *                              whose arguments are built from that tool's schema.
 *                              `usage` counts words (see llm-answers.mjs).
 *                              A scripted turn may answer with tool calls instead
 *                              (`tool_calls`, `finish_reason: "tool_calls"`).
 *   POST /v1/messages          Anthropic Messages. Structured output through
 *                              `output_config.format` (json_schema: the text is
 *                              the JSON) or a forced tool (`tool_choice: { type:
 *                              "tool", name }` or `{ type: "any" }`: a `tool_use`
 *                              block), the two ways the AI SDK asks for it. `usage.input_tokens` /
 *                              `output_tokens`. Scripted tool calls are `tool_use`
 *                              blocks, `stop_reason: "tool_use"`.
 *   POST /scripts/:key         { turns: [...] }: the answers to requests carrying
 *                              `[[script:K]]`, by the number of assistant messages
 *                              in the request (scripts/lib/llm-scripts.mjs). 400
 *                              naming the first problem of a malformed script.
 *   GET  /hits/:key            { key, count }: requests that carried `[[key:K]]`
 *                              or `[[script:K]]`.
 *   GET  /seen/:key            { key, count, credentials }: also the credentials
 *                              (`authorization` / `x-api-key`) those requests sent.
 *   GET  /requests/:key        { key, requests: [{ model, messages, tools,
 *                              tool_choice?, parallel_tool_calls? }] }: each request,
 *                              its messages normalized (scripts/lib/llm-wire.mjs).
 *   POST /reset                clears every counter and script.
 *
 * Failures on demand come from markers in the text of the user messages
 * (every one, the first occurrence of each marker winning; tool results are
 * not read), described in llm-answers.mjs (`[[fail:503]]`, `[[times:1]]`,
 * `[[retry-after:1]]`, `[[invalid-json]]`, `[[wrong-shape]]`,
 * `[[echo-credential]]`, `[[fail-model:<model_id>:<status>]]`,
 * `[[slow-model:<model_id>:<ms>]]`). `[[use-tools]]` / `[[use-tools:a,b]]`
 * make an agent without a script: the first turn calls every offered tool (or
 * those named) once, with inputs built from their schemas; later turns answer.
 *
 * Standalone: `node scripts/lib/llm-server.mjs [--port N]` prints its URL and
 * runs until its standard input closes or SIGINT/SIGTERM.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { answerText, countWords, directivesOf, readDirectives, valueFromSchema } from "./llm-answers.mjs";
import { callIdPrefix, parseScript, scriptedReply } from "./llm-scripts.mjs";
import { inputWords, readRequest, writeReply } from "./llm-wire.mjs";

const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * @typedef {object} LlmServer
 * @property {string} url     e.g. `http://127.0.0.1:41234` (no trailing slash; APIs under `/v1`)
 * @property {number} port
 * @property {(key: string) => number} hits
 * @property {() => Promise<void>} close
 */

/**
 * What the server remembers: per key (`[[key:K]]` or `[[script:K]]`), the
 * requests seen (with the credential each carried and the request itself,
 * normalized); the scripts posted; and the number of the last answer.
 * @typedef {{ count: number, credentials: string[], requests: Record<string, unknown>[] }} Seen
 * @typedef {{ seen: Map<string, Seen>, scripts: Map<string, import("./llm-scripts.mjs").Turn[]>, sequence: number }} LlmState
 */

/**
 * Starts the server on 127.0.0.1.
 * @param {{ port?: number }} [options] `port` 0 (default) picks a free port.
 * @returns {Promise<LlmServer>}
 */
export async function startLlmServer({ port = 0 } = {}) {
  /** @type {LlmState} */
  const state = { seen: new Map(), scripts: new Map(), sequence: 0 };

  const server = createServer((req, res) => {
    handle(req, res, state).catch((err) => {
      try {
        if (!res.headersSent)
          sendJson(res, 500, { error: { message: String(err?.message ?? err), type: "server_error" } });
        else res.destroy();
      } catch {
        /* socket gone */
      }
    });
  });
  server.keepAliveTimeout = 5_000;

  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    port: address.port,
    hits: (key) => state.seen.get(key)?.count ?? 0,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections?.();
        server.close(() => resolve(undefined));
      }),
  };
}

const FLAVOURS = /** @type {const} */ ({ "/chat/completions": "openai", "/messages": "anthropic" });

/**
 * Answers one request: the counters and scripts, or one completion.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {LlmState} state
 */
async function handle(req, res, state) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const path = url.pathname.replace(/^\/v1(?=\/)/, "");
  const keyRoute = /^\/(hits|seen|requests|scripts)\/([^/]+)$/.exec(path);
  const key = decodeURIComponent(keyRoute?.[2] ?? "");
  if (req.method === "GET" && keyRoute && keyRoute[1] !== "scripts") {
    const entry = state.seen.get(key) ?? { count: 0, credentials: [], requests: [] };
    const views = {
      hits: { key, count: entry.count },
      seen: { key, count: entry.count, credentials: entry.credentials },
      requests: { key, requests: entry.requests },
    };
    return sendJson(res, 200, views[/** @type {"hits" | "seen" | "requests"} */ (keyRoute[1])]);
  }
  if (req.method === "POST" && keyRoute?.[1] === "scripts") {
    const script = parseScript(await readJson(req));
    if ("problem" in script) return sendJson(res, 400, { error: { message: script.problem, type: "invalid_script" } });
    state.scripts.set(key, script.turns);
    return sendJson(res, 200, { key, turns: script.turns.length });
  }
  if (req.method === "POST" && path === "/reset") {
    state.seen.clear();
    state.scripts.clear();
    return sendJson(res, 200, { ok: true });
  }
  const flavour = req.method === "POST" && Object.hasOwn(FLAVOURS, path) ? FLAVOURS[path] : undefined;
  if (!flavour)
    return sendJson(res, 404, { error: { message: `no route ${req.method} ${url.pathname}`, type: "not_found" } });
  const body = await readJson(req);
  if (body === undefined || typeof body !== "object" || body === null || Array.isArray(body))
    return sendError(res, flavour, 400, "the body must be a JSON object");
  if (body.stream === true) return sendError(res, flavour, 400, "streaming is not supported by this test server");
  const credential = String(req.headers.authorization ?? req.headers["x-api-key"] ?? "");
  return complete(res, readRequest(flavour, body), credential, state);
}

/**
 * Answers one completion: the failures the markers ask for, a script's turn, or the default answer.
 * @param {import("node:http").ServerResponse} res
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @param {string} credential
 * @param {LlmState} state
 */
async function complete(res, request, credential, state) {
  const users = request.messages.filter((m) => m.role === "user");
  const directives = directivesOf(users.map((m) => m.text));
  const asked = readDirectives(users.at(-1)?.text ?? "").text;
  const attempt = remember(state, directives, request, credential);
  const { flavour } = request;
  const headers = directives.retryAfter === undefined ? {} : { "retry-after": String(directives.retryAfter) };
  if (directives.echoCredential) return sendError(res, flavour, 401, `Incorrect API key provided: ${credential}`);
  if (directives.fail !== undefined && (directives.times === undefined || attempt <= directives.times)) {
    return sendError(res, flavour, directives.fail, `failing on purpose (attempt ${attempt})`, headers);
  }
  const modelStatus = Object.hasOwn(directives.failModels, request.model)
    ? directives.failModels[request.model]
    : undefined;
  if (modelStatus !== undefined) {
    return sendError(res, flavour, modelStatus, `model ${request.model} is failing on purpose`, headers);
  }
  const slowMs = Object.hasOwn(directives.slowModels, request.model) ? directives.slowModels[request.model] : 0;
  if (slowMs > 0) await new Promise((resolve) => setTimeout(resolve, slowMs));
  state.sequence += 1;
  const question = directives.echoCredentialInAnswer ? `${asked} (credential: ${credential})` : asked;
  const reply =
    directives.script === undefined
      ? (useToolsReply(request, question, directives) ?? defaultReply(request, question, directives, state.sequence))
      : scriptReply(request, directives.script, state);
  if ("problem" in reply) return sendError(res, flavour, 400, reply.problem);
  if ("fail" in reply) return sendError(res, flavour, reply.fail, `scripted failure (${reply.fail})`, headers);
  const inputTokens = inputWords(request, (text) => readDirectives(text).text, countWords);
  const outputTokens =
    "calls" in reply
      ? reply.calls.reduce((total, call) => total + countWords(call.arguments), 0)
      : countWords(reply.text);
  return sendJson(res, 200, writeReply(request, reply, { id: state.sequence, inputTokens, outputTokens }));
}

/**
 * Counts the request under its keys (`[[key:K]]`, `[[script:K]]`) and keeps it
 * for `/requests/K`; returns its number under `[[key:K]]` (1 without one).
 * @param {LlmState} state
 * @param {import("./llm-answers.mjs").Directives} directives
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @param {string} credential
 */
function remember(state, directives, request, credential) {
  const keys = [...new Set([directives.key, directives.script])].filter((key) => key !== undefined);
  const seen = {
    model: request.model,
    messages: request.messages,
    tools: request.tools.map((t) => t.name),
    ...request.options,
  };
  for (const key of keys) {
    const entry = state.seen.get(key) ?? { count: 0, credentials: [], requests: [] };
    entry.count += 1;
    entry.credentials.push(credential);
    entry.requests.push(seen);
    state.seen.set(key, entry);
  }
  return directives.key === undefined ? 1 : (state.seen.get(directives.key)?.count ?? 1);
}

/**
 * The turn of script `key` for this request: the one at the number of assistant messages it carries.
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @param {string} key
 * @param {LlmState} state
 * @returns {import("./llm-wire.mjs").Reply | { fail: number } | { problem: string }}
 */
function scriptReply(request, key, state) {
  const turns = state.scripts.get(key);
  if (turns === undefined) return { problem: `no script ${key} was posted (POST /scripts/${key})` };
  const index = request.messages.filter((m) => m.role === "assistant").length;
  const turn = turns[index];
  if (turn === undefined) {
    return {
      problem: `script ${key} has ${turns.length} turns; this request, with ${index} assistant messages, asks for turn ${index}`,
    };
  }
  return scriptedReply(turn, index, request);
}

/**
 * The first turn under `[[use-tools]]`: one call of each named tool (or of
 * each tool offered, the forced one aside), its input built from the tool's
 * schema; nothing (answer as usual) on a later turn or with nothing to call.
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @param {string} question
 * @param {import("./llm-answers.mjs").Directives} directives
 * @returns {import("./llm-wire.mjs").Reply | { problem: string } | undefined}
 */
function useToolsReply(request, question, directives) {
  const named = directives.useTools;
  if (named === undefined || request.messages.some((m) => m.role === "assistant")) return undefined;
  const choosable = request.tools.filter((tool) => tool.name !== request.forced?.name);
  const unknown = named.filter((name) => !choosable.some((tool) => tool.name === name));
  if (unknown.length > 0) {
    const offered = choosable.map((tool) => tool.name).join(", ") || "none";
    return {
      problem: `[[use-tools]] names ${unknown.join(", ")}, which this request does not offer (offered: ${offered})`,
    };
  }
  const tools = named.length === 0 ? choosable : named.map((name) => choosable.find((tool) => tool.name === name));
  if (tools.length === 0) return undefined;
  const prefix = callIdPrefix(request);
  return {
    calls: tools.map((tool, index) => {
      const built = valueFromSchema(tool?.schema ?? {}, question);
      // A tool's input is an object, whatever a loose schema would allow.
      const input = typeof built === "object" && built !== null && !Array.isArray(built) ? built : {};
      return { id: `${prefix}0_${index}`, name: tool?.name ?? "", input, arguments: JSON.stringify(input) };
    }),
  };
}

/**
 * The unscripted answer: a forced tool's arguments built from its schema,
 * else text (JSON built from the structured-output schema, if asked for).
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @param {string} question
 * @param {import("./llm-answers.mjs").Directives} directives
 * @param {number} sequence
 * @returns {import("./llm-wire.mjs").Reply}
 */
function defaultReply(request, question, directives, sequence) {
  const forced = request.forced;
  if (forced === undefined) return { text: answerText({ question, schema: request.format, directives }) };
  const text = answerText({ question, schema: forced.schema ?? {}, directives });
  let input;
  try {
    input = JSON.parse(text);
  } catch {
    // A tool call always carries JSON; "invalid JSON" becomes a string where an object was asked for.
    input = { text };
  }
  return { calls: [{ id: `${callIdPrefix(request)}${sequence}`, name: forced.name, input, arguments: text }] };
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {"openai" | "anthropic"} flavour
 * @param {number} status
 * @param {string} message
 * @param {Record<string, string>} [headers]
 */
function sendError(res, flavour, status, message, headers = {}) {
  const type =
    status === 429
      ? "rate_limit_error"
      : status === 401
        ? "authentication_error"
        : status >= 500
          ? "api_error"
          : "invalid_request_error";
  const body =
    flavour === "anthropic" ? { type: "error", error: { type, message } } : { error: { message, type, code: null } };
  sendJson(res, status, body, headers);
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {unknown} body
 * @param {Record<string, string>} [headers]
 */
function sendJson(res, status, body, headers = {}) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "content-length": Buffer.byteLength(text), ...headers });
  res.end(text);
}

/** @param {import("node:http").IncomingMessage} req @returns {Promise<any>} */
async function readJson(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > MAX_BODY_BYTES) return undefined;
    chunks.push(chunk);
  }
  try {
    return JSON.parse(Buffer.concat(chunks).toString("utf8"));
  } catch {
    return undefined;
  }
}

// Standalone: print the URL, stop when stdin closes or on a signal.
if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const i = process.argv.indexOf("--port");
  const llm = await startLlmServer({ port: i > 0 ? Number(process.argv[i + 1]) || 0 : 0 });
  process.stdout.write(`${llm.url}\n`);
  const stop = () => {
    llm.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 2_000).unref();
  };
  process.stdin.on("end", stop);
  process.stdin.on("close", stop);
  process.stdin.resume();
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
}
