/**
 * The two wire formats of the local LLM peer (scripts/lib/llm-server.mjs):
 * OpenAI Chat Completions and Anthropic Messages, read into one normalized
 * request and written back from one reply. Plain ESM, no dependencies.
 *
 * A normalized message is `{ role, text, tool_calls?, tool_results? }`:
 * - `role` is `system`, `user`, `assistant` or `tool`; Anthropic's `tool_result`
 *   blocks become a `tool` message of their own (before the user message's text,
 *   if it has any), as OpenAI sends them;
 * - `text` is the message's text parts, joined by newlines;
 * - `tool_calls` (assistant): `[{ id, name, input }]`, the input parsed;
 * - `tool_results` (tool): `[{ id, content, is_error? }]`, `content` as text.
 */

/**
 * @typedef {{ id: string, name: string, input: unknown }} ToolCall
 * @typedef {{ id: string, content: string, is_error?: true }} ToolResult
 * @typedef {{ role: string, text: string, tool_calls?: ToolCall[], tool_results?: ToolResult[] }} Message
 * @typedef {{ name: string, schema: unknown }} Tool
 * @typedef {object} WireRequest
 * @property {"openai" | "anthropic"} flavour
 * @property {string} model
 * @property {Message[]} messages
 * @property {Tool[]} tools
 * @property {Tool | undefined} forced  the tool the request forces (`tool_choice`), if any
 * @property {unknown} format           the JSON Schema of a structured-output request, else undefined
 * @property {Record<string, unknown>} options  `tool_choice`, `parallel_tool_calls`, as sent
 */

/**
 * A reply in neither format yet: text, or tool calls (`arguments` is the
 * JSON text OpenAI sends; `input` what Anthropic sends).
 * @typedef {{ text: string } | { calls: Array<{ id: string, name: string, input: unknown, arguments: string }> }} Reply
 */

/**
 * @param {"openai" | "anthropic"} flavour
 * @param {Record<string, any>} body
 * @returns {WireRequest}
 */
export function readRequest(flavour, body) {
  const tools = flavour === "openai" ? openAiTools(body) : anthropicTools(body);
  const forcedName = flavour === "openai" ? openAiForced(body) : anthropicForced(body);
  const options = {};
  for (const name of ["tool_choice", "parallel_tool_calls"]) {
    if (body[name] !== undefined) options[name] = body[name];
  }
  return {
    flavour,
    model: String(body.model ?? "unknown"),
    messages: flavour === "openai" ? openAiMessages(body) : anthropicMessages(body),
    tools,
    forced: forcedName === undefined ? undefined : tools.find((tool) => tool.name === forcedName),
    format: flavour === "openai" ? openAiFormat(body) : anthropicFormat(body),
    options,
  };
}

/** @param {Record<string, any>} body @returns {Tool[]} */
function openAiTools(body) {
  const list = Array.isArray(body.tools) ? body.tools : [];
  return list.map((tool) => ({ name: String(tool?.function?.name ?? ""), schema: tool?.function?.parameters ?? {} }));
}

/** @param {Record<string, any>} body @returns {Tool[]} */
function anthropicTools(body) {
  const list = Array.isArray(body.tools) ? body.tools : [];
  return list.map((tool) => ({ name: String(tool?.name ?? ""), schema: tool?.input_schema ?? {} }));
}

/** `{ type: "function", function: { name } }` names the tool; `"required"` means the first. @param {Record<string, any>} body */
function openAiForced(body) {
  if (body.tool_choice && typeof body.tool_choice === "object") return body.tool_choice.function?.name;
  return body.tool_choice === "required" ? body.tools?.[0]?.function?.name : undefined;
}

/** `{ type: "tool", name }` names the tool; `{ type: "any" }` (the AI SDK's one `json` tool) means the first. @param {Record<string, any>} body */
function anthropicForced(body) {
  if (body.tool_choice?.type === "tool") return body.tool_choice.name;
  return body.tool_choice?.type === "any" ? body.tools?.[0]?.name : undefined;
}

/** @param {Record<string, any>} body */
function openAiFormat(body) {
  const format = body.response_format;
  if (format?.type === "json_schema") return format.json_schema?.schema ?? {};
  if (format?.type === "json_object") return { type: "object", properties: { answer: { type: "string" } } };
  return undefined;
}

/** @param {Record<string, any>} body */
function anthropicFormat(body) {
  const format = body.output_config?.format;
  return format?.type === "json_schema" ? (format.schema ?? {}) : undefined;
}

/** @param {Record<string, any>} body @returns {Message[]} */
function openAiMessages(body) {
  const list = Array.isArray(body.messages) ? body.messages : [];
  return list.map((m) => {
    const role = String(m?.role ?? "");
    if (role === "tool") {
      return {
        role,
        text: "",
        tool_results: [{ id: String(m?.tool_call_id ?? ""), content: contentText(m?.content) }],
      };
    }
    /** @type {Message} */
    const message = { role, text: contentText(m?.content) };
    if (Array.isArray(m?.tool_calls)) {
      message.tool_calls = m.tool_calls.map((call) => ({
        id: String(call?.id ?? ""),
        name: String(call?.function?.name ?? ""),
        input: parseOr(call?.function?.arguments),
      }));
    }
    return message;
  });
}

/** @param {Record<string, any>} body @returns {Message[]} */
function anthropicMessages(body) {
  const system = body.system === undefined ? [] : [{ role: "system", text: contentText(body.system) }];
  const list = Array.isArray(body.messages) ? body.messages : [];
  return [...system, ...list.flatMap(anthropicMessage)];
}

/** One Anthropic message; a user message's `tool_result` blocks become a `tool` message. @returns {Message[]} */
function anthropicMessage(/** @type {any} */ m) {
  const role = String(m?.role ?? "");
  const blocks = Array.isArray(m?.content) ? m.content : [];
  const text = contentText(m?.content);
  const calls = blocks.filter((block) => block?.type === "tool_use");
  const results = blocks.filter((block) => block?.type === "tool_result");
  /** @type {Message[]} */
  const out = [];
  if (results.length > 0) {
    out.push({
      role: "tool",
      text: "",
      tool_results: results.map((block) => ({
        id: String(block.tool_use_id ?? ""),
        content: contentText(block.content),
        ...(block.is_error === true ? { is_error: /** @type {const} */ (true) } : {}),
      })),
    });
  }
  if (results.length === 0 || text.length > 0) {
    /** @type {Message} */
    const message = { role, text };
    if (calls.length > 0)
      message.tool_calls = calls.map((block) => ({
        id: String(block.id ?? ""),
        name: String(block.name ?? ""),
        input: block.input,
      }));
    out.push(message);
  }
  return out;
}

/** Text of a message's content: a string, or the text of its text blocks (not its tool results). @param {unknown} content */
function contentText(content) {
  if (typeof content === "string") return content;
  if (!Array.isArray(content)) return "";
  return content
    .map((part) => (part && typeof part === "object" && typeof part.text === "string" ? part.text : ""))
    .filter((text) => text.length > 0)
    .join("\n");
}

/** @param {unknown} text */
export function parseOr(text) {
  if (typeof text !== "string") return text;
  try {
    return JSON.parse(text);
  } catch {
    return text;
  }
}

/**
 * The words the request carries, for `usage`: every message's text, tool call
 * arguments and tool results (`clean` takes the markers out).
 * @param {WireRequest} request
 * @param {(text: string) => string} clean
 * @param {(text: string) => number} countWords
 */
export function inputWords(request, clean, countWords) {
  let words = 0;
  for (const message of request.messages) {
    words += countWords(clean(message.text));
    for (const call of message.tool_calls ?? []) words += countWords(JSON.stringify(call.input ?? null));
    for (const result of message.tool_results ?? []) words += countWords(result.content);
  }
  return words;
}

/**
 * The answer in the request's format.
 * @param {WireRequest} request
 * @param {Reply} reply
 * @param {{ id: number, inputTokens: number, outputTokens: number }} meta
 */
export function writeReply(request, reply, meta) {
  return request.flavour === "openai" ? openAiReply(request, reply, meta) : anthropicReply(request, reply, meta);
}

/** @param {WireRequest} request @param {Reply} reply @param {{ id: number, inputTokens: number, outputTokens: number }} meta */
function openAiReply(request, reply, meta) {
  const message =
    "calls" in reply
      ? {
          role: "assistant",
          content: null,
          tool_calls: reply.calls.map((call) => ({
            id: call.id,
            type: "function",
            function: { name: call.name, arguments: call.arguments },
          })),
        }
      : { role: "assistant", content: reply.text };
  return {
    id: `chatcmpl-${meta.id}`,
    object: "chat.completion",
    created: Math.floor(Date.now() / 1000),
    model: request.model,
    choices: [{ index: 0, message, finish_reason: "calls" in reply ? "tool_calls" : "stop" }],
    usage: {
      prompt_tokens: meta.inputTokens,
      completion_tokens: meta.outputTokens,
      total_tokens: meta.inputTokens + meta.outputTokens,
    },
  };
}

/** @param {WireRequest} request @param {Reply} reply @param {{ id: number, inputTokens: number, outputTokens: number }} meta */
function anthropicReply(request, reply, meta) {
  const content =
    "calls" in reply
      ? reply.calls.map((call) => ({ type: "tool_use", id: call.id, name: call.name, input: call.input }))
      : [{ type: "text", text: reply.text }];
  return {
    id: `msg_${meta.id}`,
    type: "message",
    role: "assistant",
    model: request.model,
    content,
    stop_reason: "calls" in reply ? "tool_use" : "end_turn",
    stop_sequence: null,
    usage: { input_tokens: meta.inputTokens, output_tokens: meta.outputTokens },
  };
}
