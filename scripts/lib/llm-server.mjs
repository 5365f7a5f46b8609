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
 *   POST /v1/messages          Anthropic Messages. Structured output through
 *                              `output_config.format` (json_schema: the text is
 *                              the JSON) or a forced tool (`tool_choice: { type:
 *                              "tool", name }` or `{ type: "any" }`: a `tool_use`
 *                              block), the two ways the AI SDK asks for it. `usage.input_tokens` /
 *                              `output_tokens`.
 *   GET  /hits/:key            { key, count }: requests that carried `[[key:K]]`.
 *   GET  /seen/:key            { key, count, credentials }: also the credentials
 *                              (`authorization` / `x-api-key`) those requests sent.
 *   POST /reset                clears every counter.
 *
 * Failures on demand come from markers in the last user message, described in
 * llm-answers.mjs (`[[fail:503]]`, `[[times:1]]`, `[[retry-after:1]]`,
 * `[[invalid-json]]`, `[[wrong-shape]]`, `[[echo-credential]]`).
 *
 * Standalone: `node scripts/lib/llm-server.mjs [--port N]` prints its URL and
 * runs until its standard input closes or SIGINT/SIGTERM.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";
import { answerText, countWords, readDirectives } from "./llm-answers.mjs";

const MAX_BODY_BYTES = 4 * 1024 * 1024;

/**
 * @typedef {object} LlmServer
 * @property {string} url     e.g. `http://127.0.0.1:41234` (no trailing slash; APIs under `/v1`)
 * @property {number} port
 * @property {(key: string) => number} hits
 * @property {() => Promise<void>} close
 */

/**
 * What the server remembers: the requests seen per `[[key=…]]` directive (with
 * the credential each carried) and the number of the last answer.
 * @typedef {{ seen: Map<string, { count: number, credentials: string[] }>, sequence: number }} LlmState
 */

/**
 * Starts the server on 127.0.0.1.
 * @param {{ port?: number }} [options] `port` 0 (default) picks a free port.
 * @returns {Promise<LlmServer>}
 */
export async function startLlmServer({ port = 0 } = {}) {
  /** @type {LlmState} */
  const state = { seen: new Map(), sequence: 0 };

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

/**
 * Answers one request: the counters (`/hits/:key`, `/seen/:key`, `/reset`) or one completion.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {LlmState} state
 */
async function handle(req, res, state) {
  const url = new URL(req.url ?? "/", "http://127.0.0.1");
  const path = url.pathname.replace(/^\/v1(?=\/)/, "");
  const keyRoute = /^\/(hits|seen)\/([^/]+)$/.exec(path);
  if (req.method === "GET" && keyRoute) {
    const key = decodeURIComponent(keyRoute[2] ?? "");
    const entry = state.seen.get(key) ?? { count: 0, credentials: [] };
    return sendJson(res, 200, keyRoute[1] === "hits" ? { key, count: entry.count } : { key, ...entry });
  }
  if (req.method === "POST" && path === "/reset") {
    state.seen.clear();
    return sendJson(res, 200, { ok: true });
  }
  const flavour =
    req.method === "POST" && path === "/chat/completions"
      ? "openai"
      : req.method === "POST" && path === "/messages"
        ? "anthropic"
        : undefined;
  if (!flavour)
    return sendJson(res, 404, { error: { message: `no route ${req.method} ${url.pathname}`, type: "not_found" } });
  const body = await readJson(req);
  if (body === undefined || typeof body !== "object" || body === null)
    return sendError(res, flavour, 400, "the body must be a JSON object");
  if (body.stream === true) return sendError(res, flavour, 400, "streaming is not supported by this test server");
  const messages = flavour === "openai" ? openAiMessages(body) : anthropicMessages(body);
  const lastUser = [...messages].reverse().find((m) => m.role === "user")?.text ?? "";
  const { text: asked, directives } = readDirectives(lastUser);
  const credential = String(req.headers.authorization ?? req.headers["x-api-key"] ?? "");
  let attempt = 1;
  if (directives.key !== undefined) {
    const entry = state.seen.get(directives.key) ?? { count: 0, credentials: [] };
    entry.count += 1;
    entry.credentials.push(credential);
    state.seen.set(directives.key, entry);
    attempt = entry.count;
  }
  if (directives.echoCredential) return sendError(res, flavour, 401, `Incorrect API key provided: ${credential}`);
  if (directives.fail !== undefined && (directives.times === undefined || attempt <= directives.times)) {
    const headers = directives.retryAfter === undefined ? {} : { "retry-after": String(directives.retryAfter) };
    return sendError(res, flavour, directives.fail, `failing on purpose (attempt ${attempt})`, headers);
  }
  const inputTokens = messages.reduce((total, m) => total + countWords(readDirectives(m.text).text), 0);
  state.sequence += 1;
  const question = directives.echoCredentialInAnswer ? `${asked} (credential: ${credential})` : asked;
  const model = String(body.model ?? "unknown");
  return flavour === "openai"
    ? sendJson(res, 200, openAiAnswer(body, { question, directives, inputTokens, model, id: state.sequence }))
    : sendJson(res, 200, anthropicAnswer(body, { question, directives, inputTokens, model, id: state.sequence }));
}

/**
 * @typedef {{ question: string, directives: import("./llm-answers.mjs").Directives, inputTokens: number, model: string, id: number }} AnswerContext
 */

/** @param {any} body @returns {{ role: string, text: string }[]} */
function openAiMessages(body) {
  const list = Array.isArray(body.messages) ? body.messages : [];
  return list.map((/** @type {any} */ m) => ({ role: String(m?.role ?? ""), text: contentText(m?.content) }));
}

/** @param {any} body @returns {{ role: string, text: string }[]} */
function anthropicMessages(body) {
  const system = body.system === undefined ? [] : [{ role: "system", text: contentText(body.system) }];
  const list = Array.isArray(body.messages) ? body.messages : [];
  return [
    ...system,
    ...list.map((/** @type {any} */ m) => ({ role: String(m?.role ?? ""), text: contentText(m?.content) })),
  ];
}

/** Text of a message's content: a string, or the text of its text blocks. @param {unknown} content */
function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && typeof part.text === "string" ? part.text : ""))
    .filter((text) => text.length > 0)
    .join("\n");
}

/** @param {any} body @param {AnswerContext} ctx */
function openAiAnswer(body, ctx) {
  const forced =
    body.tool_choice && typeof body.tool_choice === "object"
      ? body.tool_choice.function?.name
      : body.tool_choice === "required"
        ? body.tools?.[0]?.function?.name
        : undefined;
  const tool = forced ? (body.tools ?? []).find((/** @type {any} */ t) => t?.function?.name === forced) : undefined;
  const format = body.response_format;
  /** @type {Record<string, unknown>} */
  let message;
  let outputText;
  if (tool) {
    outputText = answerText({
      question: ctx.question,
      schema: tool.function.parameters ?? {},
      directives: ctx.directives,
    });
    message = {
      role: "assistant",
      content: null,
      tool_calls: [{ id: `call_${ctx.id}`, type: "function", function: { name: forced, arguments: outputText } }],
    };
  } else {
    const schema =
      format?.type === "json_schema"
        ? (format.json_schema?.schema ?? {})
        : format?.type === "json_object"
          ? { type: "object", properties: { answer: { type: "string" } } }
          : undefined;
    outputText = answerText({ question: ctx.question, schema, directives: ctx.directives });
    message = { role: "assistant", content: outputText };
  }
  const outputTokens = countWords(outputText);
  return {
    id: `chatcmpl-${ctx.id}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: ctx.model,
    choices: [{ index: 0, message, finish_reason: tool ? "tool_calls" : "stop" }],
    usage: {
      prompt_tokens: ctx.inputTokens,
      completion_tokens: outputTokens,
      total_tokens: ctx.inputTokens + outputTokens,
    },
  };
}

/** @param {any} body @param {AnswerContext} ctx */
function anthropicAnswer(body, ctx) {
  // `{ type: "tool", name }` names the tool; `{ type: "any" }` (what the AI SDK sends with its one `json` tool) means the first.
  const forced =
    body.tool_choice?.type === "tool"
      ? body.tool_choice.name
      : body.tool_choice?.type === "any"
        ? body.tools?.[0]?.name
        : undefined;
  const tool = forced ? (body.tools ?? []).find((/** @type {any} */ t) => t?.name === forced) : undefined;
  const format = body.output_config?.format;
  /** @type {unknown[]} */
  let content;
  let outputText;
  if (tool) {
    outputText = answerText({ question: ctx.question, schema: tool.input_schema ?? {}, directives: ctx.directives });
    let input;
    try {
      input = JSON.parse(outputText);
    } catch {
      // A tool call always carries JSON; "invalid JSON" becomes a string where an object was asked for.
      input = { text: outputText };
    }
    content = [{ type: "tool_use", id: `toolu_${ctx.id}`, name: forced, input }];
  } else {
    const schema = format?.type === "json_schema" ? (format.schema ?? {}) : undefined;
    outputText = answerText({ question: ctx.question, schema, directives: ctx.directives });
    content = [{ type: "text", text: outputText }];
  }
  return {
    id: `msg_${ctx.id}`,
    type: "message",
    role: "assistant",
    model: ctx.model,
    content,
    stop_reason: tool ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: ctx.inputTokens, output_tokens: countWords(outputText) },
  };
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
