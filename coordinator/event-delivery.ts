import type { By } from "../schemas/auth.ts";
import { EngineError } from "../lib/errors.ts";
import { newEventId } from "../lib/ids.ts";
import type { AcceptedEvent, EventInput, EventRecord } from "../schemas/events.ts";
import type { NodeRecord, RunRecord } from "../schemas/run.ts";
import { dataDigest } from "./event-digest.ts";
import { isTerminal } from "./lifecycle.ts";
import type { Draft } from "./draft.ts";
import {
  consume,
  eventWait,
  MAX_KEPT_SIGNAL_CHARS,
  MAX_KEPT_SIGNALS,
  MAX_SIGNAL_IDS,
  type ReceivedEvent,
} from "./wait-events.ts";
import { openWaits, type OpenWait } from "./wait-kinds.ts";

// What reaches a run's event waits (coordinator/wait-events.ts): its own signals, the events
// its hubs kept for a wait that registered, and the events they deliver later.

/**
 * A signal to this run: journaled, then taken by the first open wait (in node
 * order) whose names and match take it, or kept until one does or the run
 * ends. The Durable Object checked first that the run has not ended, that
 * the id is new and that the inbox has room.
 */
export function receiveSignal(draft: Draft, received: ReceivedEvent): void {
  const { event } = received;
  draft.journal("signal.received", {
    event_id: event.event_id,
    name: event.name,
    data_sha256: received.data_sha256,
    ...(event.source?.kind === "api" ? { by: event.source.by } : {}),
  });
  draft.record.signal_ids = [...(draft.record.signal_ids ?? []), event.event_id].slice(-MAX_SIGNAL_IDS);
  for (const open of openWaits(draft)) {
    if (open.wait.kind === "event" && consume(draft, open as OpenWait<"event">, received, "signal")) {
      return;
    }
  }
  draft.record.signals = [...(draft.record.signals ?? []), received].slice(-MAX_KEPT_SIGNALS);
}

/** The hubs answered a wait's registration with the events they kept for it: the oldest it takes ends it. */
export function eventsRegistered(draft: Draft, key: string, events: readonly ReceivedEvent[]): void {
  const at = eventWait(draft, key);
  if (at === undefined) {
    return; // it ended meanwhile (and asked the hubs to forget it)
  }
  const registered = { ...at, wait: { ...at.wait, registered: true } };
  draft.setInvocation(at.nodeId, at.invocation.index, {
    suspension: { ...at.suspension, waiting_for: registered.wait },
  });
  const invocation = draft.invocation(at.nodeId, at.invocation.index) ?? at.invocation;
  for (const received of events) {
    if (offer(draft, { ...registered, invocation }, received)) {
      return;
    }
  }
}

/**
 * A hub delivers an event to one wait; delivered twice, the second finds the
 * wait gone and changes nothing. One the run's match does not take (the hub's
 * pre-filter let it through) is journaled as declined, and the wait goes on.
 */
export function deliverEvent(draft: Draft, key: string, received: ReceivedEvent): void {
  const at = eventWait(draft, key);
  if (at !== undefined) {
    offer(draft, at, received);
  }
}

/** An event from the hubs: the wait takes it, or it is journaled as declined. */
function offer(draft: Draft, at: OpenWait<"event">, received: ReceivedEvent): boolean {
  if (consume(draft, at, received, "event")) {
    return true;
  }
  draft.journal("event.declined", {
    node: at.nodeId,
    item: draft.itemOf(at.nodeId, at.invocation),
    step: at.suspension.step_ref,
    key: at.wait.key,
    event_id: received.event.event_id,
    name: received.event.name,
  });
  return false;
}

/**
 * Whether the run can keep these signals should no wait take them: at most
 * MAX_KEPT_SIGNALS of them and MAX_KEPT_SIGNAL_CHARS of their data's JSON,
 * with those it keeps already (409 `run.signals_full` otherwise).
 */
function assertRoom(record: RunRecord, added: readonly EventRecord[]): void {
  const kept = [...(record.signals ?? []).map((signal) => signal.event), ...added];
  const chars = kept.reduce((sum, event) => sum + JSON.stringify(event.data).length, 0);
  if (kept.length > MAX_KEPT_SIGNALS || chars > MAX_KEPT_SIGNAL_CHARS) {
    throw EngineError.terminal(
      "run.signals_full",
      `a run keeps at most ${MAX_KEPT_SIGNALS} signals and ${MAX_KEPT_SIGNAL_CHARS} characters of their data that no wait has taken; these would make ${kept.length} and ${chars}`,
    );
  }
}

/** Whether an event wait with this key is open (the Durable Object answers a delivery by it, before and after). */
export function hasEventWait(nodes: Readonly<Record<string, NodeRecord>>, key: string): boolean {
  return Object.values(nodes).some((node) =>
    node.invocations.some(({ status, suspension }) => {
      const wait = suspension?.waiting_for;
      return status === "suspended" && wait?.kind === "event" && wait.key === key;
    }),
  );
}

/**
 * Signals as the run's events, each with its answer: a new id becomes a
 * `signal` event, one this run accepted before (or earlier in the batch) only
 * an answer. Refused whole: a run that has ended (409 `run.terminal`), or one
 * whose kept signals would pass MAX_KEPT_SIGNALS (409 `run.signals_full`).
 */
export async function toSignals(
  record: RunRecord,
  inputs: readonly EventInput[],
  now: number,
  by?: By,
): Promise<
  ({ type: "signal"; received: ReceivedEvent; answer: AcceptedEvent } | { type: "duplicate"; answer: AcceptedEvent })[]
> {
  if (isTerminal(record.status)) {
    throw EngineError.terminal("run.terminal", `the run is ${record.status}: it takes no more signals`);
  }
  const seen = new Set(record.signal_ids);
  const signals = [];
  for (const input of inputs) {
    const eventId = input.id ?? newEventId();
    if (seen.has(eventId)) {
      signals.push({ type: "duplicate" as const, answer: { event_id: eventId, duplicate: true } });
      continue;
    }
    seen.add(eventId);
    const event = {
      event_id: eventId,
      name: input.name,
      data: input.data ?? null,
      received_at: now,
      ...(by === undefined ? {} : { source: { kind: "api" as const, by } }),
    };
    const received = { event, data_sha256: await dataDigest(event.data) };
    signals.push({ type: "signal" as const, received, answer: { event_id: eventId, duplicate: false } });
  }
  assertRoom(
    record,
    signals.flatMap((signal) => (signal.type === "signal" ? [signal.received.event] : [])),
  );
  return signals;
}
