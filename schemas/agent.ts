import { z } from "zod";
import { JsonSchema, JsonValue } from "./common.ts";
import { ErrorSummary } from "./errors.ts";

/**
 * An `llm` step with tools, between its turns (docs/definitions.md, "Agents").
 * A turn that asks for tools suspends the step; the coordinator runs each call
 * as a dispatch of its own and writes its result here; the next turn is
 * dispatched with this state, which is all the executor keeps of the loop.
 */

/** Input and output tokens. */
export const Tokens = z.strictObject({ input: z.number().int().min(0), output: z.number().int().min(0) });

/** A tool call the model asked for, and once it settled, its output or error. */
export const AgentCall = z.strictObject({
  /** The provider's id of the call, which the result must name. */
  id: z.string().min(1).max(256),
  name: z.string().min(1).max(256),
  input: JsonValue,
  /**
   * What the tool returned (over {@link MAX_TOOL_RESULT_CHARS} of JSON, a
   * summary with its digest: the whole is in the journal's `tool_call.completed`).
   */
  output: JsonValue.optional(),
  /** Why it has no output: it failed, its input was refused, or its approval was. */
  error: ErrorSummary.optional(),
});
export type AgentCall = z.infer<typeof AgentCall>;

/** One model call that answered: who answered, what it cost, and the tools it asked for. */
export const AgentTurn = z.strictObject({
  /** The model definition that answered (one of the fallback chain). */
  model: z.string(),
  tokens: Tokens,
  cost_usd: z.number().min(0),
  finish_reason: z.string(),
  /** A call that asked the model to fix an answer that did not match `produces`: not counted by `max_turns`. */
  repair: z.literal(true).optional(),
  /** Text the model wrote beside its tool calls. */
  text: z.string().optional(),
  calls: z.array(AgentCall),
});
export type AgentTurn = z.infer<typeof AgentTurn>;

/** An MCP tool's schema as the server listed it when the loop started, and its pin. */
export const ListedMcpTool = z.strictObject({ pin: z.string(), input_schema: JsonSchema });

export const AgentState = z.strictObject({
  turns: z.array(AgentTurn),
  /** Every turn's tokens and cost, summed. */
  usage: z.strictObject({ tokens: Tokens, cost_usd: z.number().min(0) }),
  /** The MCP tools without a declared schema, by tool name, as listed at the first turn. */
  mcp: z.record(z.string(), ListedMcpTool).optional(),
});
export type AgentState = z.infer<typeof AgentState>;

/** The most calls of one turn that run; the rest are answered `llm.too_many_calls`. */
export const MAX_TOOL_CALLS_PER_TURN = 32;
/** A tool result longer than this much JSON reaches the model as a summary. */
export const MAX_TOOL_RESULT_CHARS = 32_768;
/** The loop's state, as canonical JSON, may be at most this long (`llm.conversation_too_large`). */
export const MAX_AGENT_STATE_CHARS = 262_144;
