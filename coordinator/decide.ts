import { attemptErrorOf, type InvocationRecord, type RunStatus, type TaskResult } from "../schemas/index.ts";
import { validateJson } from "../lib/json-schema.ts";
import { hasPendingCleanup, MAX_CLEANUP_CALLS_PER_EVENT, NOTIFY_MARKER, sendCleanup } from "./cleanup.ts";
import { dispatchable, dispatchReady, inFlightCount, startPendingChildren } from "./dispatch.ts";
import { Draft, type Command, type DecideContext, type RunState } from "./draft.ts";
import { isTerminal } from "./lifecycle.ts";
import { completeInvocation, failInvocation, isSettled, itemOf, startReadyNodes } from "./nodes.ts";
import type { Json } from "../lib/expr/mapping.ts";
import { MAX_EVENT_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import {
  answerGate,
  childFinished,
  childStarted,
  expireGates,
  hasUnrequestedChild,
  MAX_CHILD_STARTS_PER_EVENT,
  nextGateExpiry,
  suspendInvocation,
  unstartedChild,
  type ChildOutcome,
} from "./waits.ts";

/** How soon a child that could not reach its parent tries again. */
export const PARENT_NOTIFY_RETRY_MS = 1_000;
/**
 * While work is outstanding that a restart would lose without a trace (a
 * dispatch in flight, a child run being started), the alarm is never further
 * away than this. A restart (an eviction, a deploy, a crash) loses the
 * instance's memory of what it awaits, and nothing else would wake the object:
 * this alarm is what finds the loss (the wake compares the stored work with
 * the instance's live set) without anyone reading the run. While the same
 * instance still holds the work, the wake finds everything live and sets the
 * next one.
 */
export const LIVENESS_CHECK_MS = 5_000;
/**
 * A run that ended and still has cleanup in flight or failing (a child that
 * has not confirmed its cancel, a container whose release has not answered)
 * checks again after a tenth of the time since it ended, at least
 * LIVENESS_CHECK_MS and at most this: a release that fails for good (a shell
 * server gone) costs one call an hour, not one every 5 s forever.
 */
export const MAX_CLEANUP_RETRY_MS = 60 * 60_000;

export type { Command, DecideContext, RunState } from "./draft.ts";
export {
  DEFAULT_MAX_PARALLEL,
  DEFAULT_TASK_TIMEOUT_MS,
  DEADLINE_GRACE_MS,
  MAX_DISPATCHES_PER_EVENT,
  TASKS_PER_EXECUTOR_CALL,
} from "./dispatch.ts";

/**
 * The coordinator's brain: `decide(state, event, context)` returns the next
 * state and the commands that carry it out. No storage, no I/O, no clock or
 * randomness of its own: the Durable Object persists the state and journal
 * entries in one transaction, then performs the dispatches.
 *
 * Dispatches happen only on `wake` (the alarm), a bounded number per event:
 * each is one Worker invocation, and the platform allows a Durable Object
 * event 32. Results never dispatch inline; they ask for a wake instead,
 * which is a fresh event.
 */

export type RunEvent =
  /** Leave `drafting` (auto start, or an approval): the run is queued and starts on the next wake. */
  | { type: "start" }
  /** The alarm: fire due timers, find lost dispatches, dispatch ready work. */
  | { type: "wake"; live: readonly string[] }
  | { type: "task_result"; result: TaskResult }
  /** Several results at once, applied in order, with one settling pass after them all. */
  | { type: "task_results"; results: readonly TaskResult[] }
  | { type: "cancel"; reason: string }
  | { type: "pause" }
  | { type: "resume" }
  /** Re-run a failed run from its failed nodes, keeping what completed. */
  | { type: "redrive" }
  /** A valid answer to an open gate (checked against its schema by the Durable Object). */
  | { type: "gate_answer"; gate_id: string; response: Json; responder: string | null }
  /** A child run this run asked for exists now. */
  | { type: "child_started"; key: string; run_id: string }
  /** A child run ended, or could not start (`run_id` null). */
  | { type: "child_finished"; outcome: ChildOutcome }
  /** This child run's parent acknowledged its result. */
  | { type: "parent_notified" }
  /** Child runs this run cancelled confirmed it (or had ended already, or never existed). */
  | { type: "children_cancelled"; keys: readonly string[] }
  /** These containers' `release()` answered. */
  | { type: "containers_released"; containers: readonly string[] };

export interface Decision {
  state: RunState;
  commands: Command[];
  /** When the alarm should next fire, or null for never. */
  wakeAt: number | null;
}

type Handlers = { [K in RunEvent["type"]]: (draft: Draft, event: Extract<RunEvent, { type: K }>) => void };

const HANDLERS: Handlers = {
  start: (draft) => {
    if (draft.record.status === "drafting") {
      draft.transition("queued", "started");
    }
  },
  wake: (draft, event) => onWake(draft, new Set(event.live)),
  task_result: (draft, event) => onTaskResult(draft, event.result),
  task_results: (draft, event) => {
    for (const result of event.results) {
      onTaskResult(draft, result);
    }
  },
  cancel: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      draft.finish("cancelled", event.reason, null);
    }
  },
  pause: (draft) => {
    if (["queued", "running", "waiting"].includes(draft.record.status)) {
      draft.transition("paused", "paused by request");
    }
  },
  resume: (draft) => {
    if (draft.record.status === "paused") {
      draft.transition("running", "resumed by request");
    }
  },
  redrive: (draft) => {
    if (draft.record.status === "failed") {
      redrive(draft);
    }
  },
  gate_answer: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      answerGate(draft, event.gate_id, event.response, event.responder);
    }
  },
  child_started: (draft, event) => {
    if (draft.record.pending_cancels?.includes(event.key)) {
      // Cancelled while its start was in flight: now that it exists, a wake cancels it.
      draft.cleanupDeferred = true;
    }
    if (!isTerminal(draft.record.status)) {
      childStarted(draft, event.key, event.run_id);
    }
  },
  child_finished: (draft, event) => {
    // A child that ended needs no cancel any more, whatever this run is waiting for.
    draft.settleCleanup("pending_cancels", [event.outcome.key]);
    if (!isTerminal(draft.record.status)) {
      childFinished(draft, event.outcome);
    }
  },
  parent_notified: (draft) => {
    if (draft.record.parent) {
      draft.record.parent = { ...draft.record.parent, notified: true };
    }
  },
  children_cancelled: (draft, event) => draft.settleCleanup("pending_cancels", event.keys),
  containers_released: (draft, event) => draft.settleCleanup("pending_releases", event.containers),
};

export function decide(state: RunState, event: RunEvent, context: DecideContext): Decision {
  // Every expression the event evaluates draws from one budget: a failed node past it, never a runaway event.
  return withWorkBudget(new WorkBudget(MAX_EVENT_WORK_UNITS, "coordinator event"), () =>
    decideWithin(state, event, context),
  );
}

function decideWithin(state: RunState, event: RunEvent, context: DecideContext): Decision {
  const draft = new Draft(state, context);
  HANDLERS[event.type](draft as never, event as never);
  advance(draft);
  // An event that changed nothing in the record (a liveness wake that found
  // everything live) hands the same record back, so storage writes nothing.
  const record = sameFields(draft.record, state.record) ? state.record : draft.record;
  return { state: { record, nodes: draft.nodes }, commands: draft.commands, wakeAt: nextWakeAt(draft) };
}

/** Whether two records hold the same value in every field (the draft replaces a field, never edits it in place). */
function sameFields(a: RunState["record"], b: RunState["record"]): boolean {
  const keys = Object.keys(a) as (keyof RunState["record"])[];
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

function onWake(draft: Draft, live: ReadonlySet<string>): void {
  const status = draft.record.status;
  // Cleanup first: what earlier events made pending, and what a restart lost.
  const cleanupCalls = sendCleanup(draft, live, MAX_CLEANUP_CALLS_PER_EVENT);
  if (isTerminal(status)) {
    if (!live.has(NOTIFY_MARKER)) {
      draft.notifyParent(); // Until the parent acknowledges, every wake tries again.
    }
    return;
  }
  if (status === "drafting") {
    if (draft.record.mode !== "auto") {
      return; // Waits for its approval.
    }
    // An auto run is created and started in one transaction; one still in
    // drafting was stored before that (its start was lost with a restart).
    draft.transition("queued", "started");
  }
  if (draft.record.status === "queued") {
    draft.transition("running", "dispatching");
  }
  if (draft.record.deadline_at !== null && draft.now >= draft.record.deadline_at) {
    draft.finish("failed", "run timed out", { code: "run.timeout", message: "the run exceeded its timeout_ms" });
    return;
  }
  expireGates(draft);
  for (const nodeId of Object.keys(draft.nodes)) {
    for (const { index } of draft.node(nodeId).invocations) {
      // Re-read each invocation: an earlier timeout in this loop may have failed its
      // node or, with fail_fast, cancelled it, and a stale copy would be acted on twice.
      const invocation = draft.invocation(nodeId, index);
      if (invocation) {
        checkInvocationTimers(draft, nodeId, invocation, live);
      }
    }
  }
  // A paused run lets timers fire and in-flight work finish, but starts and dispatches nothing.
  if (!isTerminal(draft.record.status) && draft.record.status !== "paused") {
    // One budget of child starts per event, for workflow steps and sub-workflow nodes
    // alike, less the calls cleanup took (a start is two calls, a cancel or release one).
    const startBudget = Math.max(0, MAX_CHILD_STARTS_PER_EVENT - Math.ceil(cleanupCalls / 2));
    const childStarts = startPendingChildren(draft, live, startBudget);
    startReadyNodes(draft);
    dispatchReady(draft, startBudget - childStarts);
  }
}

/** Deadlines, lost dispatches and due retries of one invocation. */
function checkInvocationTimers(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  live: ReadonlySet<string>,
): void {
  const item = itemOf(draft, nodeId, invocation);
  if (invocation.status === "running" && invocation.token !== null) {
    if (!live.has(invocation.token)) {
      // The coordinator restarted while this dispatch was in flight: its result can never
      // arrive. Lost, not timed out, however late this wake comes: the attempt did not
      // overrun, it was dropped, and a timeout would count against its retry policy.
      draft.journal("task.lost", { node: nodeId, item, token: invocation.token, attempt: invocation.attempts });
      // A lost continuation (after a gate or a child) is still the same attempt.
      const recount = invocation.resume ? 0 : 1;
      draft.setInvocation(nodeId, invocation.index, {
        status: "pending",
        token: null,
        deadline_at: null,
        attempts: invocation.attempts - recount,
      });
      draft.setNode(nodeId, { attempts: Math.max(0, draft.node(nodeId).attempts - recount) });
    } else if (invocation.deadline_at !== null && draft.now >= invocation.deadline_at) {
      draft.journal("task.timeout", { node: nodeId, item, token: invocation.token, attempt: invocation.attempts });
      failInvocation(draft, nodeId, invocation, {
        code: "task.timeout",
        message: `attempt ${invocation.attempts} exceeded its timeout`,
        retryable: true,
      });
    }
  } else if (invocation.status === "retrying" && invocation.retry_at !== null && draft.now >= invocation.retry_at) {
    draft.setInvocation(nodeId, invocation.index, { status: "pending", retry_at: null });
  }
}

function onTaskResult(draft: Draft, result: TaskResult): void {
  if (isTerminal(draft.record.status)) {
    return; // The journal is closed by its attestation; nothing may follow it.
  }
  const found = draft.findByToken(result.token_id);
  if (!found || found.invocation.status !== "running") {
    draft.journal("task.result_ignored", {
      token: result.token_id,
      reason: found ? `the invocation is ${found.invocation.status}` : "no dispatch in flight has this token",
      success: result.success,
    });
    return;
  }
  const { nodeId, invocation } = found;
  const tokens = result.metrics.llm_tokens;
  const usage = draft.record.usage;
  draft.record.usage = {
    input_tokens: usage.input_tokens + tokens.input,
    output_tokens: usage.output_tokens + tokens.output,
    cost_usd: usage.cost_usd + tokens.cost_usd,
  };
  if (result.suspended) {
    suspendInvocation(draft, nodeId, invocation, result.suspended);
    return;
  }
  if (result.success) {
    completeInvocation(draft, nodeId, invocation, (result.output ?? null) as Json, result.metrics.duration_ms);
    return;
  }
  failInvocation(draft, nodeId, invocation, attemptErrorOf(result));
}

/** Failed and cancelled nodes start over; completed and skipped ones keep their results. */
function redrive(draft: Draft): void {
  draft.record.redrives += 1;
  draft.record.error = null;
  const reset: string[] = [];
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    if (node.status === "failed" || node.status === "cancelled") {
      draft.setNode(nodeId, {
        status: "pending",
        error: null,
        invocations: [],
        iterations: 0,
        settled_seq: null,
        started_at: null,
        finished_at: null,
      });
      reset.push(nodeId);
    }
  }
  // Errors recorded by nodes that will run again are history, not state.
  const state = draft.record.context.state;
  if (Array.isArray(state._errors)) {
    const kept = state._errors.filter(
      (entry) =>
        !(typeof entry === "object" && entry !== null && !Array.isArray(entry) && reset.includes(String(entry.node))),
    );
    draft.record.context = { ...draft.record.context, state: { ...state, _errors: kept } };
  }
  // The first entry after the previous attestation: the verifier accepts only this kind there.
  draft.journal("run.redriven", { redrive: draft.record.redrives, nodes: reset });
  // The redriven run works in its containers again: a release still pending from the failure
  // must not stop them under it (the run releases them when it ends again). Children still
  // to cancel stay pending: they belong to the attempts that failed.
  draft.settleCleanup("pending_releases", draft.record.pending_releases ?? []);
  draft.transition("queued", `redrive ${draft.record.redrives}`);
  if (draft.workflow.timeout_ms !== undefined) {
    draft.record.deadline_at = draft.now + draft.workflow.timeout_ms;
  }
}

// ─── After every event ───────────────────────────────────────────────────────

/** Starts what became ready, settles the run when its nodes are done, and keeps `running` / `waiting` truthful. */
function advance(draft: Draft): void {
  const status = draft.record.status;
  if (status === "drafting" || status === "queued" || isTerminal(status)) {
    return;
  }
  if (status !== "paused") {
    startReadyNodes(draft);
  }
  const inFlight = inFlightCount(draft);
  if (draft.record.error !== null) {
    // Retries still waiting will not be dispatched by a failing run: it ends once nothing is in flight.
    if (inFlight === 0) {
      draft.finish("failed", draft.record.error.message, draft.record.error);
    }
    return;
  }
  const allSettled = Object.entries(draft.nodes).every(([nodeId, node]) =>
    isSettled(node, draft.nodeDefinition(nodeId)),
  );
  if (allSettled) {
    const problems = validateJson(draft.workflow.output_schema, draft.record.context.output, "output");
    if (problems.length > 0) {
      const message = problems.map((problem) => `${problem.path}: ${problem.message}`).join("; ");
      draft.finish("failed", "the run output does not match output_schema", { code: "run.invalid_output", message });
    } else {
      draft.finish("completed", "all nodes settled", null);
    }
    return;
  }
  refreshActivity(draft, inFlight);
}

/** `running` while something executes or is ready to; `waiting` while only timers are pending. */
function refreshActivity(draft: Draft, inFlight: number): void {
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    if (node.status === "running" || node.status === "waiting") {
      const active = node.invocations.some(
        (invocation) => invocation.status === "running" || invocation.status === "pending",
      );
      const nodeStatus = active ? "running" : "waiting";
      if (nodeStatus !== node.status) {
        draft.setNode(nodeId, { status: nodeStatus });
      }
    }
  }
  const status = draft.record.status;
  if (status !== "running" && status !== "waiting") {
    return;
  }
  const next: RunStatus = inFlight > 0 || dispatchable(draft, 1).length > 0 ? "running" : "waiting";
  if (next !== status) {
    draft.transition(next, next === "waiting" ? "waiting for timers, gates or child runs" : "work resumed");
  }
}

function nextWakeAt(draft: Draft): number | null {
  const status = draft.record.status;
  const cleanupAt = nextCleanupAt(draft);
  if (isTerminal(status)) {
    const parent = draft.record.parent;
    const notifyAt = parent && !parent.notified ? draft.now + PARENT_NOTIFY_RETRY_MS : null;
    return notifyAt === null || cleanupAt === null ? (notifyAt ?? cleanupAt) : Math.min(notifyAt, cleanupAt);
  }
  if (status === "drafting") {
    return draft.record.mode === "auto" ? draft.now : null;
  }
  if (status === "queued" || (status !== "paused" && hasUnrequestedChild(draft)) || dispatchable(draft, 1).length > 0) {
    return draft.now;
  }
  let wakeAt = Math.min(draft.record.deadline_at ?? Number.POSITIVE_INFINITY, nextGateExpiry(draft));
  let outstanding = false;
  for (const node of Object.values(draft.nodes)) {
    for (const invocation of node.invocations) {
      if (invocation.status === "running") {
        outstanding = true;
        wakeAt = Math.min(wakeAt, invocation.deadline_at ?? Number.POSITIVE_INFINITY);
      } else if (invocation.status === "retrying" && invocation.retry_at !== null) {
        wakeAt = Math.min(wakeAt, invocation.retry_at);
      } else if (status !== "paused" && unstartedChild(invocation) !== null) {
        // Asked for, not known to exist yet (a paused run asks again only once resumed).
        outstanding = true;
      }
    }
  }
  if (outstanding) {
    wakeAt = Math.min(wakeAt, draft.now + LIVENESS_CHECK_MS);
  }
  wakeAt = Math.min(wakeAt, cleanupAt ?? Number.POSITIVE_INFINITY);
  return Number.isFinite(wakeAt) ? wakeAt : null;
}

/**
 * When pending cleanup needs a wake: now when some is not sent yet, else a
 * liveness check (a restart loses the calls in flight; the check finds them
 * not live and sends them again), spaced out once the run has ended.
 */
function nextCleanupAt(draft: Draft): number | null {
  if (!hasPendingCleanup(draft.record)) {
    return null;
  }
  if (draft.cleanupDeferred) {
    return draft.now;
  }
  if (!isTerminal(draft.record.status)) {
    return draft.now + LIVENESS_CHECK_MS;
  }
  const sinceEnd = Math.max(0, draft.now - draft.record.updated_at);
  return draft.now + Math.min(MAX_CLEANUP_RETRY_MS, Math.max(LIVENESS_CHECK_MS, Math.floor(sinceEnd / 10)));
}
