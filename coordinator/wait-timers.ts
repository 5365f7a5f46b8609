import type { WaitKindRow } from "./wait-kinds.ts";
import { resumeInvocation } from "./waits.ts";

/**
 * Timers: a `sleep` step. A timer is the run's alarm and nothing else: no
 * invocation, no call is held while it runs, and it is checked on every wake,
 * a restart's first one included. It is keyed by where it is (the wait key),
 * never by its duration, and its end is computed once, by the coordinator's
 * clock, when it starts.
 */
export const timerWaits: WaitKindRow<"timer"> = {
  open(draft, { nodeId, invocation, stepRef, key }, wire) {
    const until = wire.until ?? draft.now + (wire.duration_ms ?? 0);
    draft.journal("timer.started", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: stepRef,
      key,
      until: new Date(until).toISOString(),
    });
    return { kind: "timer", key, started_at: draft.now, until };
  },
  expiresAt: (_draft, wait) => wait.until,
  expire(draft, { nodeId, invocation, suspension, wait }) {
    const sleptMs = Math.max(0, draft.now - wait.started_at);
    draft.journal("timer.fired", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: suspension.step_ref,
      key: wait.key,
      slept_ms: sleptMs,
    });
    const output = { slept_ms: sleptMs, woke_at: new Date(draft.now).toISOString() };
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: true, output } });
  },
  unsent: () => false,
  inFlight: () => false,
  send: () => 0,
  close(draft, { nodeId, invocation, suspension, wait }, reason) {
    draft.journal("timer.cancelled", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: suspension.step_ref,
      key: wait.key,
      reason,
    });
  },
  view: (wait) => ({ kind: "timer", until: new Date(wait.until).toISOString() }),
};
