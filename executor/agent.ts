import type { ModelMessage, ToolResultPart } from "ai";
import { EngineError } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import { DEFAULT_LLM_MAX_TURNS } from "../schemas/actions.ts";
import {
  MAX_AGENT_STATE_CHARS,
  MAX_TOOL_CALLS_PER_TURN,
  type AgentCall,
  type AgentState,
  type AgentTurn,
} from "../schemas/agent.ts";
import type { Json, JsonObject, JsonSchema } from "../schemas/common.ts";
import type { TaskContext } from "../schemas/payload.ts";
import type { ResolvedLlmTool, ResolvedStep } from "../schemas/resolved.ts";
import { describeTools } from "./actions/mcp.ts";
import type { AgentTurnContext, ResolvedActionOf } from "./actions/types.ts";
import { checkProduces, checkRequires, DEFAULT_ACTION_TIMEOUT_MS, invokeAction, type InvokeOptions } from "./invoke.ts";
import { LimitNoRoom } from "./limits.ts";
import { writeStepOutput, type StepOutcome } from "./step-outcome.ts";

/**
 * An `llm` step with tools (docs/definitions.md, "Agents"), one model turn per
 * dispatch. A turn that asks for tools suspends the step with a `tools` wait
 * carrying the loop's state; the coordinator runs each call as a dispatch of
 * its own (with the tool action's retries, timeout, approval and undo), writes
 * the results into the state and dispatches the step again, which runs the
 * next turn. A turn that answers ends the step. Nothing is held between turns,
 * and a turn or call that completed is never made again.
 */

type LlmAction = ResolvedActionOf<"llm">;
export type AgentStep = ResolvedStep & { action: LlmAction & { implementation: { tools: ResolvedLlmTool[] } } };

/** The output keys an agent adds beside its answer. */
export const AGENT_OUTPUT_KEYS = ["tool_calls", "turns", "usage"] as const;

export function isAgentStep(step: ResolvedStep): step is AgentStep {
  return step.action.kind === "llm" && step.action.implementation.tools !== undefined;
}

/** One turn of an agent step: the model's answer ends the step; its tool calls suspend it. */
export async function runAgentTurn(
  step: AgentStep,
  input: Json,
  context: TaskContext,
  call: InvokeOptions,
  resumed: AgentState | undefined,
): Promise<StepOutcome> {
  const action = step.action;
  const state = resumed ?? (await startLoop(action, input, call));
  checkSize(action, state);
  checkBudget(action, state, undefined);
  const answered: AgentTurn[] = [];
  const agent: AgentTurnContext = {
    messages: conversation(state),
    tools: offered(action, state),
    parallel: action.implementation.parallel_tool_calls ?? true,
    answered: (turn) => answered.push(turn),
  };
  // The turn's calls are numbered within it, for the holder ids of its limits (executor/limits.ts).
  const place = { ...call.place, turn: state.turns.length + 1 };
  let output: Json;
  try {
    output = await invokeAction(action, input, { ...call, place, context: { ...call.context, agent } });
  } catch (thrown) {
    // A limit without room: the step waits, and the turn it makes once served goes on with this loop.
    throw thrown instanceof LimitNoRoom && thrown.suspends ? thrown.suspending({ agent: state }) : thrown;
  }
  const spent = metaOf(output);
  const next = withTurns(state, answered);
  const asked = answered.at(-1)?.calls ?? [];
  if (asked.length > 0) {
    checkTurns(action, next, spent);
    checkBudget(action, next, spent);
    const waiting = withCheckedCalls(next, agent.tools);
    checkSize(action, waiting, spent);
    return { next: "suspend", wait: { kind: "tools", state: waiting }, ran: true, usage: spent };
  }
  const answer = answerOf(output);
  checkProduces(action, answer);
  const final = { ...answer, ...agentOutput(next), _meta: usageJson(next.usage) };
  return { next: "continue", context: writeStepOutput(step, final, context), ran: true, usage: spent };
}

/**
 * Before the first turn: the step's input is checked, every `tool:` and `mcp:`
 * tool must be on the run's allowlist (as a step's would; the step fails
 * before the model is called otherwise), and the MCP tools that declare no
 * schema are listed once, so every turn offers the same schema and each call
 * is pinned to it.
 */
async function startLoop(action: LlmAction, input: Json, call: InvokeOptions): Promise<AgentState> {
  checkRequires(action, input);
  const tools = action.implementation.tools ?? [];
  checkAllowlist(tools, call.context.payload.tools);
  const state: AgentState = { turns: [], usage: { tokens: { input: 0, output: 0 }, cost_usd: 0 } };
  const unlisted = tools.filter((tool) => tool.input_schema === null && tool.action.kind === "mcp");
  if (unlisted.length === 0) {
    return state;
  }
  const signal = AbortSignal.any([call.taskSignal, call.clock.timeout(DEFAULT_ACTION_TIMEOUT_MS)]);
  const mcp: NonNullable<AgentState["mcp"]> = {};
  for (const tool of unlisted) {
    if (tool.action.kind !== "mcp") {
      continue;
    }
    const { server, tool: name, pin } = tool.action.implementation;
    const found = await describeTools(server, [{ tool: name, ...(pin === undefined ? {} : { pin }) }], {
      signal,
      fetch: call.context.fetch,
      env: call.context.env,
    });
    const listed = found.get(name);
    if (listed !== undefined) {
      mcp[tool.name] = listed;
    }
  }
  return { ...state, mcp };
}

/** The grant a tool needs on the run's allowlist: `tool:<name>`, `mcp:<server>/<tool>`; none for other actions. */
function grantsFor(tool: ResolvedLlmTool): string[] | null {
  const action = tool.action;
  if (action.kind === "tool") {
    return [`tool:${action.implementation.tool}`];
  }
  if (action.kind === "mcp") {
    const server = action.implementation.server.id;
    return [`mcp:${server}/${action.implementation.tool}`, `mcp:${server}/*`];
  }
  return null;
}

function checkAllowlist(tools: readonly ResolvedLlmTool[], allowlist: readonly string[]): void {
  const missing = tools.flatMap((tool, index) => {
    const grants = grantsFor(tool);
    return grants === null || grants.some((grant) => allowlist.includes(grant))
      ? []
      : [
          {
            path: `implementation.tools.${index}`,
            message: `tool ${tool.name} needs "${grants[0]}" in the workflow's "tools"`,
          },
        ];
  });
  if (missing.length > 0) {
    const names = missing.map((problem) => problem.message).join("; ");
    throw EngineError.terminal("llm.tool_not_allowed", `tools outside this run's allowlist: ${names}`, missing);
  }
}

/** The tools as the model sees them: each MCP tool without a declared schema gets the one listed at the start. */
function offered(action: LlmAction, state: AgentState): AgentTurnContext["tools"] {
  return (action.implementation.tools ?? []).map((tool) => ({
    name: tool.name,
    ...(tool.description === undefined ? {} : { description: tool.description }),
    input_schema: tool.input_schema ?? state.mcp?.[tool.name]?.input_schema ?? { type: "object" },
  }));
}

/** The conversation after the prompt: each turn that asked for tools, then its results. */
function conversation(state: AgentState): ModelMessage[] {
  return state.turns.flatMap((turn): ModelMessage[] =>
    turn.calls.length === 0
      ? []
      : [
          {
            role: "assistant",
            content: [
              ...(turn.text === undefined ? [] : [{ type: "text" as const, text: turn.text }]),
              ...turn.calls.map((call) => ({
                type: "tool-call" as const,
                toolCallId: call.id,
                toolName: call.name,
                input: call.input,
              })),
            ],
          },
          { role: "tool", content: turn.calls.map(toolResult) },
        ],
  );
}

/** A call's result as the model reads it: its output, its error, or that it was not approved. */
function toolResult(call: AgentCall): ToolResultPart {
  const base = { type: "tool-result" as const, toolCallId: call.id, toolName: call.name };
  if (call.error?.code === "approval.rejected") {
    return { ...base, output: { type: "execution-denied", reason: call.error.message } };
  }
  if (call.error !== undefined) {
    return { ...base, output: { type: "error-json", value: { code: call.error.code, message: call.error.message } } };
  }
  return { ...base, output: { type: "json", value: call.output ?? null } };
}

/** The state with this dispatch's turns added, and their cost. */
function withTurns(state: AgentState, turns: readonly AgentTurn[]): AgentState {
  const usage = { tokens: { ...state.usage.tokens }, cost_usd: state.usage.cost_usd };
  for (const turn of turns) {
    usage.tokens.input += turn.tokens.input;
    usage.tokens.output += turn.tokens.output;
    usage.cost_usd = Math.round((usage.cost_usd + turn.cost_usd) * 1e9) / 1e9;
  }
  return { ...state, turns: [...state.turns, ...turns], usage };
}

/**
 * Each call the model asked for is checked before anything runs: a tool the
 * step does not offer, or an input its schema refuses, is answered with that
 * error (the model may try again) and never dispatched.
 */
function withCheckedCalls(state: AgentState, tools: AgentTurnContext["tools"]): AgentState {
  const last = state.turns.at(-1);
  if (last === undefined) {
    return state;
  }
  const calls = last.calls.map((call, index): AgentCall => {
    if (index >= MAX_TOOL_CALLS_PER_TURN) {
      const message = `a turn may make at most ${MAX_TOOL_CALLS_PER_TURN} tool calls; this one asked for ${last.calls.length}`;
      return { ...call, error: { code: "llm.too_many_calls", message } };
    }
    const tool = tools.find((candidate) => candidate.name === call.name);
    if (tool === undefined) {
      const message = `this step offers no tool "${call.name}"; it offers ${tools.map((t) => t.name).join(", ")}`;
      return { ...call, error: { code: "llm.unknown_tool", message } };
    }
    const problems = validateJson(tool.input_schema as JsonSchema, call.input, "input");
    if (problems.length === 0) {
      return call;
    }
    const message = `the input does not match the tool's schema: ${problems.map((p) => `${p.path}: ${p.message}`).join("; ")}`;
    return { ...call, error: { code: "action.invalid_input", message } };
  });
  return { ...state, turns: [...state.turns.slice(0, -1), { ...last, calls }] };
}

/** A turn that still asks for tools when no turn is left fails the step; its calls do not run. */
function checkTurns(action: LlmAction, state: AgentState, spent: JsonObject | undefined): void {
  const max = action.implementation.max_turns ?? DEFAULT_LLM_MAX_TURNS;
  const turns = state.turns.filter((turn) => turn.repair === undefined).length;
  if (turns >= max) {
    const message = `action ${action.id} used its ${max} model turn${max === 1 ? "" : "s"} and its model still asks for tools`;
    throw paid(EngineError.terminal("llm.max_turns_exceeded", message), spent);
  }
}

/**
 * The loop stops once what it spent reaches its budget: before a turn, or
 * after one that passed it (whose tool calls then do not run).
 */
function checkBudget(action: LlmAction, state: AgentState, spent: JsonObject | undefined): void {
  const budget = action.implementation.budget;
  if (budget === undefined) {
    return;
  }
  const tokens = state.usage.tokens.input + state.usage.tokens.output;
  const over =
    budget.tokens !== undefined && tokens >= budget.tokens
      ? `${tokens} tokens of a budget of ${budget.tokens}`
      : budget.cost_usd !== undefined && state.usage.cost_usd >= budget.cost_usd
        ? `$${state.usage.cost_usd} of a budget of $${budget.cost_usd}`
        : null;
  if (over !== null) {
    throw paid(EngineError.terminal("llm.budget_exceeded", `action ${action.id} spent ${over}`), spent);
  }
}

function checkSize(action: LlmAction, state: AgentState, spent?: JsonObject): void {
  const chars = JSON.stringify(state).length;
  if (chars > MAX_AGENT_STATE_CHARS) {
    const message = `the tool calls and results of action ${action.id} take ${chars} characters of JSON, more than ${MAX_AGENT_STATE_CHARS}`;
    throw paid(EngineError.terminal("llm.conversation_too_large", message), spent);
  }
}

/** What the agent adds to its answer: every tool call with its outcome, the turns taken and their cost. */
function agentOutput(state: AgentState): JsonObject {
  const toolCalls = state.turns.flatMap((turn) =>
    turn.calls.map((call) => ({
      name: call.name,
      input: call.input,
      ...(call.output === undefined ? {} : { output: call.output }),
      ...(call.error === undefined ? {} : { error: call.error }),
    })),
  );
  return { tool_calls: toolCalls, turns: state.turns.length, usage: usageJson(state.usage) };
}

function usageJson(usage: AgentState["usage"]): JsonObject {
  return { tokens: { input: usage.tokens.input, output: usage.tokens.output }, cost_usd: usage.cost_usd };
}

function answerOf(output: Json): JsonObject {
  if (output === null || typeof output !== "object" || Array.isArray(output)) {
    return {};
  }
  const { _meta: _spent, ...answer } = output;
  return answer;
}

/** What this dispatch's model calls cost (`_meta` of the llm handler's output). */
function metaOf(output: Json): JsonObject | undefined {
  const meta = output !== null && typeof output === "object" && !Array.isArray(output) ? output._meta : undefined;
  return meta !== null && typeof meta === "object" && !Array.isArray(meta) ? meta : undefined;
}

/** A failure after this dispatch's model calls still reports what they cost. */
function paid(error: EngineError, spent: JsonObject | undefined): EngineError {
  return spent === undefined ? error : error.withMeta(spent);
}
