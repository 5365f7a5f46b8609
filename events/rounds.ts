/**
 * Delivery rounds, as plain data: which pending deliveries a hub sends in one
 * Durable Object event, and when it must send again. No storage, no clock:
 * the hub (events/hub.ts) reads the rows, asks, and applies the answer.
 */

/**
 * The most deliveries (calls to coordinators) one hub event sends. The
 * platform caps the calls one event has in flight at 32; the rest is left
 * for the self-call that continues and for slack.
 */
export const MAX_DELIVERIES_PER_ROUND = 24;
/**
 * A sent delivery is due again this long after it was sent: when its answer
 * never came back (the instance died mid-round), the alarm resends it. The
 * coordinator's side is idempotent, so a resend is harmless.
 */
export const DELIVERY_LEASE_MS = 30_000;
/** The first retry of a delivery that failed comes this long after the failure… */
export const DELIVERY_RETRY_BASE_MS = 1_000;
/** …doubling with each failure, up to this. */
export const DELIVERY_RETRY_MAX_MS = 300_000;

/** A pending delivery as the planner sees it. */
export interface PendingDelivery {
  wait_key: string;
  run_id: string;
  /** The event's place in the hub's order of acceptance: a wait is offered its oldest event first. */
  seq: number;
  /** When it may be sent: on acceptance, after a lease, or after a retry's backoff. */
  due_at: number;
  /** Sends that failed so far. */
  attempts: number;
}

/** One round: what to send now, and when the next round is due. */
export interface RoundPlan {
  send: PendingDelivery[];
  /** `now`: more is due at once (a fresh event sends it); a time: the next due; null: nothing pending. */
  next: "now" | number | null;
}

/**
 * Plans a round. Each wait is offered only its oldest pending event (a wait
 * consumes at most one, and on any answer the hub forgets the wait and its
 * other deliveries): when that one is not due (a retry backing off, a send in
 * flight), nothing newer is sent to the wait either. Of the due ones, the
 * oldest events go first, at most `maxCalls`.
 */
export function planRound(
  pending: readonly PendingDelivery[],
  now: number,
  maxCalls = MAX_DELIVERIES_PER_ROUND,
): RoundPlan {
  const heads = new Map<string, PendingDelivery>();
  for (const delivery of pending) {
    const head = heads.get(delivery.wait_key);
    if (head === undefined || isOlder(delivery, head)) {
      heads.set(delivery.wait_key, delivery);
    }
  }
  const due = [...heads.values()].filter((delivery) => delivery.due_at <= now).sort(byAge);
  const send = due.slice(0, maxCalls);
  if (due.length > send.length) {
    return { send, next: "now" };
  }
  const sent = new Set(send.map((delivery) => delivery.wait_key));
  let next: number | null = null;
  for (const head of heads.values()) {
    if (!sent.has(head.wait_key) && (next === null || head.due_at < next)) {
      next = head.due_at;
    }
  }
  // Sent ones come due again when their lease ends, should their answers be lost.
  if (send.length > 0) {
    next = Math.min(next ?? Infinity, now + DELIVERY_LEASE_MS);
  }
  return { send, next };
}

/** When a delivery that failed `attempts` times (1 or more) may be sent again. */
export function retryAt(attempts: number, now: number): number {
  const delay = DELIVERY_RETRY_BASE_MS * 2 ** Math.max(0, attempts - 1);
  return now + Math.min(delay, DELIVERY_RETRY_MAX_MS);
}

function isOlder(a: PendingDelivery, b: PendingDelivery): boolean {
  return byAge(a, b) < 0;
}

/** Oldest event first; one event's deliveries in wait order (the plan is the same whatever order rows came in). */
function byAge(a: PendingDelivery, b: PendingDelivery): number {
  return a.seq - b.seq || compareText(a.wait_key, b.wait_key);
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
