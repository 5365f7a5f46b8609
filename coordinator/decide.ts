import { redriveReason, RUN_STATUS_REASONS } from "../schemas/journal-bodies.ts";
import { attemptErrorOf, type TaskResult } from "../schemas/payload.ts";
import type { InvocationRecord } from "../schemas/run.ts";
import { MAX_CLEANUP_CALLS_PER_EVENT, sendCleanup } from "./cleanup.ts";
import {
  compensateOnEnd,
  enqueueUndos,
  onUndoResult,
  redrivesCompensation,
  startCompensation,
  wakeCompensation,
} from "./compensation.ts";
import { allows, withBy } from "./controls.ts";
import type { By } from "../schemas/auth.ts";
import { childFinished, childStarted } from "./child-results.ts";
import { deliverEvent, eventsRegistered, receiveSignal } from "./event-delivery.ts";
import { dispatchReady, FULL_WAKE_BUDGET, TASKS_PER_EXECUTOR_CALL } from "./dispatch.ts";
import { holdRunLimits, runHolderId, runLimitGranted, runLimitQueued } from "./run-limits.ts";
import { limitGranted, limitQueued } from "./wait-limits.ts";
import { Draft, type Command, type DecideContext, type RunState } from "./draft.ts";
import type { RunEvent, WakeBudget } from "./events.ts";
import { isStartDue, isTerminal } from "./lifecycle.ts";
import type { LiveWork } from "./live.ts";
import { journalStepChoice } from "./choices.ts";
import { completeInvocation, failInvocation, startReadyNodes } from "./nodes.ts";
import { advance, nextWakeAt } from "./schedule.ts";
import { approveSteps, grantApprovedGates } from "./standing-approvals.ts";
import { mergeStepSummaries } from "./summaries.ts";
import { MAX_EVENT_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { answerGate } from "./wait-gates.ts";
import { addGateLink } from "./gate-links.ts";
import { expireDue, sendWaits, suspendInvocation } from "./wait-kinds.ts";
import { onToolCallResult } from "./wait-tools.ts";
import { MAX_CHILD_STARTS_PER_EVENT } from "./waits.ts";

export { LIVENESS_CHECK_MS, MAX_CLEANUP_RETRY_MS, PARENT_NOTIFY_RETRY_MS } from "./schedule.ts";
export type { RunEvent, WakeBudget } from "./events.ts";
export type { Command, DecideContext, RunState } from "./draft.ts";
export { DEADLINE_GRACE_MS, DEFAULT_MAX_PARALLEL, DEFAULT_TASK_TIMEOUT_MS } from "./dispatch-basics.ts";
export {
  FULL_WAKE_BUDGET,
  MAX_DISPATCHES_PER_EVENT,
  MAX_EXECUTOR_CALLS_PER_EVENT,
  TASKS_PER_EXECUTOR_CALL,
} from "./dispatch.ts";

/**
 * The coordinator's brain: `decide(state, event, context)` returns the next
 * state and the commands that carry it out. No storage, no I/O, no clock or
 * randomness of its own: the Durable Object persists the state and journal
 * entries in one transaction, then performs the dispatches.
 *
 * Dispatches happen only on `wake`, within the calls its budget allows: each
 * is one Worker invocation, and the platform allows a Durable Object event
 * 32. Results dispatch nothing themselves; the Durable Object follows them
 * with a wake that has what their event's budget left, or, when that is
 * spent, with a fresh event.
 */

export interface Decision {
  state: RunState;
  commands: Command[];
  /** When the alarm should next fire, or null for never. */
  wakeAt: number | null;
  /** The nodes whose records differ from the state decided on (storage writes only these). */
  changedNodes: ReadonlySet<string>;
  /** The expression work units the decision spent (lib/expr/work-budget.ts). */
  workUnits: number;
}

type Handlers = { [K in RunEvent["type"]]: (draft: Draft, event: Extract<RunEvent, { type: K }>) => void };

const HANDLERS: Handlers = {
  // The event an approval applies, and an auto run on creation.
  start: (draft, event) => {
    if (allows("approve", draft.record)) {
      draft.transition("queued", RUN_STATUS_REASONS.started, event.by);
    }
  },
  wake: (draft, event) => onWake(draft, event.live, event.budget ?? FULL_WAKE_BUDGET),
  task_result: (draft, event) => onTaskResult(draft, event.result),
  task_results: (draft, event) => {
    for (const result of event.results) {
      onTaskResult(draft, result);
    }
  },
  cancel: (draft, event) => {
    if (allows("cancel", draft.record)) {
      draft.finish("cancelled", event.reason, null, event.by);
    }
  },
  pause: (draft, event) => {
    if (allows("pause", draft.record)) {
      draft.transition("paused", RUN_STATUS_REASONS.paused, event.by);
    }
  },
  resume: (draft, event) => {
    if (allows("resume", draft.record)) {
      // A run paused before its delayed start was due waits for it again.
      const to = isStartDue(draft.record, draft.now) ? "running" : "queued";
      draft.transition(to, RUN_STATUS_REASONS.resumed, event.by);
    }
  },
  redrive: (draft, event) => {
    if (allows("redrive", draft.record)) {
      if (redrivesCompensation(draft.record)) {
        startCompensation(draft, "redrive", event.by);
      } else {
        redrive(draft, event.by);
      }
    }
  },
  compensate: (draft, event) => {
    if (allows("compensate", draft.record)) {
      startCompensation(draft, "manual", event.by);
    }
  },
  approve_steps: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      approveSteps(draft, event.steps, event.responder, event.by);
    }
  },
  gate_answer: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      answerGate(draft, event.gate_id, event.response, event.responder, event.by);
    }
  },
  gate_link: (draft, event) => addGateLink(draft, event.gate_id, event.link),
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
  signal: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      receiveSignal(draft, event.received);
    }
  },
  event_registered: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      eventsRegistered(draft, event.key, event.events);
    }
  },
  event_delivered: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      deliverEvent(draft, event.key, event.received);
    }
  },
  limit_queued: (draft, event) => {
    if (event.holder_id === runHolderId(draft.record.run_id)) {
      runLimitQueued(draft, event.answer);
    } else if (!isTerminal(draft.record.status)) {
      limitQueued(draft, event.holder_id, event.answer);
    }
  },
  limit_granted: (draft, event) => {
    if (event.holder_id === runHolderId(draft.record.run_id)) {
      runLimitGranted(draft);
    } else if (!isTerminal(draft.record.status)) {
      limitGranted(draft, event.holder_id);
    }
  },
  limits_released: (draft, event) => draft.settleCleanup("pending_limit_releases", event.objects),
};

/**
 * Decides one event. With `follow` (a wake), the wake is decided too when the
 * event leaves work due now (a chain's next node after its predecessor's
 * result): the same as deciding it on the event's decision, in one draft.
 */
export function decide(state: RunState, event: RunEvent, context: DecideContext, follow?: RunEvent): Decision {
  const draft = new Draft(state, context);
  const budget = new WorkBudget(MAX_EVENT_WORK_UNITS, "coordinator event");
  let wakeAt = decideOn(draft, event, state.record.status, budget);
  let workUnits = budget.spent;
  if (follow !== undefined && wakeAt !== null && wakeAt <= context.now) {
    // What a fresh draft of the event's decision would start with: no cleanup deferred yet.
    draft.cleanupDeferred = false;
    const followBudget = new WorkBudget(MAX_EVENT_WORK_UNITS, "coordinator event");
    wakeAt = decideOn(draft, follow, draft.record.status, followBudget);
    workUnits += followBudget.spent;
  }
  // An event that changed nothing in the record (a liveness wake that found
  // everything live) hands the same record back, so storage writes nothing.
  const record = sameFields(draft.record, state.record) ? state.record : draft.record;
  const { commands, changedNodes } = draft;
  return { state: { record, nodes: draft.nodes }, commands, wakeAt, changedNodes, workUnits };
}

/** Applies one event to the draft and settles what follows from it; returns when the run next needs a wake. */
function decideOn(
  draft: Draft,
  event: RunEvent,
  statusBefore: RunState["record"]["status"],
  budget: WorkBudget,
): number | null {
  // Every expression the event evaluates draws from one budget: a failed node past it, never a runaway event.
  return withWorkBudget(budget, () => {
    HANDLERS[event.type](draft as never, event as never);
    advance(draft);
    compensateOnEnd(draft, statusBefore);
    return nextWakeAt(draft);
  });
}

/** Whether two records hold the same value in every field (the draft replaces a field, never edits it in place). */
function sameFields(a: RunState["record"], b: RunState["record"]): boolean {
  const keys = Object.keys(a) as (keyof RunState["record"])[];
  return keys.length === Object.keys(b).length && keys.every((key) => a[key] === b[key]);
}

/**
 * A queued run starts once it is due (a delayed start waits for its start_at,
 * when nextWakeAt wakes it) and holds a slot of each of its workflow's limits.
 */
function startWhenDue(draft: Draft): boolean {
  if (!isStartDue(draft.record, draft.now) || !holdRunLimits(draft)) {
    return false;
  }
  draft.transition("running", RUN_STATUS_REASONS.dispatching);
  return true;
}

function onWake(draft: Draft, live: LiveWork, budget: WakeBudget): void {
  const status = draft.record.status;
  // Cleanup first: what earlier events made pending, and what a restart lost.
  const cleanupCalls = sendCleanup(draft, live, Math.min(MAX_CLEANUP_CALLS_PER_EVENT, budget.otherCalls));
  if (isTerminal(status)) {
    if (budget.executorCalls > 0) {
      wakeCompensation(draft, live);
    }
    if (!live.notifying) {
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
    draft.transition("queued", RUN_STATUS_REASONS.started);
  }
  if (draft.record.status === "queued" && !startWhenDue(draft)) {
    return;
  }
  if (draft.record.deadline_at !== null && draft.now >= draft.record.deadline_at) {
    draft.finish("failed", RUN_STATUS_REASONS.timedOut, {
      code: "run.timeout",
      message: "the run exceeded its timeout_ms",
    });
    return;
  }
  expireDue(draft);
  for (const nodeId in draft.nodes) {
    for (const { index, status } of draft.nodes[nodeId]?.invocations ?? []) {
      if (status !== "running" && status !== "retrying") {
        continue; // No timers: nothing this loop does makes an invocation running or retrying.
      }
      // Re-read each invocation: an earlier timeout in this loop may have failed its
      // node or, with fail_fast, cancelled it, and a stale copy would be acted on twice.
      const invocation = draft.invocation(nodeId, index);
      if (invocation?.status === "running" || invocation?.status === "retrying") {
        checkInvocationTimers(draft, nodeId, invocation, live);
      }
    }
  }
  // A paused run lets timers fire and in-flight work finish, but starts and dispatches nothing.
  if (!isTerminal(draft.record.status) && draft.record.status !== "paused") {
    // One budget of child starts per event, for workflow steps and sub-workflow nodes
    // alike, less the calls cleanup took (a start is two calls, a cancel or release one).
    const starts = Math.min(MAX_CHILD_STARTS_PER_EVENT, Math.floor(budget.otherCalls / 2));
    const startBudget = Math.max(0, starts - Math.ceil(cleanupCalls / 2));
    const childStarts = sendWaits(draft, live, startBudget);
    startReadyNodes(draft);
    dispatchReady(draft, startBudget - childStarts, budget.executorCalls * TASKS_PER_EXECUTOR_CALL);
  }
}

/** Deadlines, lost dispatches and due retries of one invocation. */
function checkInvocationTimers(draft: Draft, nodeId: string, invocation: InvocationRecord, live: LiveWork): void {
  const item = draft.itemOf(nodeId, invocation);
  if (invocation.status === "running" && invocation.token !== null) {
    if (!live.tokens.has(invocation.token)) {
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
    // The journal is closed by its attestation: only a compensation's undos may follow it.
    onUndoResult(draft, result);
    return;
  }
  if (onToolCallResult(draft, result)) {
    addUsage(draft, result); // a tool may be an llm action
    return;
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
  const { nodeId } = found;
  const invocation = withStepSummaries(draft, nodeId, found.invocation, result);
  addUsage(draft, result);
  // Each outcome journals the result's step records first: that entry is where its undos were enqueued.
  enqueueUndos(
    draft,
    { node: nodeId, item: draft.itemOf(nodeId, invocation) },
    result.steps,
    draft.record.journal_seq + 1,
  );
  if (result.suspended) {
    suspendInvocation(draft, nodeId, invocation, result.suspended, {
      token: result.token_id,
      steps: result.steps ?? [],
    });
    journalStepChoice(draft, nodeId, invocation, result.suspended);
    // An approval gate that opened for a step approved beforehand is granted as it opens.
    grantApprovedGates(draft);
  } else if (result.success) {
    completeInvocation(draft, nodeId, invocation, result.output ?? null, result.metrics.duration_ms, result.steps);
  } else {
    failInvocation(draft, nodeId, invocation, attemptErrorOf(result), result.steps);
  }
}

/** What a result's model calls cost is the run's too. */
function addUsage(draft: Draft, result: TaskResult): void {
  const tokens = result.metrics.llm_tokens;
  const usage = draft.record.usage;
  draft.record.usage = {
    input_tokens: usage.input_tokens + tokens.input,
    output_tokens: usage.output_tokens + tokens.output,
    cost_usd: usage.cost_usd + tokens.cost_usd,
  };
}

/** The invocation with its step summaries brought up to date by the result's step records (written with it). */
function withStepSummaries(draft: Draft, nodeId: string, invocation: InvocationRecord, result: TaskResult) {
  if (result.steps === undefined) {
    return invocation;
  }
  draft.setInvocation(nodeId, invocation.index, { steps: mergeStepSummaries(invocation.steps, result.steps) });
  return draft.invocation(nodeId, invocation.index) ?? invocation;
}

/** Failed and cancelled nodes start over; completed and skipped ones keep their results. */
function redrive(draft: Draft, by: By | undefined): void {
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
  draft.journal("run.redriven", { redrive: draft.record.redrives, nodes: reset, ...withBy(by) });
  // The redriven run works in its containers again: a release still pending from the failure
  // must not stop them under it (the run releases them when it ends again). Children still
  // to cancel stay pending: they belong to the attempts that failed.
  draft.settleCleanup("pending_releases", draft.record.pending_releases ?? []);
  draft.transition("queued", redriveReason(draft.record.redrives), by);
  if (draft.workflow.timeout_ms !== undefined) {
    draft.record.deadline_at = draft.now + draft.workflow.timeout_ms;
  }
}
