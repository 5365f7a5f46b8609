import { validateJson } from "../lib/json-schema.ts";
import { viewOf } from "../lib/expr/blob-scope.ts";
import { RUN_STATUS_REASONS } from "../schemas/journal-bodies.ts";
import type { RunStatus } from "../schemas/run.ts";
import { hasPendingCleanup } from "./cleanup.ts";
import { compensationWakeAt } from "./compensation.ts";
import { inFlightCount, SETTLED_NODE } from "./dispatch-basics.ts";
import { dispatchable } from "./dispatch.ts";
import type { Draft } from "./draft.ts";
import { isTerminal } from "./lifecycle.ts";
import { isSettled, startReadyNodes } from "./nodes.ts";
import { waitTimes } from "./wait-kinds.ts";
import { runLimitsWakeAt } from "./run-limits.ts";

/**
 * What `decide` does after every event: settle the run and keep its status
 * truthful ({@link advance}), and say when the alarm must next fire
 * ({@link nextWakeAt}).
 */

/** How soon a child that could not reach its parent tries again. */
export const PARENT_NOTIFY_RETRY_MS = 1_000;
/**
 * While work is outstanding that a restart would lose without a trace (a
 * dispatch in flight, a child run being started), the alarm is never further
 * away than this. A restart (an eviction, a deploy, a crash) loses the
 * instance's memory of what it awaits, and nothing else would wake the object:
 * this alarm is what finds the loss (the wake compares the stored work with
 * the work live in the instance) without anyone reading the run. While the same
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

/** Starts what became ready, settles the run when its nodes are done, and keeps `running` / `waiting` truthful. */
export function advance(draft: Draft): void {
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
  if (allNodesSettled(draft)) {
    // Checked as the values its blob references stand for (lib/expr/blob-scope.ts).
    const problems = validateJson(draft.workflow.output_schema, viewOf(draft.record.context.output), "output");
    if (problems.length > 0) {
      const message = problems.map((problem) => `${problem.path}: ${problem.message}`).join("; ");
      draft.finish("failed", RUN_STATUS_REASONS.invalidOutput, { code: "run.invalid_output", message });
    } else {
      draft.finish("completed", RUN_STATUS_REASONS.allSettled, null);
    }
    return;
  }
  refreshActivity(draft, inFlight);
}

/**
 * Whether every node is settled. Read from the last node back: downstream nodes come
 * later in a definition and settle last, so an unsettled one is usually found at once.
 */
function allNodesSettled(draft: Draft): boolean {
  const ids = Object.keys(draft.nodes);
  for (let position = ids.length - 1; position >= 0; position -= 1) {
    const id = ids[position];
    const node = id === undefined ? undefined : draft.nodes[id];
    if (id === undefined || node === undefined || !isSettled(node, draft.nodeDefinition(id))) {
      return false;
    }
  }
  return true;
}

/** `running` while something executes or is ready to; `waiting` while only timers are pending. */
function refreshActivity(draft: Draft, inFlight: number): void {
  for (const nodeId of draft.activeNodeIds()) {
    const node = draft.node(nodeId);
    const active = node.invocations.some(
      (invocation) => invocation.status === "running" || invocation.status === "pending",
    );
    const nodeStatus = active ? "running" : "waiting";
    if (nodeStatus !== node.status) {
      draft.setNode(nodeId, { status: nodeStatus });
    }
  }
  const status = draft.record.status;
  if (status !== "running" && status !== "waiting") {
    return;
  }
  const next: RunStatus = inFlight > 0 || dispatchable(draft, 1).length > 0 ? "running" : "waiting";
  if (next !== status) {
    draft.transition(next, next === "waiting" ? RUN_STATUS_REASONS.waiting : RUN_STATUS_REASONS.workResumed);
  }
}

/** When the alarm should next fire, or null for never. */
export function nextWakeAt(draft: Draft): number | null {
  const status = draft.record.status;
  const cleanupAt = nextCleanupAt(draft);
  if (isTerminal(status)) {
    const parent = draft.record.parent;
    const notifyAt = parent && !parent.notified ? draft.now + PARENT_NOTIFY_RETRY_MS : null;
    const times = [notifyAt, cleanupAt, compensationWakeAt(draft, LIVENESS_CHECK_MS)];
    const due = times.filter((at): at is number => at !== null);
    return due.length === 0 ? null : Math.min(...due);
  }
  if (status === "drafting") {
    return draft.record.mode === "auto" ? draft.now : null;
  }
  if (status === "queued") {
    // At once, or when a delayed start is due (cleanup a redrive left pending may come first);
    // a run due that waits for its limits wakes only to send or resend its request.
    const startAt = Math.max(draft.now, draft.record.start_at ?? draft.now);
    const due = [startAt > draft.now ? startAt : runLimitsWakeAt(draft), cleanupAt];
    const times = due.filter((at): at is number => at !== null);
    return times.length === 0 ? null : Math.min(...times);
  }
  const waits = waitTimes(draft);
  if ((status !== "paused" && waits.unsent) || dispatchable(draft, 1).length > 0) {
    return draft.now;
  }
  let wakeAt = Math.min(draft.record.deadline_at ?? Number.POSITIVE_INFINITY, waits.expiresAt);
  // A call out for a wait (a child being started) is lost with a restart (a paused run asks again only once resumed).
  let outstanding = status !== "paused" && waits.inFlight;
  for (const node of Object.values(draft.nodes)) {
    if (SETTLED_NODE.has(node.status)) {
      continue; // no open invocations: no deadlines, retries or children to ask for
    }
    for (const invocation of node.invocations) {
      if (invocation.status === "running") {
        outstanding = true;
        wakeAt = Math.min(wakeAt, invocation.deadline_at ?? Number.POSITIVE_INFINITY);
      } else if (invocation.status === "retrying" && invocation.retry_at !== null) {
        wakeAt = Math.min(wakeAt, invocation.retry_at);
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
