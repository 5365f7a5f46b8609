/**
 * Scripted conversations for the local LLM peer (scripts/lib/llm-server.mjs).
 * A test posts `{ turns: [...] }` to `/scripts/K`; a request that carries
 * `[[script:K]]` is answered with the turn whose index is the number of
 * assistant messages in the request, so the same conversation replayed (a
 * retried or re-dispatched turn) gets the same answer. A turn is exactly one of:
 *
 * - `{ tool_calls: [{ name, input, id? }] }`: the model calls those tools
 *   (OpenAI `tool_calls`, `finish_reason: "tool_calls"`; Anthropic `tool_use`
 *   blocks, `stop_reason: "tool_use"`); ids default to `call_<turn>_<index>` (OpenAI) or
 *   `toolu_<turn>_<index>` (Anthropic);
 * - `{ text }`: a text answer;
 * - `{ json }`: that JSON value, as text, or as the arguments of the tool the
 *   request forces (how the AI SDK asks some models for structured output);
 * - `{ fail: status }`: an HTTP error with that status (400..599).
 */

const TURN_KINDS = ["tool_calls", "text", "json", "fail"];

/**
 * @typedef {{ tool_calls: Array<{ name: string, input: Record<string, unknown>, id?: string }> } | { text: string } | { json: unknown } | { fail: number }} Turn
 */

/**
 * The turns of a posted script, or the first problem with it (a path and why).
 * @param {unknown} body
 * @returns {{ turns: Turn[] } | { problem: string }}
 */
export function parseScript(body) {
  if (!isRecord(body) || !Array.isArray(body.turns) || Object.keys(body).some((key) => key !== "turns")) {
    return { problem: "the body must be { turns: [...] }" };
  }
  for (const [index, turn] of body.turns.entries()) {
    const problem = turnProblem(turn);
    if (problem !== undefined) return { problem: `turns.${index}: ${problem}` };
  }
  return { turns: /** @type {Turn[]} */ (body.turns) };
}

/** @param {unknown} turn @returns {string | undefined} */
function turnProblem(turn) {
  if (!isRecord(turn)) return "a turn must be an object";
  const keys = Object.keys(turn);
  if (keys.length !== 1 || !TURN_KINDS.includes(keys[0] ?? "")) {
    return `a turn has exactly one of ${TURN_KINDS.join(", ")}`;
  }
  if ("text" in turn && typeof turn.text !== "string") return "text must be a string";
  if ("fail" in turn && !(Number.isInteger(turn.fail) && Number(turn.fail) >= 400 && Number(turn.fail) <= 599)) {
    return "fail must be an HTTP status from 400 to 599";
  }
  if ("tool_calls" in turn) return toolCallsProblem(turn.tool_calls);
  return undefined;
}

/** @param {unknown} calls @returns {string | undefined} */
function toolCallsProblem(calls) {
  if (!Array.isArray(calls) || calls.length === 0) return "tool_calls must be a non-empty array";
  for (const [index, call] of calls.entries()) {
    const extra = isRecord(call) ? Object.keys(call).filter((key) => !["name", "input", "id"].includes(key)) : [];
    if (
      !isRecord(call) ||
      typeof call.name !== "string" ||
      call.name.length === 0 ||
      !isRecord(call.input) ||
      (call.id !== undefined && typeof call.id !== "string") ||
      extra.length > 0
    ) {
      return `tool_calls.${index} must be { name: string, input: object, id?: string }`;
    }
  }
  return undefined;
}

/**
 * The reply a script gives a request (see llm-wire.mjs `Reply`), or the status it fails with.
 * @param {Turn} turn
 * @param {number} index the turn's index (the request's assistant messages)
 * @param {import("./llm-wire.mjs").WireRequest} request
 * @returns {import("./llm-wire.mjs").Reply | { fail: number }}
 */
export function scriptedReply(turn, index, request) {
  const prefix = callIdPrefix(request);
  if ("fail" in turn) return { fail: turn.fail };
  if ("text" in turn) return { text: turn.text };
  if ("tool_calls" in turn) {
    return {
      calls: turn.tool_calls.map((call, i) => ({
        id: call.id ?? `${prefix}${index}_${i}`,
        name: call.name,
        input: call.input,
        arguments: JSON.stringify(call.input),
      })),
    };
  }
  const text = JSON.stringify(turn.json ?? null);
  return request.forced === undefined
    ? { text }
    : { calls: [{ id: `${prefix}${index}_0`, name: request.forced.name, input: turn.json, arguments: text }] };
}

/** How each format's own ids begin. @param {import("./llm-wire.mjs").WireRequest} request */
export function callIdPrefix(request) {
  return request.flavour === "openai" ? "call_" : "toolu_";
}

/** @param {unknown} value @returns {value is Record<string, unknown>} */
function isRecord(value) {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
