import type { AcquireAnswer } from "../schemas/limits.ts";
import type { Draft, RunState } from "./draft.ts";
import { QUEUE_RETRY_MS, runHolderId } from "./run-limits.ts";
import type { OpenWait, WaitKindRow } from "./wait-kinds.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";

/**
 * Limits: a step whose action or model names a limit with no room for its key
 * (docs/definitions.md, "Limits"). The executor tried the limit object first
 * and found no room; the step suspends and holds nothing. A wake queues the
 * step's holder at the limit object, which tells the run when it serves it
 * (`limitGranted`); the step then runs again from its start, and the holder
 * it acquires is the one already served (an agent step goes on with the loop
 * its wait kept). A queue request that got no answer
 * is sent again (queueing is idempotent per holder).
 */

export const limitWaits: WaitKindRow<"limit"> = {
  open(draft, { nodeId, invocation, stepRef, key }, wire) {
    draft.journal("limit.waiting", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: stepRef,
      key,
      limit: { id: wire.limit.id, version: wire.limit.version },
      limit_key: wire.key,
    });
    return {
      kind: "limit",
      place: key,
      limit: wire.limit,
      key: wire.key,
      holder_id: wire.holder_id,
      started_at: draft.now,
      requested_at: null,
      queued: false,
      ...(wire.agent === undefined ? {} : { agent: wire.agent }),
    };
  },
  expiresAt: () => null,
  expire: () => {},
  unsent: (wait) => wait.requested_at === null,
  inFlight: (wait) => wait.requested_at !== null && !wait.queued,
  send(draft, at, _live, budget) {
    const { wait } = at;
    const resend = wait.requested_at !== null && !wait.queued && draft.now - wait.requested_at >= QUEUE_RETRY_MS;
    if (budget < 1 || (wait.requested_at !== null && !resend)) {
      return 0;
    }
    draft.commands.push({
      kind: "queue_for_limit",
      limit: wait.limit,
      key: wait.key,
      holder: { id: wait.holder_id, run_id: draft.record.run_id, priority: draft.priority },
      lease: "step",
    });
    draft.setInvocation(at.nodeId, at.invocation.index, {
      suspension: { ...at.suspension, waiting_for: { ...wait, requested_at: draft.now } },
    });
    return 1;
  },
  close(draft, at, reason) {
    draft.journal("limit.withdrawn", { ...placeOf(draft, at), reason });
    if (at.wait.requested_at !== null) {
      // Best effort: a grant that still comes is answered "not wanted", and the object serves the next.
      draft.commands.push({
        kind: "withdraw_from_limit",
        limit: at.wait.limit.id,
        key: at.wait.key,
        holder_ids: [at.wait.holder_id],
      });
    }
  },
  view: (wait) => ({
    kind: "limit",
    limit: wait.limit.id,
    key: wait.key,
    since: new Date(wait.started_at).toISOString(),
  }),
};

function placeOf(draft: Draft, { nodeId, invocation, suspension, wait }: OpenWait<"limit">) {
  return {
    node: nodeId,
    item: draft.itemOf(nodeId, invocation),
    step: suspension.step_ref,
    key: wait.place,
    limit: { id: wait.limit.id, version: wait.limit.version },
    limit_key: wait.key,
  };
}

/** The open limit wait of this holder, if one still waits. */
export function limitWait(draft: Draft, holderId: string): OpenWait<"limit"> | undefined {
  const found = findWaiter(draft, (waiting) => waiting.kind === "limit" && waiting.holder_id === holderId);
  const wait = found?.suspension.waiting_for;
  return found && wait?.kind === "limit" ? { ...found, wait } : undefined;
}

/**
 * Whether the run waits for a grant to this holder (what `limitGranted`
 * answers): its own (queued for its workflow's limits, a request out) or a
 * step's (suspended on a limit wait of that holder).
 */
export function wantsLimitGrant({ record, nodes }: RunState, holderId: string): boolean {
  if (holderId === runHolderId(record.run_id)) {
    const waiting = record.limits?.find((limit) => limit.status === "waiting");
    return record.status === "queued" && waiting !== undefined && waiting.requested_at !== null;
  }
  return Object.values(nodes).some((node) =>
    node.invocations.some(({ status, suspension }) => {
      const wait = suspension?.waiting_for;
      return status === "suspended" && wait?.kind === "limit" && wait.holder_id === holderId;
    }),
  );
}

/** The limit object answered a queue request: granted at once, or queued (its grant comes later). */
export function limitQueued(draft: Draft, holderId: string, answer: AcquireAnswer): void {
  const at = limitWait(draft, holderId);
  if (at === undefined) {
    return;
  }
  if (answer.granted) {
    limitGranted(draft, holderId);
    return;
  }
  draft.setInvocation(at.nodeId, at.invocation.index, {
    suspension: { ...at.suspension, waiting_for: { ...at.wait, queued: true } },
  });
}

/** The limit object served the holder: the step runs again from its start, holding the slot. */
export function limitGranted(draft: Draft, holderId: string): boolean {
  const at = limitWait(draft, holderId);
  if (at === undefined) {
    return false;
  }
  draft.journal("limit.granted", { ...placeOf(draft, at), waited_ms: Math.max(0, draft.now - at.wait.started_at) });
  const agent = at.wait.agent === undefined ? {} : { agent: at.wait.agent };
  resumeInvocation(draft, at.nodeId, at.invocation, { mode: "granted", holder_id: holderId, ...agent });
  return true;
}
