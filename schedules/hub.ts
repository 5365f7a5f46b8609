import { DurableObject } from "cloudflare:workers";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { Mutex } from "../lib/mutex.ts";
import { toResult, unwrap, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import {
  BackfillBody,
  DEFAULT_CATCHUP_WINDOW_MS,
  DEFAULT_OVERLAP,
  Schedule,
  ScheduleState,
  type BackfillAnswer,
  type OverlapPolicy,
  type ScheduleStatus,
  type SlotRecord,
  type SlotSource,
} from "../schemas/schedules.ts";
import { startTriggeredRun } from "../src/start.ts";
import { decideOverlap, dueSlots, nextWakeAt, withRecord } from "./decide.ts";
import { compileSchedule, nextSlots, slotsBetween, type SlotSpec } from "../lib/cron.ts";
import { startSlot, type StartRun } from "./start-slot.ts";

/** A backfill may name at most this many slots; a larger range is refused. */
export const MAX_BACKFILL_SLOTS = 1_000;
/** Slots of a backfill started per wake: each wake is a request of its own, with its own subrequest budget. */
export const BACKFILL_SLOTS_PER_WAKE = 25;
/** A start cut off is tried again this long after it began. */
const INFLIGHT_RETRY_MS = 10_000;
/** `status` looks up the current status of at most this many unfinished runs in `recent`. */
const STATUS_REFRESHES = 10;
/** The statuses of a run that has ended; every other status is a run still going. */
const ENDED: ReadonlySet<string> = new Set(["completed", "failed", "cancelled"]);

/** What the schedule object asks of a run's coordinator. */
export interface RunPeer {
  get(): Promise<Result<{ status: string }>>;
  control(name: "cancel", reason?: string): Promise<Result<unknown>>;
}

/** A schedule's definition as the catalog holds it. */
export type ReadSchedule = (id: string, version?: number) => Promise<{ version: number; definition: unknown }>;

/**
 * One Durable Object per schedule, named by the schedule's id: its alarm wakes
 * it for each slot (the next due slot, a backfill to go on with, or a buffered
 * slot to look at), and it keeps the state that makes a slot start one run:
 * the latest slot considered, the slot being started, the last run and the
 * recent slots. Every call and wake runs one at a time (a mutex), and a slot's
 * run id derives from `(schedule, scheduled_at)`, so a slot fired twice (two
 * wakes at once, a wake retried after a restart) still starts one run.
 */
export class ScheduleHub extends DurableObject<Env> {
  /** The object's clock (ms since the epoch). Tests set it to move a schedule through its slots. */
  now: () => number = Date.now;
  /** How runs start: the engine's typed start. */
  startRun: StartRun;
  /** The coordinator of a run. */
  run: (runId: string) => RunPeer;
  /** The catalog's version of the schedule (the latest without `version`). */
  readSchedule: ReadSchedule;
  private readonly mutex = new Mutex();

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.startRun = (start) => startTriggeredRun(env, start);
    this.run = (runId) => env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as RunPeer;
    this.readSchedule = async (id, version) => {
      const catalog = env.CATALOG.get(env.CATALOG.idFromName("catalog")) as unknown as {
        get(kind: "schedules", id: string, version?: number): Promise<Result<{ version: number; definition: unknown }>>;
      };
      return unwrap(await catalog.get("schedules", id, version));
    };
  }

  /**
   * Takes a registered version of the schedule `id` (the latest without
   * `version`) as the active one, and arms the alarm for its next slot. A
   * version older than or equal to the active one changes nothing, so a
   * repeated notice is harmless.
   */
  async arm(id: string, version?: number): Promise<Result<null>> {
    return toResult(() => this.mutex.run(async () => this.adopt(id, version).then(() => null)));
  }

  /** `GET /v1/schedules/{id}/status`. */
  async status(id: string): Promise<Result<ScheduleStatus>> {
    return toResult(() =>
      this.mutex.run(async () => {
        const state = await this.refreshRecent(await this.adopt(id));
        await this.save(state);
        return toStatus(state, specOf(state), this.now());
      }),
    );
  }

  /** Stops starting slots (a backfill, `/trigger` and a buffered slot still start) until `resume`. */
  async pause(id: string): Promise<Result<ScheduleStatus>> {
    return this.change(id, (state) => ({ ...state, paused: true }));
  }

  /** Starts slots again from now on: the slots that passed while it was paused are not started. */
  async resume(id: string): Promise<Result<ScheduleStatus>> {
    return this.change(id, (state, now) =>
      state.paused ? { ...state, paused: false, cursor: Math.max(state.cursor, now) } : state,
    );
  }

  /** Starts one run now, whatever the overlap policy (its slot is now). */
  async trigger(id: string): Promise<Result<SlotRecord>> {
    return toResult(() =>
      this.mutex.run(async () => {
        const state = await this.adopt(id);
        const now = this.now();
        const started = await this.startOne(state, now, "trigger");
        await this.finish(started);
        const at = new Date(now).toISOString();
        return started.recent.find((entry) => entry.scheduled_at === at) ?? unreachable();
      }),
    );
  }

  /**
   * Queues one run per slot from `from` to `to`, each offered by the overlap
   * policy (the body's, or the schedule's) as if its time had come; started
   * a few per wake. A range of more than {@link MAX_BACKFILL_SLOTS} slots is
   * refused (`schedule.invalid_backfill`).
   */
  async backfill(id: string, body: unknown): Promise<Result<BackfillAnswer>> {
    return toResult(() =>
      this.mutex.run(async () => {
        const request = parseOrThrow(BackfillBody, body, "schedule.invalid_backfill", "the backfill");
        const state = await this.adopt(id);
        const [from, to] = [Date.parse(request.from), Date.parse(request.to)];
        const range = checkBackfillRange(specOf(state), from, to);
        const overlap = request.overlap ?? state.definition.overlap ?? DEFAULT_OVERLAP;
        const queued = range.length === 0 ? state : { ...state, backfill: { after: from - 1, to, overlap } };
        await this.finish(queued);
        const [first, last] = [range[0], range.at(-1)];
        return {
          slots: range.length,
          first: first === undefined ? null : new Date(first).toISOString(),
          last: last === undefined ? null : new Date(last).toISOString(),
        };
      }),
    );
  }

  override async alarm(): Promise<void> {
    await this.mutex.run(async () => {
      const state = await this.load();
      if (state !== undefined) {
        await this.finish(await this.wake(state, this.now()));
      }
    });
  }

  /** One wake: a start left unfinished, a buffered slot, a backfill's next slots, then the cron slots due. */
  private async wake(initial: ScheduleState, now: number): Promise<ScheduleState> {
    let state = initial;
    if (state.inflight !== null) {
      state = await this.startOne(state, state.inflight.scheduled_at, state.inflight.source);
    }
    if (state.buffered !== null && !(await this.isRunning(state.last_run))) {
      state = await this.startOne({ ...state, buffered: null }, state.buffered, "buffer");
    }
    state = await this.continueBackfill(state);
    if (state.paused) {
      return state;
    }
    const { due, cursor } = dueSlots(state, specOf(state), now);
    const window = state.definition.catchup_window_ms ?? DEFAULT_CATCHUP_WINDOW_MS;
    for (const { slot, missed } of due) {
      state = missed
        ? record(state, skipped(slot, "cron", `missed: later than the catch-up window (${window} ms)`))
        : await this.offer(state, slot, "cron", state.definition.overlap ?? DEFAULT_OVERLAP);
    }
    return { ...state, cursor };
  }

  private async continueBackfill(state: ScheduleState): Promise<ScheduleState> {
    const progress = state.backfill;
    if (progress === null) {
      return state;
    }
    const batch = slotsBetween(specOf(state), progress.after + 1, progress.to, BACKFILL_SLOTS_PER_WAKE);
    let next: ScheduleState = state;
    for (const slot of batch.slots) {
      next = await this.offer(next, slot, "backfill", progress.overlap);
    }
    const after = batch.slots.at(-1) ?? progress.to;
    return { ...next, backfill: batch.more ? { ...progress, after } : null };
  }

  /** A slot whose time came (or a backfill's): started, skipped, buffered or started after a cancel, by `policy`. */
  private async offer(
    state: ScheduleState,
    slot: number,
    source: SlotSource,
    policy: OverlapPolicy,
  ): Promise<ScheduleState> {
    const at = new Date(slot).toISOString();
    if (state.recent.some((entry) => entry.scheduled_at === at && entry.run_id !== null)) {
      return state; // this slot already has its run
    }
    const running = await this.isRunning(state.last_run);
    const decision = decideOverlap(policy, running, state.buffered !== null);
    if (decision === "skip") {
      return record(state, skipped(slot, source, `overlap: run ${state.last_run} has not ended`));
    }
    if (decision === "buffer") {
      const entry = { scheduled_at: at, run_id: null, status: "buffered", source };
      return record({ ...state, buffered: slot }, entry);
    }
    if (decision === "cancel_then_start" && state.last_run !== null) {
      const reason = `cancelled by schedule ${state.definition.id}: the slot ${at} started`;
      await this.run(state.last_run).control("cancel", reason); // an answer that the run has ended is as good
    }
    return this.startOne(state, slot, source);
  }

  /**
   * Starts a slot's run. The slot is stored as in flight first, with an alarm
   * behind it, so a start cut off (a restart, a failed call) is finished by
   * the next wake with the same run, never lost and never doubled.
   */
  private async startOne(state: ScheduleState, slot: number, source: SlotSource): Promise<ScheduleState> {
    const inflight = { ...state, inflight: { scheduled_at: slot, source } };
    await this.save(inflight);
    await this.ctx.storage.setAlarm(this.now() + INFLIGHT_RETRY_MS);
    const started = await startSlot(this.startRun, state.definition, state.version, slot, source);
    const lastRun = started.run_id ?? state.last_run;
    return record({ ...inflight, inflight: null, last_run: lastRun }, started);
  }

  private async isRunning(runId: string | null): Promise<boolean> {
    if (runId === null) {
      return false;
    }
    const answer = await this.run(runId).get();
    if (!answer.ok) {
      if (answer.error.code === "run.not_found") {
        return false;
      }
      throw EngineError.fromData(answer.error);
    }
    return !ENDED.has(answer.value.status);
  }

  /** The recent runs' statuses, brought up to date (the newest unfinished ones). */
  private async refreshRecent(state: ScheduleState): Promise<ScheduleState> {
    const stale = state.recent
      .filter((entry) => entry.run_id !== null && !ENDED.has(entry.status))
      .slice(0, STATUS_REFRESHES);
    const fresh = await Promise.all(
      stale.map(async (entry) => {
        const answer = await this.run(entry.run_id ?? "").get();
        return answer.ok ? { ...entry, status: answer.value.status } : entry;
      }),
    );
    return fresh.reduce(record, state);
  }

  /** Applies a control under the mutex, stores it, re-arms, and answers the status. */
  private async change(
    id: string,
    apply: (state: ScheduleState, now: number) => ScheduleState,
  ): Promise<Result<ScheduleStatus>> {
    return toResult(() =>
      this.mutex.run(async () => {
        const now = this.now();
        const state = apply(await this.adopt(id), now);
        await this.finish(state);
        return toStatus(state, specOf(state), now);
      }),
    );
  }

  /**
   * The state with the catalog's version of `id` active (the latest without
   * `version`): a newer version than the stored one is adopted (its slots
   * after those already considered); a first one starts from now.
   */
  private async adopt(id: string, version?: number): Promise<ScheduleState> {
    const stored = await this.load();
    if (version !== undefined && stored !== undefined && stored.version >= version) {
      return stored;
    }
    const found = await this.readSchedule(id, version).catch((thrown: unknown) => {
      const error = ensureEngineError(thrown);
      throw error.code === "definition.not_found" ? EngineError.terminal("schedule.not_found", error.message) : error;
    });
    if (stored !== undefined && stored.version >= found.version) {
      return stored;
    }
    const definition = Schedule.parse(found.definition);
    const state: ScheduleState = stored
      ? { ...stored, version: found.version, definition }
      : { ...freshState(found.version, definition), cursor: this.now() };
    await this.finish(state);
    return state;
  }

  private async load(): Promise<ScheduleState | undefined> {
    const raw = await this.ctx.storage.get("state");
    return raw === undefined ? undefined : ScheduleState.parse(raw);
  }

  private async save(state: ScheduleState): Promise<void> {
    await this.ctx.storage.put("state", state);
  }

  /** Stores the state and sets the alarm for its next wake (or none). */
  private async finish(state: ScheduleState): Promise<void> {
    await this.save(state);
    const wakeAt = nextWakeAt(state, specOf(state), this.now());
    if (wakeAt === null) {
      await this.ctx.storage.deleteAlarm();
    } else {
      await this.ctx.storage.setAlarm(wakeAt);
    }
  }
}

function freshState(version: number, definition: Schedule): ScheduleState {
  return {
    version,
    definition,
    paused: false,
    cursor: 0,
    inflight: null,
    buffered: null,
    last_run: null,
    backfill: null,
    recent: [],
  };
}

/** The compiled slots of the active version (registration checked the expression and zone). */
function specOf(state: ScheduleState): SlotSpec {
  const compiled = compileSchedule(state.definition);
  if (!compiled.ok) {
    throw EngineError.terminal("schedule.invalid", `${compiled.field}: ${compiled.message}`);
  }
  return compiled.spec;
}

function record(state: ScheduleState, entry: SlotRecord): ScheduleState {
  return { ...state, recent: withRecord(state.recent, entry) };
}

function skipped(slot: number, source: SlotSource, reason: string): SlotRecord {
  return { scheduled_at: new Date(slot).toISOString(), run_id: null, status: "skipped", reason, source };
}

function toStatus(state: ScheduleState, spec: SlotSpec, now: number): ScheduleStatus {
  const from = state.paused ? Math.max(state.cursor, now) : state.cursor;
  return {
    id: state.definition.id,
    version: state.version,
    paused: state.paused,
    next: nextSlots(spec, from, 5).map((slot) => new Date(slot).toISOString()),
    recent: state.recent,
  };
}

/** The slots of a backfill range, checked: `from` before `to`, at most {@link MAX_BACKFILL_SLOTS}. */
function checkBackfillRange(spec: SlotSpec, from: number, to: number): number[] {
  if (to < from) {
    throw EngineError.terminal("schedule.invalid_backfill", "the backfill is invalid: to is before from", [
      { path: "to", message: "must not be before from", code: "schedule.invalid_backfill" },
    ]);
  }
  const range = slotsBetween(spec, from, to, MAX_BACKFILL_SLOTS);
  if (range.more) {
    const message = `the range holds more than ${MAX_BACKFILL_SLOTS} slots; backfill it in parts`;
    throw EngineError.terminal("schedule.invalid_backfill", `the backfill is invalid: ${message}`, [
      { path: "to", message, code: "schedule.backfill_too_large" },
    ]);
  }
  return range.slots;
}

function unreachable(): never {
  throw new EngineError("internal.error", "a started slot left no record");
}
