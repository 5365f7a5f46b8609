import { MAX_TOOL_RESULT_CHARS, type AgentCall, type AgentState } from "../schemas/agent.ts";
import type { Json } from "../schemas/common.ts";
import { toFailure, type Failure } from "../schemas/errors.ts";
import { attemptErrorOf, type StepRecord, type TaskResult } from "../schemas/payload.ts";
import type { ResolvedLlmTool, ResolvedTask } from "../schemas/resolved.ts";
import type { ToolCallRecord } from "../schemas/run.ts";
import { DEADLINE_GRACE_MS, DEFAULT_TASK_TIMEOUT_MS, runFieldsOf } from "./dispatch-basics.ts";
import type { Draft } from "./draft.ts";
import { DEFAULT_MAX_PARALLEL, inFlightCount } from "./dispatch-basics.ts";
import { resourcesOf } from "./resources.ts";
import type { OpenWait, WaitKindRow, WaitOf } from "./wait-kinds.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";
import { canonicalJson } from "../lib/journal/canonical.ts";

/**
 * Tool calls: an `llm` step with tools whose model turn asked for some
 * (executor/agent.ts). Each call runs as a dispatch of its own, a task of one
 * step that calls the tool's action (with its retries, timeout and undo), in
 * parallel up to the run's `max_parallel`. As each settles its result is
 * written into the loop's state, committed with its journal entry, so a
 * restart never runs a completed call again; once all have, the step is
 * dispatched again for its next turn.
 */
type ToolsWait = WaitOf<"tools">;
type OpenTools = OpenWait<"tools">;

export const toolWaits: WaitKindRow<"tools"> = {
  open(draft, { nodeId, invocation, stepRef, key }, wire) {
    const state = wire.state;
    const turn = state.turns.length;
    const calls = state.turns.at(-1)?.calls ?? [];
    const item = draft.itemOf(nodeId, invocation);
    calls.forEach((call, index) =>
      draft.journal("tool_call.requested", {
        node: nodeId,
        item,
        step: stepRef,
        key,
        turn,
        index,
        name: call.name,
        call: call.id,
        input: call.input,
        ...(call.error === undefined ? {} : { error: call.error }),
      }),
    );
    const records = calls.flatMap((call, index): ToolCallRecord[] =>
      call.error === undefined
        ? [{ index, status: "pending", token: null, attempts: 0, dispatched_at: null, deadline_at: null }]
        : [],
    );
    return { kind: "tools", key, state, calls: records };
  },
  expiresAt: (_draft, wait) => {
    const deadlines = wait.calls.flatMap((call) =>
      call.status === "running" && call.deadline_at !== null ? [call.deadline_at] : [],
    );
    return deadlines.length === 0 ? null : Math.min(...deadlines);
  },
  expire(draft, at) {
    let wait = at.wait;
    for (const call of at.wait.calls) {
      if (call.status === "running" && call.deadline_at !== null && draft.now >= call.deadline_at) {
        const error = {
          code: "task.timeout",
          message: `the tool call's dispatch ${call.attempts} timed out`,
          retryable: true,
        };
        wait = settle(draft, { ...at, wait }, call, { error: toFailure(error, at.nodeId) });
      }
    }
    resumeIfSettled(draft, { ...at, wait });
  },
  unsent: (wait) => wait.calls.some((call) => call.status === "pending") || settled(wait),
  inFlight: (wait) => wait.calls.some((call) => call.status === "running"),
  send(draft, at, live) {
    let wait = at.wait;
    // A call whose dispatch a restart lost is sent again: it never completed.
    for (const call of wait.calls) {
      if (call.status === "running" && call.token !== null && !live.tokens.has(call.token)) {
        wait = withCall(draft, { ...at, wait }, { ...call, status: "pending", token: null, deadline_at: null });
      }
    }
    const serial = parallelism(draft, at) === "one";
    let room = (draft.workflow.max_parallel ?? DEFAULT_MAX_PARALLEL) - inFlightCount(draft);
    for (const call of wait.calls) {
      const running = wait.calls.some((other) => other.status === "running");
      if (call.status !== "pending" || room <= 0 || (serial && running) || draft.record.status === "paused") {
        continue;
      }
      wait = dispatchCall(draft, { ...at, wait }, call);
      room -= 1;
    }
    resumeIfSettled(draft, { ...at, wait });
    return 0; // tool calls are dispatches, not child starts
  },
  close(draft, { nodeId, invocation, suspension, wait }, reason) {
    for (const call of wait.calls) {
      if (call.status === "pending" || call.status === "running") {
        draft.journal("tool_call.cancelled", {
          ...placeOf(draft, { nodeId, invocation, suspension, wait }, call.index),
          reason,
        });
      }
    }
  },
  view: (wait) => ({
    kind: "tools",
    turn: Math.max(1, wait.state.turns.length),
    calls: wait.calls.map((call) => ({ name: callOf(wait, call.index)?.name ?? "?", status: call.status })),
  }),
};

/** A result for a tool call's dispatch: true when it was one, false for any other token. */
export function onToolCallResult(draft: Draft, result: TaskResult): boolean {
  const found = findCall(draft, result.token_id);
  if (found === undefined) {
    return false;
  }
  const { at, call } = found;
  const steps = result.steps?.map((step) => ({ ...step, step: `${at.suspension.step_ref}/${step.step}` }));
  if (result.success && !result.suspended) {
    const output = toolOutput(result.output);
    const wait = settle(draft, at, call, { output: forModel(output), whole: output, result, steps });
    resumeIfSettled(draft, { ...at, wait });
    return true;
  }
  const error = result.suspended
    ? {
        code: "tool_call.suspended",
        message: "the tool waited for something: a tool runs as one call",
        retryable: false,
      }
    : attemptErrorOf(result);
  const wait = settle(draft, at, call, { error: toFailure(error, at.nodeId), result, steps });
  resumeIfSettled(draft, { ...at, wait });
  return true;
}

/** The open tools wait with a running call of this token, if any. */
function findCall(draft: Draft, token: string): { at: OpenTools; call: ToolCallRecord } | undefined {
  const running = (call: ToolCallRecord) => call.status === "running" && call.token === token;
  const found = findWaiter(draft, (waiting) => waiting.kind === "tools" && waiting.calls.some(running));
  const wait = found?.suspension.waiting_for;
  const call = wait?.kind === "tools" ? wait.calls.find(running) : undefined;
  return found && wait?.kind === "tools" && call ? { at: { ...found, wait }, call } : undefined;
}

/** How a settled call ends: its output (as the model reads it, and whole), or its error. */
type Settlement =
  | { output: Json; whole: Json; result: TaskResult; steps: StepRecord[] | undefined }
  | { error: Failure; result?: TaskResult; steps?: StepRecord[] | undefined };

/** The call is done: journaled, and its result written into its turn. */
function settle(draft: Draft, at: OpenTools, call: ToolCallRecord, how: Settlement): ToolsWait {
  const place = placeOf(draft, at, call.index);
  const steps = how.steps === undefined ? {} : { steps: how.steps };
  if ("output" in how) {
    draft.journal("tool_call.completed", {
      ...place,
      token: how.result.token_id,
      attempt: call.attempts,
      duration_ms: how.result.metrics.duration_ms,
      output: how.whole,
      ...steps,
    });
  } else {
    draft.journal("tool_call.failed", {
      ...place,
      token: call.token,
      attempt: call.attempts,
      error: how.error,
      ...steps,
    });
  }
  const result: Partial<AgentCall> =
    "output" in how ? { output: how.output } : { error: { code: how.error.code, message: how.error.message } };
  const state = withResult(at.wait.state, call.index, result);
  const status = "output" in how ? ("completed" as const) : ("failed" as const);
  return withCall(draft, { ...at, wait: { ...at.wait, state } }, { ...call, status, token: null, deadline_at: null });
}

/** The tool's output: what its one step returned (the task maps it to `output.result`). */
function toolOutput(output: Json | undefined): Json {
  return output !== null && typeof output === "object" && !Array.isArray(output) ? (output.result ?? null) : null;
}

/** An output past {@link MAX_TOOL_RESULT_CHARS} of JSON reaches the model as a preview (the whole is journaled). */
function forModel(output: Json): Json {
  const text = canonicalJson(output);
  if (text.length <= MAX_TOOL_RESULT_CHARS) {
    return output;
  }
  return { truncated: true, chars: text.length, preview: text.slice(0, MAX_TOOL_RESULT_CHARS) };
}

function withResult(state: AgentState, index: number, result: Partial<AgentCall>): AgentState {
  const last = state.turns.at(-1);
  if (last === undefined) {
    return state;
  }
  const calls = last.calls.map((call, i) => (i === index ? { ...call, ...result } : call));
  return { ...state, turns: [...state.turns.slice(0, -1), { ...last, calls }] };
}

/** The wait with one call's record replaced, stored on the invocation. */
function withCall(draft: Draft, at: OpenTools, call: ToolCallRecord): ToolsWait {
  const wait = { ...at.wait, calls: at.wait.calls.map((other) => (other.index === call.index ? call : other)) };
  draft.setInvocation(at.nodeId, at.invocation.index, { suspension: { ...at.suspension, waiting_for: wait } });
  return wait;
}

function settled(wait: ToolsWait): boolean {
  return wait.calls.every((call) => call.status === "completed" || call.status === "failed");
}

/** Every call settled: the step runs its next turn with the results. */
function resumeIfSettled(draft: Draft, at: OpenTools): void {
  if (!settled(at.wait)) {
    return;
  }
  const invocation = draft.invocation(at.nodeId, at.invocation.index);
  if (invocation?.status === "suspended") {
    resumeInvocation(draft, at.nodeId, invocation, { mode: "tools", agent: at.wait.state });
  }
}

/** Sends one call: a task of one step, the tool's action, with the call's input. */
function dispatchCall(draft: Draft, at: OpenTools, call: ToolCallRecord): ToolsWait {
  const asked = callOf(at.wait, call.index);
  const tool = asked && toolOf(draft, at, asked.name);
  if (asked === undefined || tool === undefined) {
    const error = {
      code: "llm.unknown_tool",
      message: `the step offers no tool ${asked?.name ?? call.index}`,
      retryable: false,
    };
    return settle(draft, at, call, { error: toFailure(error, at.nodeId) });
  }
  draft.record.dispatch_count += 1;
  const token = `${draft.record.run_id}.${draft.record.dispatch_count}`;
  const definition = draft.nodeDefinition(at.nodeId);
  const timeoutMs = definition.timeout_ms ?? DEFAULT_TASK_TIMEOUT_MS;
  const attempt = call.attempts + 1;
  const wait = withCall(draft, at, {
    ...call,
    status: "running",
    token,
    attempts: attempt,
    dispatched_at: draft.now,
    deadline_at: draft.now + timeoutMs + DEADLINE_GRACE_MS,
  });
  draft.journal("tool_call.dispatched", { ...placeOf(draft, at, call.index), token, attempt });
  const task = toolTask(draft, at, tool, asked.name);
  draft.commands.push({
    kind: "dispatch",
    payload: {
      token_id: token,
      ...runFieldsOf(draft),
      node_id: at.nodeId,
      item_index: draft.itemOf(at.nodeId, at.invocation),
      iteration: Math.max(1, draft.node(at.nodeId).iterations),
      task_id: task.id,
      task_version: task.version,
      task,
      input: asked.input,
      resources: resourcesOf(draft, definition.resource_bindings),
      timeout_ms: timeoutMs,
      retry_attempt: attempt - 1,
    },
  });
  return wait;
}

/** The task a call runs: one step named as the tool, its output mapped to `output.result`. */
function toolTask(draft: Draft, at: OpenTools, tool: ResolvedLlmTool, name: string): ResolvedTask {
  const parent = draft.snapshot.tasks[at.nodeId];
  const listed = at.wait.state.mcp?.[name];
  // An MCP tool is called with the schema it was offered: pinned to what the server listed then.
  const action =
    tool.action.kind === "mcp" && tool.action.implementation.pin === undefined && listed !== undefined
      ? { ...tool.action, implementation: { ...tool.action.implementation, pin: listed.pin } }
      : tool.action;
  return {
    id: `${parent?.id ?? at.nodeId}/${at.suspension.step_ref ?? "-"}/tools/${name}`,
    version: parent?.version ?? 0,
    steps: [{ ref: name, action, output_mapping: { "output.result": "$" } }],
  };
}

function toolOf(draft: Draft, at: OpenTools, name: string): ResolvedLlmTool | undefined {
  const step = draft.snapshot.tasks[at.nodeId]?.steps[at.suspension.step_index];
  const action = step?.action;
  return action?.kind === "llm" ? action.implementation.tools?.find((tool) => tool.name === name) : undefined;
}

function callOf(wait: ToolsWait, index: number): AgentCall | undefined {
  return wait.state.turns.at(-1)?.calls[index];
}

/** Whether the step's calls run one at a time (`parallel_tool_calls: false`). */
function parallelism(draft: Draft, at: OpenTools): "one" | "many" {
  const action = draft.snapshot.tasks[at.nodeId]?.steps[at.suspension.step_index]?.action;
  return action?.kind === "llm" && action.implementation.parallel_tool_calls === false ? "one" : "many";
}

function placeOf(draft: Draft, at: Pick<OpenTools, "nodeId" | "invocation" | "suspension" | "wait">, index: number) {
  return {
    node: at.nodeId,
    item: draft.itemOf(at.nodeId, at.invocation),
    step: at.suspension.step_ref,
    key: at.wait.key,
    turn: Math.max(1, at.wait.state.turns.length),
    index,
    name: callOf(at.wait, index)?.name ?? "?",
  };
}
