import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { evalCelBool } from "../lib/expr/cel.ts";
import { buildEventInput } from "../lib/expr/mapping.ts";
import type { Json } from "../schemas/common.ts";
import type { IndexedTrigger } from "../schemas/definitions.ts";
import type { EventRecord } from "../schemas/events.ts";
import type { TriggeredStart } from "../src/start.ts";
import type { EventVariable } from "./match.ts";

/**
 * Event triggers at the hub (docs/architecture.md, "Event triggers"), as
 * plain functions: which workflows an event starts and with what input, and
 * what a failed start means. The hub (events/hub.ts) keeps the outbox.
 */

/** The most accepted events one trigger round matches against the catalog's triggers. */
export const MAX_TRIGGER_EVENTS_PER_ROUND = 25;
/** The most names among them: one catalog call per name (a hub nearly always holds one). */
export const MAX_TRIGGER_NAMES_PER_ROUND = 4;
/**
 * The most run starts one trigger round makes. Each is at most two calls
 * (the catalog, unless the snapshot is cached, and the run's coordinator);
 * with the catalog calls above, a round stays under the platform's 32.
 */
export const MAX_TRIGGER_STARTS_PER_ROUND = 12;
/** A leased event or start is due again this long after it was taken, should the round never settle it. */
export const TRIGGER_LEASE_MS = 30_000;
/** A start that failed transiently this many times is recorded as failed, with its last error. */
export const MAX_TRIGGER_START_ATTEMPTS = 10;

/** One run an event is to start (or the reason it cannot): the first trigger of a workflow whose `if` holds. */
export type PlannedStart =
  | { workflow: string; version: number; input: Json; error?: undefined }
  | { workflow: string; version: number; error: string };

/** The `event` of a trigger's `if` and `input`, the same as a wait's match sees. */
export function toEventVariable(event: EventRecord): EventVariable {
  return { id: event.event_id, name: event.name, data: event.data, received_at: event.received_at };
}

/**
 * The starts an event makes: per workflow, its first trigger on the event's
 * name whose `if` holds, with the input its mapping builds (the event's
 * `data` when it has none). A trigger whose `if` or mapping fails on this
 * event is a start that failed for good, with the reason; the workflow's
 * later triggers are not tried.
 */
export function planStarts(event: EventRecord, triggers: readonly IndexedTrigger[]): PlannedStart[] {
  const variable = toEventVariable(event);
  const planned = new Map<string, PlannedStart>();
  for (const trigger of triggers) {
    if (trigger.event !== event.name || planned.has(trigger.workflow)) {
      continue;
    }
    const { workflow, version } = trigger;
    try {
      if (trigger.if !== undefined && !evalCelBool(trigger.if, { event: variable })) {
        continue;
      }
      const input = trigger.input === undefined ? event.data : buildEventInput(trigger.input, variable);
      planned.set(workflow, { workflow, version, input });
    } catch (thrown) {
      const error = ensureEngineError(thrown);
      planned.set(workflow, { workflow, version, error: `${error.code}: ${error.message}` });
    }
  }
  return [...planned.values()];
}

/** The run's `trigger`: the event that started it, or the webhook whose verified delivery the event is. */
export function triggerOf(event: EventRecord): TriggeredStart["trigger"] {
  const { event_id, name, source } = event;
  return source?.kind === "webhook"
    ? { kind: "webhook", webhook: source.webhook, event_id, name }
    : { kind: "event", event_id, name };
}

/** The start of one planned run: its identity is (event id, workflow), so a resent start finds the run it made. */
export function toTriggeredStart(
  event: EventRecord,
  start: { workflow: string; version: number; input: Json },
): TriggeredStart {
  return {
    workflow: `${start.workflow}@${start.version}`,
    input: start.input,
    trigger: triggerOf(event),
    key: `${event.event_id}\n${start.workflow}`,
    created_by: event.source?.kind === "webhook" ? `webhook:${event.source.webhook}` : `event:${event.name}`,
  };
}

/**
 * Whether a failed start is tried again: a terminal engine error (a bad
 * input, a workflow gone) fails the same way every time; anything else (a
 * platform error, an engine error marked retryable) may pass.
 */
export function isTransient(thrown: unknown): boolean {
  return !(thrown instanceof EngineError) || thrown.retryable;
}
