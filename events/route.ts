import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { offloadForRun } from "../blobs/offload.ts";
import type { z } from "zod";
import type { ErrorDetail } from "../lib/errors.ts";
import { unwrap, type Result } from "../lib/result.ts";
import { issuesToDetails, joinPath, summarize } from "../lib/validation.ts";
import {
  EventBatchBody,
  type AcceptOptions,
  EventInput,
  type AcceptedEvent,
  EventName,
  type HubEventInput,
  type EventRecord,
  type EventTriggers,
  type RegisterAnswer,
  type SendEventsResponse,
  type WaitRegistration,
} from "../schemas/events.ts";
import { newEventId } from "../lib/ids.ts";
import type { By } from "../schemas/auth.ts";
import { MAX_LOOKBACK_CHARS } from "./hub.ts";

/**
 * Which event hub holds what (docs/architecture.md, "Event routing"): each
 * event name has `EVENT_HUB_SHARDS` hubs (default 1). A wait lives at one of
 * them, chosen by its run id; an event is accepted by all of them, so each
 * keeps every event of the name for lookback. Nothing every event passes
 * through: a name's hubs see only that name.
 */

/** The most hubs one name may be split over. */
export const MAX_EVENT_HUB_SHARDS = 16;
/**
 * The most hubs one `POST /v1/events` calls (distinct names × shards): each is
 * a call of the API's own invocation, which the platform caps at 32.
 */
export const MAX_HUBS_PER_REQUEST = 24;

/** The hub methods callers use (the stub's generated RPC types are too deep for tsc over JSON). */
export interface EventHubApi {
  accept(events: HubEventInput[], options?: AcceptOptions): Promise<Result<AcceptedEvent[]>>;
  register(wait: WaitRegistration): Promise<Result<RegisterAnswer>>;
  unregister(waitKey: string): Promise<Result<null>>;
  triggersOf(name: string, eventId: string): Promise<Result<EventTriggers>>;
}

/** How many hubs each name has: `EVENT_HUB_SHARDS`, 1 to {@link MAX_EVENT_HUB_SHARDS}, default 1. */
export function hubShards(env: Pick<Env, "EVENT_HUB_SHARDS">): number {
  const configured = env.EVENT_HUB_SHARDS;
  if (configured === undefined || configured.trim() === "") {
    return 1;
  }
  const shards = Number(configured);
  if (!Number.isInteger(shards) || shards < 1 || shards > MAX_EVENT_HUB_SHARDS) {
    throw new EngineError(
      "events.misconfigured",
      `EVENT_HUB_SHARDS must be an integer from 1 to ${MAX_EVENT_HUB_SHARDS}, not "${configured}"`,
    );
  }
  return shards;
}

/**
 * The Durable Object name of a name's hub: the event name itself for shard 0
 * (so raising the shard count keeps the waits already there reachable: every
 * shard below the count gets every event), `<name>#<shard>` for the others.
 * Two names that meet here (`a#1`) share a hub's storage, never its rows.
 */
export function hubName(name: string, shard: number): string {
  return shard === 0 ? name : `${name}#${shard}`;
}

/** The shard of a run's waits: FNV-1a of the run id, modulo the count. */
export function shardOf(runId: string, shards: number): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < runId.length; i += 1) {
    hash = Math.imul(hash ^ runId.charCodeAt(i), 0x01000193) >>> 0;
  }
  return hash % shards;
}

/** The hub where a run registers (and unregisters) its wait for `name`. */
export function waitHub(env: Env, name: string, runId: string): EventHubApi {
  return hubStub(env, hubName(name, shardOf(runId, hubShards(env))));
}

/**
 * Registers a wait at the hub of each of its names (one call per name, all at
 * once) and answers the events they hold for it: the first
 * `MAX_LOOKBACK_EVENTS` of each, merged oldest first (by `received_at`, then
 * by name and id). A run that consumes one of them unregisters the wait.
 */
export async function registerWait(env: Env, wait: WaitRegistration): Promise<EventRecord[]> {
  const names = [...new Set(wait.names)];
  const answers = await Promise.all(
    names.map(async (name) => unwrap(await waitHub(env, name, wait.run_id).register(wait)).events),
  );
  // Two names may share a hub (`a#1` is also shard 1 of `a`): the same event is then answered twice.
  const unique = new Map(answers.flat().map((event) => [JSON.stringify([event.name, event.event_id]), event]));
  const sorted = [...unique.values()].sort(
    (a, b) => a.received_at - b.received_at || compareText(a.name, b.name) || compareText(a.event_id, b.event_id),
  );
  // The run takes the first its match takes: what passes the data cap (over all names) is left out.
  let chars = 0;
  return sorted.filter((event, index) => {
    const within = index === 0 || chars < MAX_LOOKBACK_CHARS;
    chars += JSON.stringify(event.data).length;
    return within;
  });
}

/** Forgets a wait at the hub of each of its names (it consumed an event, timed out, or its run ended). */
export async function unregisterWait(
  env: Env,
  wait: Pick<WaitRegistration, "wait_key" | "run_id" | "names">,
): Promise<void> {
  await Promise.all(
    [...new Set(wait.names)].map(async (name) =>
      unwrap(await waitHub(env, name, wait.run_id).unregister(wait.wait_key)),
    ),
  );
}

function compareText(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

function hubStub(env: Env, name: string): EventHubApi {
  return env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name)) as unknown as EventHubApi;
}

/** A `POST /v1/events` body as its list of events: `{ events: [...] }`, or one event. */
export function toEventList(body: unknown): EventInput[] {
  if (typeof body === "object" && body !== null && !Array.isArray(body) && "events" in body) {
    return parseBody(EventBatchBody, body, "the events").events;
  }
  return [parseBody(EventInput, body, "the event")];
}

/**
 * Parses a body or throws `events.invalid_request` with each problem's path;
 * an unknown field is named by its own path (`events.2.nmae`), not its object's.
 */
function parseBody<T extends z.ZodType>(schema: T, body: unknown, what: string): z.infer<T> {
  const parsed = schema.safeParse(body);
  if (parsed.success) {
    return parsed.data;
  }
  const details: ErrorDetail[] = parsed.error.issues.flatMap((issue) =>
    issue.code === "unrecognized_keys"
      ? issue.keys.map((key) => ({
          path: joinPath("", [...issue.path, key]),
          message: `unknown field "${key}" (an event has name, data and id; a batch has events)`,
          code: "schema.unrecognized_keys",
        }))
      : issuesToDetails([issue]),
  );
  throw EngineError.terminal("events.invalid_request", `${what} is invalid: ${summarize(details)}`, details);
}

/**
 * `POST /v1/events`: the body's events, accepted as {@link acceptEvents} does,
 * each with the API as its source and `by`, who sent it (the events queue
 * sends none: its events have no source).
 *
 * @throws EngineError `events.invalid_request`, `events.too_many_names` (400),
 *   `events.unavailable` (503, retryable: resend with the same ids).
 */
export async function sendEvents(env: Env, body: unknown, by?: By): Promise<SendEventsResponse> {
  const events = toEventList(body);
  return acceptEvents(
    env,
    by === undefined ? events : events.map((event) => ({ ...event, source: { kind: "api", by } })),
  );
}

/**
 * Hands each event to every hub of its name, one `accept` per hub with that
 * name's events in order, all hubs at once. Events without an id get one
 * here, so all shards of a name store it under the same id. An event is a
 * duplicate when every hub of its name already had it. Shard 0 also starts the
 * runs of the workflows with a trigger on the name. `POST /v1/events`, the
 * events queue and verified webhook deliveries (which give their `source`)
 * all come here.
 *
 * @throws EngineError `events.too_many_names` (400), `events.unavailable` (503, retryable).
 */
export async function acceptEvents(env: Env, sent: readonly HubEventInput[]): Promise<SendEventsResponse> {
  const events = await Promise.all(
    sent.map((event) => withLargeDataAsBlobs(env, { ...event, id: event.id ?? newEventId() })),
  );
  const byName = new Map<string, { indexes: number[]; events: HubEventInput[] }>();
  events.forEach((event, index) => {
    const group = byName.get(event.name) ?? { indexes: [], events: [] };
    group.indexes.push(index);
    group.events.push(event);
    byName.set(event.name, group);
  });
  const shards = hubShards(env);
  if (byName.size * shards > MAX_HUBS_PER_REQUEST) {
    const most = Math.floor(MAX_HUBS_PER_REQUEST / shards);
    throw EngineError.terminal(
      "events.too_many_names",
      `one request may send events of at most ${most} distinct names, got ${byName.size}: send them in several requests`,
      [{ path: "events", message: `${byName.size} distinct names (at most ${most})`, code: "events.too_many_names" }],
    );
  }
  const duplicate = events.map(() => true);
  await Promise.all(
    [...byName].flatMap(([name, group]) =>
      Array.from({ length: shards }, async (_, shard) => {
        // Shard 0 of a name starts its triggered runs: one hub per name, so one start per event and workflow.
        const answers = await acceptAt(hubStub(env, hubName(name, shard)), group.events, { triggers: shard === 0 });
        answers.forEach((answer, i) => {
          const index = group.indexes[i];
          if (index !== undefined && !answer.duplicate) {
            duplicate[index] = false;
          }
        });
      }),
    ),
  );
  return { events: events.map((event, index) => ({ event_id: event.id, duplicate: duplicate[index] ?? false })) };
}

/**
 * An event whose `data` is over the blob threshold keeps its large parts as blobs
 * (docs/architecture.md, "Blobs"), held by the event (`event:<id>`) until a run that
 * takes it holds them too: the hubs keep the references, never the bytes.
 */
async function withLargeDataAsBlobs<E extends HubEventInput & { id: string }>(env: Env, event: E): Promise<E> {
  if (event.data === undefined) {
    return event;
  }
  return { ...event, data: await offloadForRun(env, event.data, { runId: `event:${event.id}`, workflowId: "" }) };
}

/**
 * `GET /v1/events/{event_id}/triggers?name=`: what the event's triggers
 * started, from the hub that starts them (the name's shard 0).
 *
 * @throws EngineError `events.invalid_request` (no name), `event.not_found` (not retained, or never accepted).
 */
export async function eventTriggers(env: Env, name: unknown, eventId: string): Promise<EventTriggers> {
  const parsed = parseBody(EventName, name, "the query's name");
  return unwrap(await hubStub(env, hubName(parsed, 0)).triggersOf(parsed, eventId));
}

async function acceptAt(hub: EventHubApi, events: HubEventInput[], options: AcceptOptions): Promise<AcceptedEvent[]> {
  try {
    return unwrap(await hub.accept(events, options));
  } catch (thrown) {
    throw EngineError.retryable(
      "events.unavailable",
      `an event hub could not accept the events: ${ensureEngineError(thrown).message}; send them again with the same ids`,
    );
  }
}
