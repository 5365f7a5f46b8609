import { evalCelBool } from "../lib/expr/cel.ts";
import type { EventRecord, WaitRegistration } from "../schemas/events.ts";
import type { Draft } from "./draft.ts";
import type { OpenWait, WaitKindRow } from "./wait-kinds.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";

/**
 * Events: an `event` step waits for an event from outside (`POST /v1/events`,
 * routed by name through the event hubs, events/) or a signal to its own run
 * (`POST /v1/runs/{id}/signals`, kept in the run's inbox). A wake first looks
 * in the inbox, then registers the wait at the hub of each of its names,
 * which answers the events it kept that the wait takes (its lookback) and
 * later delivers new ones. The run's own match decides, and is journaled.
 */

/** A registration sent and not answered is sent again after this long (registering is idempotent). */
export const REGISTER_RETRY_MS = 5_000;
/** Signals a run keeps for waits that have not started yet, at most. */
export const MAX_KEPT_SIGNALS = 100;
/**
 * The data of the signals a run keeps, at most, in characters of JSON: they live in the
 * run record, a row of at most 2 MB that every event rewrites.
 */
export const MAX_KEPT_SIGNAL_CHARS = 262_144;
/** Signal ids a run remembers for deduplication, at most (the latest). */
export const MAX_SIGNAL_IDS = 1_000;

/** An event as it reaches a run, with the digest of its data (computed by the Durable Object, signed in the journal). */
export interface ReceivedEvent {
  event: EventRecord;
  data_sha256: string;
}

export const eventWaits: WaitKindRow<"event"> = {
  open(draft, { nodeId, invocation, stepRef, key }, wire) {
    const expiresAt = wire.timeout_ms === undefined ? null : draft.now + wire.timeout_ms;
    const lookbackMs = wire.lookback_ms ?? 0;
    draft.journal("event.waiting", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: stepRef,
      key,
      names: wire.names,
      ...(wire.match === undefined ? {} : { match: wire.match }),
      expires_at: expiresAt === null ? null : new Date(expiresAt).toISOString(),
      lookback_ms: lookbackMs,
    });
    return {
      kind: "event",
      key,
      started_at: draft.now,
      names: wire.names,
      ...(wire.match === undefined ? {} : { match: wire.match }),
      input: wire.input,
      expires_at: expiresAt,
      lookback_ms: lookbackMs,
      on_timeout: wire.on_timeout ?? "fail",
      requested_at: null,
      registered: false,
    };
  },
  expiresAt: (_draft, wait) => wait.expires_at,
  expire(draft, at) {
    const { wait } = at;
    const onTimeout = wait.on_timeout === "fail" ? "fail" : "default";
    draft.journal("event.timeout", { ...placeOf(draft, at), on_timeout: onTimeout });
    forget(draft, at);
    if (wait.on_timeout === "fail") {
      const message = `no event named ${wait.names.join(" or ")} matched within its timeout_ms`;
      const error = { code: "event.timeout", message };
      resumeInvocation(draft, at.nodeId, at.invocation, { mode: "after", outcome: { ok: false, error } });
      return;
    }
    const output = { event_id: null, name: null, data: wait.on_timeout.default, received_at: null, timed_out: true };
    resumeInvocation(draft, at.nodeId, at.invocation, { mode: "after", outcome: { ok: true, output } });
  },
  unsent: (wait) => wait.requested_at === null,
  inFlight: (wait) => wait.requested_at !== null && !wait.registered,
  send(draft, at, _live, budget) {
    const { wait } = at;
    // A signal sent to the run before the wait began is taken first, with no call at all.
    if (wait.requested_at === null && takeKeptSignal(draft, at)) {
      return 0;
    }
    const resend = wait.requested_at !== null && !wait.registered && draft.now - wait.requested_at >= REGISTER_RETRY_MS;
    if (budget < 1 || (wait.requested_at !== null && !resend)) {
      return 0;
    }
    draft.commands.push({ kind: "register_event_wait", key: wait.key, registration: registrationOf(draft, wait) });
    const suspension = { ...at.suspension, waiting_for: { ...wait, requested_at: draft.now } };
    draft.setInvocation(at.nodeId, at.invocation.index, { suspension });
    return 1;
  },
  close(draft, at, reason) {
    draft.journal("event.cancelled", { ...placeOf(draft, at), reason });
    forget(draft, at);
  },
  view: (wait) => ({
    kind: "event",
    names: wait.names,
    ...(wait.match === undefined ? {} : { match: wait.match }),
    expires_at: wait.expires_at === null ? null : new Date(wait.expires_at).toISOString(),
  }),
};

function placeOf(draft: Draft, { nodeId, invocation, suspension, wait }: OpenWait<"event">) {
  return { node: nodeId, item: draft.itemOf(nodeId, invocation), step: suspension.step_ref, key: wait.key };
}

/** What the hubs keep of a wait: `since` reaches back `lookback_ms` before it began. */
function registrationOf(draft: Draft, wait: OpenWait<"event">["wait"]): WaitRegistration {
  return {
    wait_key: wait.key,
    run_id: draft.record.run_id,
    names: wait.names,
    since: Math.max(0, wait.started_at - wait.lookback_ms),
    expires_at: wait.expires_at,
    ...(wait.match === undefined ? {} : { match: wait.match }),
    input: wait.input,
  };
}

/** The wait ends: the hubs it registered at may forget it (best effort: a late delivery is answered `not_waiting`). */
function forget(draft: Draft, { wait }: OpenWait<"event">): void {
  if (wait.requested_at !== null) {
    draft.commands.push({ kind: "unregister_event_wait", key: wait.key, names: wait.names });
  }
}

/** Whether `event` is one the wait takes: one of its names, and its match holds (an error is a no). */
function takes(wait: OpenWait<"event">["wait"], event: EventRecord): boolean {
  if (!wait.names.includes(event.name)) {
    return false;
  }
  if (wait.match === undefined) {
    return true;
  }
  const variable = { id: event.event_id, name: event.name, data: event.data, received_at: event.received_at };
  try {
    return evalCelBool(wait.match, { event: variable, input: wait.input });
  } catch {
    return false;
  }
}

/** The wait takes the event if it can: journaled with the event's id and data digest, and the step goes on with it. */
export function consume(
  draft: Draft,
  at: OpenWait<"event">,
  received: ReceivedEvent,
  source: "event" | "signal",
): boolean {
  const { event } = received;
  if (!takes(at.wait, event)) {
    return false;
  }
  const receivedAt = new Date(event.received_at).toISOString();
  draft.journal("event.matched", {
    ...placeOf(draft, at),
    event_id: event.event_id,
    name: event.name,
    received_at: receivedAt,
    source,
    data_sha256: received.data_sha256,
    ...(event.source?.kind === "api" ? { by: event.source.by } : {}),
  });
  forget(draft, at);
  const output = {
    event_id: event.event_id,
    name: event.name,
    data: event.data,
    received_at: receivedAt,
    timed_out: false,
  };
  resumeInvocation(draft, at.nodeId, at.invocation, { mode: "after", outcome: { ok: true, output } });
  return true;
}

/** The open event wait with this key, if there is one. */
export function eventWait(draft: Draft, key: string): OpenWait<"event"> | undefined {
  const found = findWaiter(draft, (waiting) => waiting.kind === "event" && waiting.key === key);
  const wait = found?.suspension.waiting_for;
  return found && wait?.kind === "event" ? { ...found, wait } : undefined;
}

/** A signal the run kept that this new wait takes: the oldest, which leaves the inbox. */
function takeKeptSignal(draft: Draft, at: OpenWait<"event">): boolean {
  const kept = draft.record.signals ?? [];
  const index = kept.findIndex((signal) => takes(at.wait, signal.event));
  const signal = kept[index];
  if (signal === undefined || !consume(draft, at, signal, "signal")) {
    return false;
  }
  const left = kept.filter((_, position) => position !== index);
  if (left.length > 0) {
    draft.record.signals = left;
  } else {
    delete draft.record.signals;
  }
  return true;
}
