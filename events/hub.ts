import { DurableObject } from "cloudflare:workers";
import { preloadBlobs } from "../blobs/preload.ts";
import { releaseRunBlobs } from "../blobs/store.ts";
import { z } from "zod";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { newEventId } from "../lib/ids.ts";
import { MAX_EVENT_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { toResult, unwrap, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { CreateRunOutcome } from "../coordinator/index.ts";
import { catalog } from "../src/service.ts";
import { startTriggeredRun, type TriggeredStart } from "../src/start.ts";
import {
  AcceptOptions,
  DeliveryAnswer,
  EventName,
  HubEventInput,
  MAX_EVENTS_PER_REQUEST,
  MAX_WAIT_KEY_CHARS,
  WaitRegistration,
  type AcceptedEvent,
  type EventDelivery,
  type EventRecord,
  type EventTriggers,
  type RegisterAnswer,
} from "../schemas/events.ts";
import { checkMatch, inputToStore, isCandidate } from "./match.ts";
import {
  DELIVERY_LEASE_MS,
  MAX_DELIVERIES_PER_ROUND,
  planRound,
  retryAt,
  type PendingDelivery,
  type RoundPlan,
} from "./rounds.ts";
import { EVENT_RETENTION_MS, HubStore, TriggerOutbox, type StoredWait } from "./store.ts";
import { runTriggerRound } from "./trigger-round.ts";

/** The most retained events `register` answers (its lookback), oldest first. */
export const MAX_LOOKBACK_EVENTS = 10;
/**
 * The data a lookback answer carries, at most, in characters of JSON (the
 * event that passes it is the last one; the first is always answered): the
 * registering run holds every answer of its names in memory at once.
 */
export const MAX_LOOKBACK_CHARS = 1_048_576;
/**
 * At most this many self-calls follow each other before an alarm continues
 * the delivery: each nests one subrequest deeper than the event that made it
 * (as the coordinator's self-wakes, coordinator/wakes.ts).
 */
const MAX_SELF_CALL_STREAK = 4;
/** Pruned events whose blobs one alarm releases at most (each is a few D1 and R2 calls); the rest follow. */
const BLOB_RELEASES_PER_ALARM = 20;
/** The first retry of a failed release of an event's blobs, doubled each time (up to a day). */
const BLOB_RELEASE_RETRY_MS = 60_000;

/** The alarm set behind a self-call, in case that call is lost. */
const SELF_CALL_BACKSTOP_MS = 2_000;

const EventBatch = z.array(HubEventInput).max(MAX_EVENTS_PER_REQUEST);
const WaitKey = z.string().min(1).max(MAX_WAIT_KEY_CHARS);

/** Where a hub sends a delivery: the run's coordinator (`deliverEvent`), answered as {@link DeliveryAnswer}. */
export interface DeliveryTarget {
  deliverEvent(delivery: EventDelivery): Promise<unknown>;
}

/**
 * One event hub per event name (per shard of a name; events/route.ts): the
 * one place where "an event arrives" and "a run starts waiting for it" are
 * serialized. It keeps the name's events for `EVENT_RETENTION_MS` (24 h, for
 * lookback and deduplication by id), the waits registered for the name, and
 * an outbox of deliveries, which it sends to the runs' coordinators in rounds
 * of at most {@link MAX_DELIVERIES_PER_ROUND} calls per Durable Object event
 * (docs/architecture.md, "Event routing"); and, at a name's shard 0, the
 * trigger outbox: the runs its events start (docs/architecture.md, "Event triggers").
 */
export class EventHub extends DurableObject<Env> {
  private readonly store: HubStore;
  private readonly outbox: TriggerOutbox;
  /** The hub's clock (ms since the epoch). Tests set it to move a hub through retention without waiting. */
  now: () => number = Date.now;
  /** The coordinator of a run, as deliveries reach it. */
  target: (runId: string) => DeliveryTarget;
  /** How a trigger starts its run (src/start.ts). Tests replace it to fail a start. */
  startRun: (start: TriggeredStart) => Promise<CreateRunOutcome>;
  private selfCallStreak = 0;
  private selfCallPending = false;
  private triggerStreak = 0;
  private triggerCallPending = false;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new HubStore(ctx.storage.sql);
    this.outbox = new TriggerOutbox(ctx.storage.sql);
    this.target = (runId) => env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as DeliveryTarget;
    this.startRun = (start) => startTriggeredRun(env, start);
  }

  /**
   * Stores events (one already kept under the same name and id is a
   * duplicate, stored once) and, in the same transaction, offers each new one
   * to every wait of its name that it may match; then starts delivering.
   * Answers per event, in order.
   *
   * With `triggers` (the hub of a name's shard 0: one hub per name starts
   * runs), each new event also goes to the trigger outbox, matched against
   * the catalog's triggers and started in rounds of their own (events/triggers.ts).
   *
   * Like every method here, it answers a Result: an error crosses RPC as data, with its code.
   */
  async accept(events: unknown, options?: unknown): Promise<Result<AcceptedEvent[]>> {
    return toResult(async () => {
      const batch = parseOrThrow(EventBatch, events, "events.invalid_request", "the events");
      const { triggers = false } = parseOrThrow(AcceptOptions, options ?? {}, "events.invalid_request", "the options");
      const now = this.now();
      const waited = this.store.hasWaits();
      if (waited || triggers) {
        await this.armAt(now + SELF_CALL_BACKSTOP_MS); // before the commit: an outbox row is never without an alarm
      }
      const outbox = triggers ? this.outbox : undefined;
      const answers = withWorkBudget(new WorkBudget(MAX_EVENT_WORK_UNITS, "event hub call"), () =>
        this.ctx.storage.transactionSync(() => acceptAll(this.store, batch, now, outbox)),
      );
      await this.armAt(this.store.nextPruneAt() ?? now + EVENT_RETENTION_MS);
      if (waited) {
        this.ctx.waitUntil(this.deliverLogged());
      }
      if (triggers && answers.some((answer) => !answer.duplicate)) {
        this.callTriggersSoon(now);
      }
      return answers;
    });
  }

  /** What the triggers of one retained event started (docs/api.md, "What an event starts"); `event.not_found` when the hub does not hold it. */
  async triggersOf(name: unknown, eventId: unknown): Promise<Result<EventTriggers>> {
    return toResult(() => {
      const parsedName = parseOrThrow(EventName, name, "events.invalid_request", "the event name");
      const id = parseOrThrow(WaitKey, eventId, "events.invalid_request", "the event id");
      const found = this.outbox.startsOf(parsedName, id);
      if (found === null) {
        throw EngineError.terminal("event.not_found", `no event "${id}" named "${parsedName}" is retained`);
      }
      return found;
    });
  }

  /**
   * One round of trigger work (events/trigger-round.ts), then the next: a
   * self-call while the round was full, up to a streak, then the alarm.
   * `self`: the hub's own call.
   */
  async runTriggers(self = false): Promise<void> {
    if (self) {
      this.triggerCallPending = false;
      this.triggerStreak += 1;
    } else {
      this.triggerStreak = 0;
    }
    const more = await runTriggerRound({
      outbox: this.outbox,
      transaction: (work) => this.ctx.storage.transactionSync(work),
      now: () => this.now(),
      triggersFor: async (name) => unwrap(await catalog(this.env).triggersFor(name)),
      startRun: (start) => this.startRun(start),
      readBlobs: (values) => preloadBlobs(this.env, values),
    });
    const now = this.now();
    if (!more) {
      await this.armNext();
    } else if (this.triggerStreak >= MAX_SELF_CALL_STREAK) {
      await this.armAt(now);
    } else {
      this.callTriggersSoon(now);
    }
  }

  /**
   * Stores a wait (a key stored already keeps what it has) and answers the
   * retained events of its names received at or after its `since` that it may
   * match, oldest first, at most {@link MAX_LOOKBACK_EVENTS}: events accepted
   * before it. Those accepted after it are delivered.
   *
   * Fails with `event.invalid_wait` (each problem's path in `details`) or `event.invalid_match`.
   */
  async register(wait: unknown): Promise<Result<RegisterAnswer>> {
    return toResult(async () => {
      const parsed = parseOrThrow(WaitRegistration, wait, "event.invalid_wait", "the wait");
      if (parsed.match !== undefined) {
        checkMatch(parsed.match);
      }
      const now = this.now();
      const answer = withWorkBudget(new WorkBudget(MAX_EVENT_WORK_UNITS, "event hub call"), () =>
        this.ctx.storage.transactionSync(() => {
          const stored = this.store.registerWait(parsed, inputToStore(parsed.input));
          return { events: lookback(this.store, stored, now) };
        }),
      );
      await this.armNext();
      return answer;
    });
  }

  /** Forgets a wait (its run consumed an event, timed out, or ended) and what was to be delivered to it. */
  async unregister(waitKey: unknown): Promise<Result<null>> {
    return toResult(() => {
      const key = parseOrThrow(WaitKey, waitKey, "event.invalid_wait", "the wait key");
      this.store.deleteWait(key);
      return null;
    });
  }

  /** Sends one round of deliveries. `self`: the hub's own call, continuing a delivery in a fresh event. */
  async deliver(self = false): Promise<void> {
    if (self) {
      this.selfCallPending = false;
      this.selfCallStreak += 1;
    } else {
      this.selfCallStreak = 0;
    }
    await this.round();
  }

  /** Prunes what is past retention or expiry, and sends a round of whatever is due (a lost round's resend, a retry). */
  override async alarm(): Promise<void> {
    this.selfCallStreak = 0;
    this.triggerStreak = 0;
    this.store.prune(this.now());
    await this.releaseBlobs();
    await this.round();
    const now = this.now();
    const trigger = this.store.nextTriggerAt();
    if (trigger !== null && trigger <= now) {
      this.callTriggersSoon(now); // its own event: the round above may have spent this one's calls
    }
  }

  /**
   * Gives up the blobs of the events pruned (each was held by `event:<id>`
   * since it was accepted; the runs that took it hold their own): a blob no
   * run holds is deleted. A failure is tried again later, with backoff.
   */
  private async releaseBlobs(): Promise<void> {
    const now = this.now();
    for (const { event_id, attempts } of this.store.dueReleases(now, BLOB_RELEASES_PER_ALARM)) {
      try {
        await releaseRunBlobs(this.env, `event:${event_id}`);
        this.store.settleRelease(event_id, null);
      } catch (error) {
        const retryAt = now + Math.min(BLOB_RELEASE_RETRY_MS * 2 ** attempts, EVENT_RETENTION_MS);
        this.store.settleRelease(event_id, retryAt);
        console.error(
          JSON.stringify({ msg: "releasing an event's blobs failed", error: ensureEngineError(error).message }),
        );
      }
    }
    await this.armNext();
  }

  /** A self-call of {@link runTriggers} (a fresh event with calls of its own), behind a backstop alarm. */
  private callTriggersSoon(now: number): void {
    if (this.triggerCallPending) {
      return;
    }
    this.triggerCallPending = true;
    const self = this.env.EVENT_HUB.get(this.ctx.id) as unknown as { runTriggers(self: boolean): Promise<void> };
    this.ctx.waitUntil(
      this.armAt(now + SELF_CALL_BACKSTOP_MS)
        .then(() => self.runTriggers(true))
        .catch((error: unknown) => {
          this.triggerCallPending = false;
          console.error(JSON.stringify({ msg: "event trigger round failed", error: ensureEngineError(error).message }));
        }),
    );
  }

  /** {@link deliver} from inside the hub: a failure is logged, and the alarm sends again. */
  private async deliverLogged(): Promise<void> {
    try {
      await this.round();
    } catch (error) {
      console.error(JSON.stringify({ msg: "event delivery round failed", error: ensureEngineError(error).message }));
    }
  }

  /**
   * Plans a round and leases what it sends in one transaction (a round
   * running beside it never sends the same), sends, and applies the answers:
   * `consumed` and `not_waiting` forget the wait, `declined` only that
   * delivery (the run's own match said no: the wait takes later events); a
   * failure is tried again later.
   */
  private async round(): Promise<void> {
    const now = this.now();
    const { plan, sends } = this.ctx.storage.transactionSync(() => this.leaseRound(now));
    if (typeof plan.next === "number") {
      await this.armAt(plan.next);
    }
    const outcomes = await Promise.allSettled(sends.map(({ delivery, event }) => this.send(delivery, event)));
    const failedAt = this.now();
    this.ctx.storage.transactionSync(() => {
      outcomes.forEach((outcome, index) => {
        const delivery = sends[index]?.delivery;
        if (delivery !== undefined) {
          this.settle(delivery, outcome, failedAt);
        }
      });
    });
    await this.continueAfter(plan, failedAt);
  }

  private leaseRound(now: number): { plan: RoundPlan; sends: { delivery: PendingDelivery; event: EventRecord }[] } {
    const plan = planRound(this.store.pendingHeads(MAX_DELIVERIES_PER_ROUND + 1), now);
    const sends: { delivery: PendingDelivery; event: EventRecord }[] = [];
    for (const delivery of plan.send) {
      const event = this.store.eventAt(delivery.seq);
      if (event === undefined) {
        this.store.deleteDelivery(delivery.wait_key, delivery.seq); // its event was pruned meanwhile
        continue;
      }
      this.store.reschedule(delivery.wait_key, delivery.seq, now + DELIVERY_LEASE_MS, delivery.attempts);
      sends.push({ delivery, event });
    }
    return { plan, sends };
  }

  private async send(delivery: PendingDelivery, event: EventRecord): Promise<DeliveryAnswer> {
    const answer = await this.target(delivery.run_id).deliverEvent({ wait_key: delivery.wait_key, event });
    return toDeliveryAnswer(answer);
  }

  private settle(delivery: PendingDelivery, outcome: PromiseSettledResult<DeliveryAnswer>, now: number): void {
    if (outcome.status === "fulfilled" && outcome.value.outcome === "declined") {
      this.store.deleteDelivery(delivery.wait_key, delivery.seq);
      return;
    }
    if (outcome.status === "fulfilled") {
      this.store.deleteWait(delivery.wait_key);
      return;
    }
    const attempts = delivery.attempts + 1;
    this.store.reschedule(delivery.wait_key, delivery.seq, retryAt(attempts, now), attempts);
    console.error(
      JSON.stringify({
        msg: "event delivery failed",
        wait_key: delivery.wait_key,
        attempts,
        error: ensureEngineError(outcome.reason).message,
      }),
    );
  }

  /** More due now: a self-call (a fresh event, with calls of its own), or the alarm after a streak of them. */
  private async continueAfter(plan: RoundPlan, now: number): Promise<void> {
    if (plan.next !== "now") {
      await this.armNext();
      return;
    }
    if (this.selfCallStreak >= MAX_SELF_CALL_STREAK) {
      await this.armAt(now);
      return;
    }
    if (this.selfCallPending) {
      return;
    }
    this.selfCallPending = true;
    await this.armAt(now + SELF_CALL_BACKSTOP_MS);
    const self = this.env.EVENT_HUB.get(this.ctx.id) as unknown as { deliver(self: boolean): Promise<void> };
    this.ctx.waitUntil(
      self.deliver(true).catch((error: unknown) => {
        this.selfCallPending = false;
        console.error(JSON.stringify({ msg: "event hub self-call failed", error: ensureEngineError(error).message }));
      }),
    );
  }

  /** Sets the alarm for the next delivery or prune due, unless one is set earlier. */
  private async armNext(): Promise<void> {
    const next = this.store.nextDueAt();
    if (next !== null) {
      await this.armAt(next);
    }
  }

  /** The one alarm, only ever moved earlier: an alarm that finds nothing due sets the next. */
  private async armAt(at: number): Promise<void> {
    const current = await this.ctx.storage.getAlarm();
    if (current === null || at < current) {
      await this.ctx.storage.setAlarm(at);
    }
  }
}

/** Stores each event of a batch (or finds it stored) and offers each new one to the waits of its name it may match. */
function acceptAll(
  store: HubStore,
  batch: readonly HubEventInput[],
  now: number,
  outbox: TriggerOutbox | undefined,
): AcceptedEvent[] {
  const waitsByName = new Map<string, StoredWait[]>();
  return batch.map((input) => {
    const eventId = input.id ?? newEventId();
    if (store.findEvent(input.name, eventId, now) !== undefined) {
      return { event_id: eventId, duplicate: true };
    }
    const record: EventRecord = {
      event_id: eventId,
      name: input.name,
      data: input.data ?? null,
      received_at: now,
      ...(input.source === undefined ? {} : { source: input.source }),
    };
    const { seq } = store.insertEvent(record);
    outbox?.addEvent(seq, now);
    const waits = waitsByName.get(input.name) ?? store.waitsFor(input.name);
    waitsByName.set(input.name, waits);
    for (const wait of waits) {
      if (isCandidate(wait, record)) {
        store.addDelivery(wait.wait_key, seq, now);
      }
    }
    return { event_id: eventId, duplicate: false };
  });
}

/**
 * The retained events a new wait takes, oldest first: at most
 * {@link MAX_LOOKBACK_EVENTS}, and no more once their data passed {@link MAX_LOOKBACK_CHARS}.
 */
function lookback(store: HubStore, wait: StoredWait & { names: string[] }, now: number): EventRecord[] {
  const found: EventRecord[] = [];
  let chars = 0;
  for (const { record } of store.eventsSince(wait.names, wait.since, now)) {
    if (isCandidate(wait, record)) {
      found.push(record);
      chars += JSON.stringify(record.data).length;
      if (found.length === MAX_LOOKBACK_EVENTS || chars >= MAX_LOOKBACK_CHARS) {
        break;
      }
    }
  }
  return found;
}

/**
 * A coordinator's answer to a delivery: `{ outcome }`, or that inside an ok
 * Result. An error Result, or anything else, is a failed delivery, tried again.
 */
function toDeliveryAnswer(answer: unknown): DeliveryAnswer {
  const plain = DeliveryAnswer.safeParse(answer);
  if (plain.success) {
    return plain.data;
  }
  const result = answer as Partial<Result<unknown>> | null;
  if (typeof result === "object" && result !== null && result.ok === true) {
    return toDeliveryAnswer(result.value);
  }
  if (typeof result === "object" && result !== null && result.ok === false && result.error !== undefined) {
    throw EngineError.fromData(result.error);
  }
  throw new EngineError("event.bad_delivery_answer", `the coordinator answered ${JSON.stringify(answer) ?? "nothing"}`);
}
