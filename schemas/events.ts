import { z } from "zod";
import { By } from "./auth.ts";
import { JsonValue } from "./common.ts";

/**
 * External events (docs/api.md, "POST /v1/events"; docs/architecture.md,
 * "Event routing"): what a client sends, what the event hubs keep, and what a
 * hub delivers to a waiting run.
 */

/** The longest event name, in characters. */
export const MAX_EVENT_NAME_CHARS = 256;
/** The longest event id a client may give, in characters. */
export const MAX_EVENT_ID_CHARS = 256;
/** The most events one `POST /v1/events` (or one hub `accept`) carries. */
export const MAX_EVENTS_PER_REQUEST = 100;
/** The most names one wait may list (any of them resumes it). */
export const MAX_WAIT_NAMES = 20;
/** The longest wait key, in characters. */
export const MAX_WAIT_KEY_CHARS = 512;
/** The longest `match` expression a wait may register, in characters. */
export const MAX_MATCH_CHARS = 4_096;

export const EventName = z
  .string()
  .min(1, "must not be empty")
  .max(MAX_EVENT_NAME_CHARS, `must be at most ${MAX_EVENT_NAME_CHARS} characters`);
export type EventName = z.infer<typeof EventName>;

/** One event as a client sends it. `id` makes a retry safe: the same id of the same name is accepted once in 24 h. */
export const EventInput = z.strictObject({
  name: EventName,
  data: JsonValue.optional(),
  id: z
    .string()
    .min(1, "must not be empty")
    .max(MAX_EVENT_ID_CHARS, `must be at most ${MAX_EVENT_ID_CHARS} characters`)
    .optional(),
});
export type EventInput = z.infer<typeof EventInput>;

/** Several events in one request, in order. */
export const EventBatchBody = z.strictObject({
  events: z
    .array(EventInput)
    .min(1, "must hold at least one event")
    .max(MAX_EVENTS_PER_REQUEST, `must hold at most ${MAX_EVENTS_PER_REQUEST} events`),
});
export type EventBatchBody = z.infer<typeof EventBatchBody>;

/** `POST /v1/events` body: one event, or `{ events: [...] }`. */
export const SendEventsBody = z.union([EventInput, EventBatchBody]);
export type SendEventsBody = z.infer<typeof SendEventsBody>;

/** What became of one sent event: its id (the client's, or a generated `evt_…`), and whether it was already accepted. */
export const AcceptedEvent = z.strictObject({
  event_id: z.string(),
  duplicate: z.boolean(),
});
export type AcceptedEvent = z.infer<typeof AcceptedEvent>;

/** `POST /v1/events` → 202: one answer per event, in the order sent. */
export const SendEventsResponse = z.strictObject({ events: z.array(AcceptedEvent) });
export type SendEventsResponse = z.infer<typeof SendEventsResponse>;

/** How the API hands a hub its events: `triggers` on the hub that starts the name's triggered runs (shard 0). */
export const AcceptOptions = z.strictObject({ triggers: z.boolean().optional() });
export type AcceptOptions = z.infer<typeof AcceptOptions>;

/** An event as a hub keeps it and delivers it; `received_at` is when the hub accepted it (ms since the epoch). */
/**
 * Where an event came from, when not from `POST /v1/events` (absent there):
 * `webhook`, a verified delivery to `POST /v1/hooks/{webhook}`.
 */
export const EventSource = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("webhook"), webhook: z.string().min(1).max(64) }),
  /** Sent to the API (`POST /v1/events`, a signal) by `by` (schemas/auth.ts). */
  z.strictObject({ kind: z.literal("api"), by: By }),
]);
export type EventSource = z.infer<typeof EventSource>;

/** An event as a hub accepts it: as sent, with the source the engine gives it (a client cannot give one). */
export const HubEventInput = EventInput.extend({ source: EventSource.optional() });
export type HubEventInput = z.infer<typeof HubEventInput>;

/**
 * An event as a hub keeps it and delivers it; `received_at` is when the hub
 * accepted it (ms since the epoch); `source` where it came from: a webhook,
 * or the API with who sent it; absent for the events queue (and for events
 * kept from before the API recorded its sender).
 */
export const EventRecord = z.strictObject({
  event_id: z.string(),
  name: EventName,
  data: JsonValue,
  received_at: z.number().int(),
  source: EventSource.optional(),
});
export type EventRecord = z.infer<typeof EventRecord>;

/**
 * A run's wait, registered at the hub of each of its names. `since`: the
 * oldest `received_at` it takes (the wait's start less its lookback);
 * `expires_at`: when it times out (null: never), after which the hub forgets
 * it. `match` (CEL over `event` and `input`) is a pre-filter: the run checks it
 * again. Registering the same `wait_key` again changes nothing stored.
 */
export const WaitRegistration = z.strictObject({
  wait_key: z.string().min(1).max(MAX_WAIT_KEY_CHARS),
  run_id: z.string().min(1).max(256),
  names: z.array(EventName).min(1).max(MAX_WAIT_NAMES),
  since: z.number().int().min(0),
  expires_at: z.number().int().min(0).nullable(),
  match: z.string().min(1).max(MAX_MATCH_CHARS).optional(),
  input: JsonValue.optional(),
});
export type WaitRegistration = z.infer<typeof WaitRegistration>;

/** `register`'s answer: the retained events the wait takes (lookback), oldest first. */
export const RegisterAnswer = z.strictObject({ events: z.array(EventRecord) });
export type RegisterAnswer = z.infer<typeof RegisterAnswer>;

/** What a hub sends the run's coordinator (`deliverEvent`): one event for one wait. */
export const EventDelivery = z.strictObject({
  wait_key: z.string(),
  event: EventRecord,
});
export type EventDelivery = z.infer<typeof EventDelivery>;

/**
 * The coordinator's answer to a delivery: `consumed` (the wait took it) and
 * `not_waiting` (no such wait is open) make the hub forget the wait;
 * `declined` (the run's own match said no) drops only this delivery.
 */
export const DeliveryAnswer = z.strictObject({
  outcome: z.enum(["consumed", "not_waiting", "declined"]),
});
export type DeliveryAnswer = z.infer<typeof DeliveryAnswer>;

/**
 * One run an event's triggers start (docs/api.md, "What an event starts"):
 * `pending` until made (a transient failure is retried, `attempts` counting
 * them), then `started` with its run, or `failed` with the reason (the input
 * did not match the workflow's input_schema, the trigger's `if` or `input`
 * failed on this event, or transient failures passed the bound).
 */
export const TriggerStartRecord = z.strictObject({
  workflow: z.string(),
  version: z.number().int().min(1),
  status: z.enum(["pending", "started", "failed"]),
  attempts: z.number().int().min(0),
  run_id: z.string().optional(),
  error: z.string().optional(),
});
export type TriggerStartRecord = z.infer<typeof TriggerStartRecord>;

/** What an event's triggers did: whether the event is matched against them yet, and the runs it starts. */
export const EventTriggers = z.strictObject({
  matched: z.boolean(),
  starts: z.array(TriggerStartRecord),
});
export type EventTriggers = z.infer<typeof EventTriggers>;

/**
 * What the queue consumer sends to the dead-letter queue for a message that is
 * not an event (docs/api.md, "Events from a queue"): why, and the message's
 * body as it came (text when it was not JSON-clonable data).
 */
export const DeadLetter = z.strictObject({
  reason: z.strictObject({ code: z.string(), message: z.string() }),
  body: JsonValue,
  message_id: z.string(),
});
export type DeadLetter = z.infer<typeof DeadLetter>;
