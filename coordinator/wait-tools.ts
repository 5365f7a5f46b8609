import { canonicalJson } from "../lib/journal/canonical.ts";
import { MAX_TOOL_RESULT_CHARS, type AgentCall, type AgentState } from "../schemas/agent.ts";
import type { Json } from "../schemas/common.ts";
import { toFailure, type AttemptError, type ErrorSummary } from "../schemas/errors.ts";
import { APPROVAL_SCHEMA, attemptErrorOf, type StepRecord, type TaskResult } from "../schemas/payload.ts";
import type { ResolvedLlmTool, ResolvedTask } from "../schemas/resolved.ts";
import type { GateRecord, ToolCallRecord } from "../schemas/run.ts";
import { enqueueUndos } from "./compensation.ts";
import {
  DEADLINE_GRACE_MS,
  DEFAULT_MAX_PARALLEL,
  DEFAULT_TASK_TIMEOUT_MS,
  inFlightCount,
  runFieldsOf,
} from "./dispatch-basics.ts";
import type { Draft } from "./draft.ts";
import { closeGate, openGate } from "./gates.ts";
import type { LiveWork } from "./live.ts";
import { resourcesOf } from "./resources.ts";
import { withChild } from "./summaries.ts";
import type { OpenWait, WaitKindRow, WaitOf, WaitPlace } from "./wait-kinds.ts";
import { findWaiter, requestChild, resumeInvocation } from "./waits.ts";

/**
 * Tool calls: an `llm` step with tools whose model turn asked for some
 * (executor/agent.ts). Each call runs as a step of its own: a dispatch of a
 * one-step task that calls the tool's action (with its retries, timeout and
 * undo), or for a `workflow` tool a child run; a high-risk tool's call waits
 * for its approval first. Calls run in parallel up to the run's
 * `max_parallel` (one at a time with `parallel_tool_calls: false`). As each
 * settles, its result is written into the loop's state in the same commit as
 * its journal entry, so a restart never runs a completed call again; once all
 * have settled the step is dispatched again for its next turn.
 */
type ToolsWait = WaitOf<"tools">;
type OpenTools = OpenWait<"tools">;

export const toolWaits: WaitKindRow<"tools"> = {
  open(draft, place, wire) {
    const calls = wire.state.turns.at(-1)?.calls ?? [];
    const key = place.key;
    calls.forEach((call, index) =>
      draft.journal("tool_call.requested", {
        ...requestedBody(draft, place, wire.state, index),
        call: call.id,
        input: call.input,
        ...(call.error === undefined ? {} : { error: call.error }),
      }),
    );
    const records = calls.flatMap((call, index): ToolCallRecord[] =>
      call.error === undefined ? [newCall(draft, place, wire.state, index)] : [],
    );
    return { kind: "tools", key, state: wire.state, calls: records };
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
          message: `dispatch ${call.attempts} of the call timed out`,
          retryable: true,
        };
        wait = settle(draft, { ...at, wait }, call, { error });
      }
    }
    resumeIfSettled(draft, { ...at, wait });
  },
  unsent: (wait) => wait.calls.some((call) => call.status === "pending") || settled(wait),
  inFlight: (wait) => wait.calls.some((call) => call.status === "running"),
  send: sendCalls,
  close(draft, at, reason) {
    for (const call of at.wait.calls) {
      if (call.status === "completed" || call.status === "failed") {
        continue;
      }
      if (call.status === "approval" && call.gate_id !== undefined) {
        closeGate(draft, call.gate_id, reason);
      }
      if (call.status === "running" && call.child !== undefined) {
        cancelChild(draft, at, call.child);
      }
      draft.journal("tool_call.cancelled", { ...placeOf(draft, at, call.index), reason });
    }
  },
  view: (wait) => ({
    kind: "tools",
    turn: Math.max(1, wait.state.turns.length),
    calls: wait.calls.map((call) => ({ name: callOf(wait, call.index)?.name ?? "?", status: call.status })),
  }),
};

/** A new call's record: pending, or waiting for its approval when its tool is high-risk. */
function newCall(draft: Draft, place: WaitPlace, state: AgentState, index: number): ToolCallRecord {
  const record: ToolCallRecord = {
    index,
    status: "pending",
    token: null,
    attempts: 0,
    dispatched_at: null,
    deadline_at: null,
  };
  const asked = state.turns.at(-1)?.calls[index];
  const action = asked && toolFor(draft, place.nodeId, place.stepRef, asked.name)?.action;
  if (asked === undefined || action?.risk !== "high") {
    return record;
  }
  const gate = openGate(draft, {
    kind: "approval",
    node: place.nodeId,
    item: draft.itemOf(place.nodeId, place.invocation),
    step: place.stepRef,
    prompt: `Step "${place.stepRef}" asks to call the high-risk tool ${asked.name} (${action.kind} ${action.id}@${action.version}) with input ${preview(asked.input)}. Approve?`,
    input_schema: APPROVAL_SCHEMA,
    action: { id: action.id, version: action.version, kind: action.kind },
    tool_call: { key: place.key, turn: Math.max(1, state.turns.length), index, name: asked.name },
    ...(action.approvers === undefined ? {} : { approvers: action.approvers }),
  });
  return { ...record, status: "approval", gate_id: gate.gate_id };
}

function preview(input: Json): string {
  const text = JSON.stringify(input);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/**
 * Sends what is due: a call whose dispatch or child start a restart lost is
 * sent again (it never completed), then pending calls while the run has room.
 * Returns how many child starts it asked for, out of `budget`.
 */
function sendCalls(draft: Draft, at: OpenTools, live: LiveWork, budget: number): number {
  let wait = at.wait;
  let starts = 0;
  for (const call of wait.calls) {
    if (call.status !== "running") {
      continue;
    }
    if (call.child === undefined && call.token !== null && !live.tokens.has(call.token)) {
      wait = withCall(draft, { ...at, wait }, { ...call, status: "pending", token: null, deadline_at: null });
    } else if (call.child?.run_id === null && !live.childStarts.has(call.child.key) && starts < budget) {
      requestChild(
        draft,
        call.child.key,
        childWorkflowOf(draft, { ...at, wait }, call) ?? "",
        callOf(wait, call.index)?.input ?? null,
      );
      starts += 1;
    }
  }
  const serial = oneAtATime(draft, at);
  let room = (draft.workflow.max_parallel ?? DEFAULT_MAX_PARALLEL) - inFlightCount(draft);
  for (const call of wait.calls) {
    const busy = serial && wait.calls.some((other) => other.status === "running");
    if (call.status !== "pending" || room <= 0 || busy || draft.record.status === "paused") {
      continue;
    }
    const isChild =
      toolFor(draft, at.nodeId, at.suspension.step_ref, callOf(wait, call.index)?.name)?.action.kind === "workflow";
    if (isChild && starts >= budget) {
      continue;
    }
    wait = startCall(draft, { ...at, wait }, call);
    starts += isChild ? 1 : 0;
    room -= 1;
  }
  resumeIfSettled(draft, { ...at, wait });
  return starts;
}

/** Starts one call: a child run for a `workflow` tool, else a task of one step, the tool's action. */
function startCall(draft: Draft, at: OpenTools, call: ToolCallRecord): ToolsWait {
  const asked = callOf(at.wait, call.index);
  const tool = toolFor(draft, at.nodeId, at.suspension.step_ref, asked?.name);
  if (asked === undefined || tool === undefined) {
    const message = `the step offers no tool ${asked?.name ?? call.index}`;
    return settle(draft, at, call, { error: { code: "llm.unknown_tool", message, retryable: false } });
  }
  const attempt = call.attempts + 1;
  if (tool.action.kind === "workflow") {
    const key = `${at.wait.key}/${Math.max(1, at.wait.state.turns.length)}.${call.index}`;
    const workflow = childWorkflowOf(draft, at, call) ?? "";
    requestChild(draft, key, workflow, asked.input);
    draft.journal("tool_call.dispatched", { ...placeOf(draft, at, call.index), token: key, attempt });
    const child = { key, run_id: null, requested_at: draft.now };
    return withCall(draft, at, { ...call, status: "running", attempts: attempt, dispatched_at: draft.now, child });
  }
  draft.record.dispatch_count += 1;
  const token = `${draft.record.run_id}.${draft.record.dispatch_count}`;
  const timeoutMs = draft.nodeDefinition(at.nodeId).timeout_ms ?? DEFAULT_TASK_TIMEOUT_MS;
  const deadline = draft.now + timeoutMs + DEADLINE_GRACE_MS;
  const wait = withCall(draft, at, {
    ...call,
    status: "running",
    token,
    attempts: attempt,
    dispatched_at: draft.now,
    deadline_at: deadline,
  });
  draft.journal("tool_call.dispatched", { ...placeOf(draft, at, call.index), token, attempt });
  dispatchTool(draft, at, { tool, asked, token, attempt, timeoutMs, approved: call.approved === true });
  return wait;
}

/** The dispatch command of a call: its task, its input, the node's containers; an approved call carries its approval. */
function dispatchTool(
  draft: Draft,
  at: OpenTools,
  send: {
    tool: ResolvedLlmTool;
    asked: AgentCall;
    token: string;
    attempt: number;
    timeoutMs: number;
    approved: boolean;
  },
): void {
  const task = toolTask(draft, at, send.tool, send.asked.name);
  const context = { input: send.asked.input, state: {}, output: {} };
  draft.commands.push({
    kind: "dispatch",
    payload: {
      token_id: send.token,
      ...runFieldsOf(draft),
      node_id: at.nodeId,
      item_index: draft.itemOf(at.nodeId, at.invocation),
      iteration: Math.max(1, draft.node(at.nodeId).iterations),
      task_id: task.id,
      task_version: task.version,
      task,
      input: send.asked.input,
      resources: resourcesOf(draft, draft.nodeDefinition(at.nodeId).resource_bindings),
      timeout_ms: send.timeoutMs,
      retry_attempt: send.attempt - 1,
      one_call: true,
      ...(send.approved ? { resume: { mode: "approved" as const, step_index: 0, context } } : {}),
    },
  });
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

/** A result for a tool call's dispatch: true when it was one, false for any other token. */
export function onToolCallResult(draft: Draft, result: TaskResult): boolean {
  const found = findCall(
    draft,
    (call) => call.status === "running" && call.child === undefined && call.token === result.token_id,
  );
  if (found === undefined) {
    return false;
  }
  const { at, call } = found;
  const steps = result.steps?.map((step) => ({ ...step, step: `${at.suspension.step_ref}/${step.step}` }));
  let wait: ToolsWait;
  if (result.success && !result.suspended) {
    const output = toolOutput(result.output);
    const how = { output, token: result.token_id, duration_ms: result.metrics.duration_ms, steps };
    wait = settle(draft, at, call, how);
  } else {
    const error: AttemptError = result.suspended
      ? {
          code: "tool_call.suspended",
          message: "the tool waited for something: a tool runs as one call",
          retryable: false,
        }
      : attemptErrorOf(result);
    wait = settle(draft, at, call, { error, steps });
  }
  resumeIfSettled(draft, { ...at, wait });
  return true;
}

/** A high-risk call's approval was answered: granted, it is sent; rejected, the model is told so. */
export function answerToolCallApproval(
  draft: Draft,
  gate: GateRecord,
  approved: boolean,
  reason: string | undefined,
): void {
  const ref = gate.tool_call;
  const found = findCall(draft, (call) => call.gate_id === gate.gate_id && call.status === "approval");
  if (ref === undefined || found === undefined) {
    return;
  }
  const { at, call } = found;
  if (approved) {
    withCall(draft, at, { ...call, status: "pending", approved: true });
    return;
  }
  const message = `the call of tool ${ref.name} was not approved${reason === undefined ? "" : `: ${reason}`}`;
  const wait = settle(draft, at, call, { error: { code: "approval.rejected", message, retryable: false } });
  resumeIfSettled(draft, { ...at, wait });
}

/** A `workflow` tool's child run exists: journaled and linked, as a workflow step's is. */
export function toolChildStarted(draft: Draft, key: string, runId: string): boolean {
  const found = findCall(draft, (call) => call.child?.key === key);
  if (found === undefined || found.call.child === undefined) {
    return false;
  }
  const { at, call } = found;
  const workflow = childWorkflowOf(draft, at, call) ?? "";
  withCall(draft, at, { ...call, child: { ...found.call.child, run_id: runId } });
  const step = at.suspension.step_ref;
  const invocation = draft.invocation(at.nodeId, at.invocation.index) ?? at.invocation;
  draft.setInvocation(at.nodeId, at.invocation.index, {
    children: withChild(invocation.children, { run_id: runId, step, workflow, status: null }),
  });
  const item = draft.itemOf(at.nodeId, at.invocation);
  draft.journal("child.started", { node: at.nodeId, item, step, child_run_id: runId, workflow });
  return true;
}

/** A `workflow` tool's child run ended: the call settles with its output or its error. */
export function toolChildFinished(
  draft: Draft,
  outcome: { key: string; run_id: string | null; status: string; output: Json; error: ErrorSummary | null },
): boolean {
  const found = findCall(draft, (call) => call.child?.key === outcome.key && call.status === "running");
  if (found === undefined) {
    return false;
  }
  const { at, call } = found;
  const duration = draft.now - (call.dispatched_at ?? draft.now);
  const wait =
    outcome.status === "completed"
      ? settle(draft, at, call, { output: outcome.output, token: outcome.key, duration_ms: duration })
      : settle(draft, at, call, {
          error: {
            ...(outcome.error ?? {
              code: `workflow.child_${outcome.status}`,
              message: `the child run ended ${outcome.status}`,
            }),
            retryable: false,
          },
        });
  resumeIfSettled(draft, { ...at, wait });
  return true;
}

/** The open tools wait holding a call that `pick` picks, and that call. */
function findCall(
  draft: Draft,
  pick: (call: ToolCallRecord) => boolean,
): { at: OpenTools; call: ToolCallRecord } | undefined {
  const found = findWaiter(draft, (waiting) => waiting.kind === "tools" && waiting.calls.some(pick));
  const wait = found?.suspension.waiting_for;
  const call = wait?.kind === "tools" ? wait.calls.find(pick) : undefined;
  return found && wait?.kind === "tools" && call ? { at: { ...found, wait }, call } : undefined;
}

/** How a call ends: its output (the tool's, whole), or its error. */
type Settlement =
  | { output: Json; token: string; duration_ms: number; steps?: StepRecord[] | undefined }
  | { error: AttemptError; steps?: StepRecord[] | undefined };

/**
 * The call is done: journaled (its completion enqueues its tool's undo, as a
 * step's would), and its result written into its turn, where the model reads
 * an output past MAX_TOOL_RESULT_CHARS of JSON as a preview.
 */
function settle(draft: Draft, at: OpenTools, call: ToolCallRecord, how: Settlement): ToolsWait {
  const place = placeOf(draft, at, call.index);
  const steps = how.steps === undefined ? {} : { steps: how.steps };
  let result: Partial<AgentCall>;
  if ("output" in how) {
    const seq = draft.journal("tool_call.completed", {
      ...place,
      token: how.token,
      attempt: call.attempts,
      duration_ms: how.duration_ms,
      output: how.output,
      ...steps,
    });
    enqueueUndos(draft, { node: at.nodeId, item: place.item }, how.steps, seq);
    result = { output: forModel(how.output) };
  } else {
    const error = toFailure(how.error, at.nodeId);
    const seq = draft.journal("tool_call.failed", {
      ...place,
      token: call.token,
      attempt: call.attempts,
      error,
      ...steps,
    });
    // A step whose call completed before the step failed (its output mapping) still enqueues its undo.
    enqueueUndos(draft, { node: at.nodeId, item: place.item }, how.steps, seq);
    result = { error: { code: error.code, message: error.message } };
  }
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

/** A child the call asked for is cancelled with the step, as a workflow step's is. */
function cancelChild(draft: Draft, at: OpenTools, child: NonNullable<ToolCallRecord["child"]>): void {
  draft.journal("child.cancel_requested", {
    node: at.nodeId,
    item: draft.itemOf(at.nodeId, at.invocation),
    step: at.suspension.step_ref,
    child_run_id: child.run_id,
    key: child.key,
  });
  draft.addCleanup("pending_cancels", [child.key]);
}

/** A `workflow` tool's child workflow, pinned (`id@version`) when the run started. */
function childWorkflowOf(draft: Draft, at: OpenTools, call: ToolCallRecord): string | undefined {
  const action = toolFor(draft, at.nodeId, at.suspension.step_ref, callOf(at.wait, call.index)?.name)?.action;
  const workflow = action?.kind === "workflow" ? action.implementation.workflow : undefined;
  return typeof workflow === "string" ? workflow : undefined;
}

/** The tool of the agent step `stepRef` of the node's task named `name`, from the run's snapshot. */
function toolFor(
  draft: Draft,
  nodeId: string,
  stepRef: string | null,
  name: string | undefined,
): ResolvedLlmTool | undefined {
  const action = draft.snapshot.tasks[nodeId]?.steps.find((step) => step.ref === stepRef)?.action;
  return action?.kind === "llm" ? action.implementation.tools?.find((tool) => tool.name === name) : undefined;
}

function callOf(wait: ToolsWait, index: number): AgentCall | undefined {
  return wait.state.turns.at(-1)?.calls[index];
}

/** Whether the step's calls run one at a time (`parallel_tool_calls: false`). */
function oneAtATime(draft: Draft, at: OpenTools): boolean {
  const action = draft.snapshot.tasks[at.nodeId]?.steps[at.suspension.step_index]?.action;
  return action?.kind === "llm" && action.implementation.parallel_tool_calls === false;
}

function requestedBody(draft: Draft, place: WaitPlace, state: AgentState, index: number) {
  return {
    node: place.nodeId,
    item: draft.itemOf(place.nodeId, place.invocation),
    step: place.stepRef,
    key: place.key,
    turn: Math.max(1, state.turns.length),
    index,
    name: state.turns.at(-1)?.calls[index]?.name ?? "?",
  };
}

function placeOf(draft: Draft, at: Pick<OpenTools, "nodeId" | "invocation" | "suspension" | "wait">, index: number) {
  const place = {
    nodeId: at.nodeId,
    invocation: at.invocation,
    stepRef: at.suspension.step_ref ?? "-",
    key: at.wait.key,
  };
  return { ...requestedBody(draft, place, at.wait.state, index), step: at.suspension.step_ref };
}
