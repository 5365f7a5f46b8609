import type { WaitingFor } from "../schemas/api.ts";
import type { StepRecord, TaskSuspension } from "../schemas/payload.ts";
import type { InvocationRecord, Suspension } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import type { LiveWork } from "./live.ts";
import { childWaits } from "./wait-children.ts";
import { eventWaits } from "./wait-events.ts";
import { gateWaits } from "./wait-gates.ts";
import { timerWaits } from "./wait-timers.ts";
import { toolWaits } from "./wait-tools.ts";
import { limitWaits } from "./wait-limits.ts";
import { waitKey } from "./waits.ts";

/**
 * The kinds of wait a suspended invocation can be in (gates, child runs,
 * timers), as one typed table. Scheduling, expiry, sending, closing and the
 * views read the table, never a kind by name: a kind added to the stored
 * union (`Suspension.waiting_for`) does not compile until it has a row, and a
 * row does not compile until it says what each of those places does with it.
 */

type Waiting = Suspension["waiting_for"];
export type WaitKind = Waiting["kind"];
export type WaitOf<K extends WaitKind> = Extract<Waiting, { kind: K }>;
type WireWaitOf<K extends WaitKind> = Extract<TaskSuspension["wait"], { kind: K }>;

/** An open wait and where it is. */
export interface OpenWait<K extends WaitKind = WaitKind> {
  nodeId: string;
  invocation: InvocationRecord;
  suspension: Suspension;
  wait: WaitOf<K>;
}

/** Where a task stopped to wait: its node, invocation, step and the wait's key ({@link waitKey}). */
export interface WaitPlace {
  nodeId: string;
  invocation: InvocationRecord;
  stepRef: string;
  key: string;
}

export interface WaitKindRow<K extends WaitKind> {
  /** Records what the wait needs and journals its opening; the invocation keeps what this returns. */
  open(draft: Draft, place: WaitPlace, wire: WireWaitOf<K>): WaitOf<K>;
  /** When its time runs out (a gate's expiry, a timer's end), or null for never. */
  expiresAt(draft: Draft, wait: WaitOf<K>): number | null;
  /** Its time ran out: the step goes on (with a default, an error, or the timer's output). */
  expire(draft: Draft, at: OpenWait<K>): void;
  /** It has a call nobody sent yet (a child run to start): a wake sends it at once. */
  unsent(wait: WaitOf<K>): boolean;
  /** A call for it is out and unconfirmed: a restart would lose it, so the liveness alarm stays set. */
  inFlight(wait: WaitOf<K>): boolean;
  /** Sends its calls that are unsent or lost (not live in this instance), at most `budget`; returns how many. */
  send(draft: Draft, at: OpenWait<K>, live: LiveWork, budget: number): number;
  /** It ends unanswered (the run ends, its node fails or is cancelled): close what it opened, and journal it. */
  close(draft: Draft, at: OpenWait<K>, reason: string): void;
  /** `waiting_for` in the run and node views. */
  view(wait: WaitOf<K>): Extract<WaitingFor, { kind: K }>;
}

/** The table: one row per kind, each row complete. */
export const WAIT_KINDS: { readonly [K in WaitKind]: WaitKindRow<K> } = {
  gate: gateWaits,
  child: childWaits,
  timer: timerWaits,
  event: eventWaits,
  tools: toolWaits,
  limit: limitWaits,
};

/** The stored, wire and view unions name the same kinds: a kind missing from one of them does not compile. */
export type WaitKindsAgree = [
  Assert<Agree<TaskSuspension["wait"]["kind"], WaitKind>>,
  Assert<Agree<WaitingFor["kind"], WaitKind>>,
];
type Agree<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Assert<T extends true> = T;

/** The row of a kind; for a wait of any kind (`K` = WaitKind) its methods take any wait. */
function rowOf<K extends WaitKind>(kind: K): WaitKindRow<K> {
  return WAIT_KINDS[kind];
}

/** A task stopped at a step that waits: the steps before it are journaled, then the wait opens. */
export function suspendInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  suspended: TaskSuspension,
  result: { token: string; steps: StepRecord[] },
): void {
  // The steps that ran before the wait are on record now: the continuation starts at the waiting step.
  draft.journal("task.suspended", {
    node: nodeId,
    item: draft.itemOf(nodeId, invocation),
    token: result.token,
    attempt: invocation.attempts,
    step: suspended.step_ref,
    steps: result.steps,
  });
  const stepRef = suspended.step_ref;
  const place = { nodeId, invocation, stepRef, key: waitKey(draft, nodeId, invocation, stepRef) };
  const waiting = rowOf(suspended.wait.kind).open(draft, place, suspended.wait);
  draft.setInvocation(nodeId, invocation.index, {
    status: "suspended",
    token: null,
    deadline_at: null,
    suspension: {
      step_ref: suspended.step_ref,
      step_index: suspended.step_index,
      context: suspended.context,
      waiting_for: waiting,
    },
    resume: undefined,
  });
  // A wait whose time has already come (a timer in the past) ends in the same event.
  const expiresAt = rowOf(waiting.kind).expiresAt(draft, waiting);
  if (expiresAt !== null && expiresAt <= draft.now) {
    expireDue(draft, nodeId);
  }
}

/** The open waits of the run (or of one node): suspended invocations of nodes not settled. */
export function openWaits(draft: Draft, onlyNode?: string): OpenWait[] {
  const found: OpenWait[] = [];
  const nodeIds = onlyNode === undefined ? draft.activeNodeIds() : [onlyNode];
  for (const nodeId of nodeIds) {
    const node = draft.nodes[nodeId];
    if (node === undefined || (node.status !== "running" && node.status !== "waiting")) {
      continue; // a settled node has no open invocations, a pending one none yet
    }
    for (const invocation of node.invocations) {
      const suspension = invocation.suspension;
      if (invocation.status === "suspended" && suspension !== undefined) {
        found.push({ nodeId, invocation, suspension, wait: suspension.waiting_for });
      }
    }
  }
  return found;
}

/** What the alarm needs to know of the run's waits. */
export interface WaitTimes {
  /** The earliest expiry, or +∞. */
  expiresAt: number;
  /** Some wait has a call nobody sent yet. */
  unsent: boolean;
  /** Some wait has a call out that a restart would lose. */
  inFlight: boolean;
}

export function waitTimes(draft: Draft): WaitTimes {
  const times: WaitTimes = { expiresAt: Number.POSITIVE_INFINITY, unsent: false, inFlight: false };
  for (const { wait } of openWaits(draft)) {
    const row = rowOf(wait.kind);
    times.expiresAt = Math.min(times.expiresAt, row.expiresAt(draft, wait) ?? Number.POSITIVE_INFINITY);
    times.unsent ||= row.unsent(wait);
    times.inFlight ||= row.inFlight(wait);
  }
  return times;
}

/** Whether a wait needs a wake after a restart: a call unsent, or one in flight that the restart lost. */
export function needsWakeAfterRestart(invocation: InvocationRecord): boolean {
  const wait = invocation.status === "suspended" ? invocation.suspension?.waiting_for : undefined;
  const row = wait && rowOf(wait.kind);
  return wait !== undefined && row !== undefined && (row.unsent(wait) || row.inFlight(wait));
}

/** Waits whose time has come end as their kind says (gates expire, timers fire); a paused run's too. */
export function expireDue(draft: Draft, onlyNode?: string): void {
  for (const open of openWaits(draft, onlyNode)) {
    // Re-read: an earlier expiry in this loop may have failed the node.
    if (draft.invocation(open.nodeId, open.invocation.index)?.suspension !== open.suspension) {
      continue;
    }
    const row = rowOf(open.wait.kind);
    const expiresAt = row.expiresAt(draft, open.wait);
    if (expiresAt !== null && draft.now >= expiresAt) {
      row.expire(draft, open);
    }
  }
}

/** Sends what waits need sent (child starts), at most `budget` calls; returns how many were sent. */
export function sendWaits(draft: Draft, live: LiveWork, budget: number): number {
  let sent = 0;
  for (const open of openWaits(draft)) {
    if (sent >= budget) {
      break;
    }
    sent += rowOf(open.wait.kind).send(draft, open, live, budget - sent);
  }
  return sent;
}

/** The node's open waits close unanswered (its invocations are about to close): each as its kind says. */
export function closeWaits(draft: Draft, nodeId: string, reason: string): void {
  for (const open of openWaits(draft, nodeId)) {
    rowOf(open.wait.kind).close(draft, open, reason);
  }
}

/** `waiting_for` of a suspended invocation, for the views. */
export function waitingForView(invocation: InvocationRecord): WaitingFor | undefined {
  const wait = invocation.status === "suspended" ? invocation.suspension?.waiting_for : undefined;
  return wait && rowOf(wait.kind).view(wait);
}
