import { ensureEngineError } from "../lib/errors.ts";
import { hasPendingCleanup } from "./cleanup.ts";
import type { RunState } from "./draft.ts";
import { isStartDue } from "./lifecycle.ts";
import { needsWakeAfterRestart } from "./wait-kinds.ts";

/**
 * At most this many self-wakes follow each other before an alarm takes over:
 * every self-call nests one subrequest deeper than the event that made it,
 * and the platform limits that depth; an alarm starts again from the top.
 */
const MAX_SELF_WAKE_STREAK = 4;
/** The alarm set behind a self-wake, in case that call is lost. */
export const WAKE_BACKSTOP_MS = 2_000;

/** What the scheduler needs of its Durable Object. */
export interface WakeDeps {
  storage: DurableObjectStorage;
  waitUntil: (promise: Promise<unknown>) => void;
  /** Calls this object's own `wake(true)`: a fresh event with a budget of its own. */
  selfWake: () => Promise<void>;
  /**
   * An alarm the run must keep even when its decisions want none, or null:
   * the run index's retry or backstop (run-index.ts `heldUntil`).
   */
  heldUntil: (now: number) => number | null;
}

/**
 * When the run gets its next event: the one alarm (timers, the liveness
 * check, the backstop) and, for work ready now, a call to its own `wake()`.
 */
export class WakeScheduler {
  private alarmAt: number | null = null;
  /** A call to our own wake() is on its way; more ready work need not send another. */
  private selfWakePending = false;
  /** Self-wakes since the last alarm: each nests one subrequest deeper. */
  private selfWakeStreak = 0;
  /** The last decision wanted no alarm: only a hold ({@link WakeDeps.heldUntil}) keeps one. */
  private idle = false;

  constructor(private readonly deps: WakeDeps) {}

  /**
   * On load: reads the stored alarm and, when a restart interrupted work,
   * wakes now to send it again (the liveness alarm would find it within
   * LIVENESS_CHECK_MS anyway).
   */
  async restore(state: RunState): Promise<void> {
    this.alarmAt = await this.deps.storage.getAlarm();
    if (hasWorkToResume(state, Date.now())) {
      this.idle = false;
      await this.setAlarm(Date.now());
    }
  }

  /** The alarm fired: it is a fresh top-level event. */
  alarmFired(): void {
    this.alarmAt = null;
    this.selfWakeStreak = 0;
  }

  /** A wake arrived: a self-call nests one deeper, any other call starts from the top. */
  wakeArrived(self: boolean): void {
    this.selfWakeStreak = self ? this.selfWakeStreak + 1 : 0;
  }

  /** A wake is being applied: it serves whatever a pending self-wake was sent for. */
  wakeApplying(): void {
    this.selfWakePending = false;
  }

  /**
   * The alarm a decision needs, written before its commit: should this
   * instance die right after it, the alarm already covers what the commit
   * makes outstanding (a wake due now gets the self-wake's backstop). Storage
   * writes land in order, so awaiting it after the commit is enough.
   */
  arm(wakeAt: number | null, now: number): Promise<void> | null {
    this.idle &&= wakeAt === null;
    return wakeAt === null ? null : this.setAlarm(wakeAt <= now ? now + WAKE_BACKSTOP_MS : wakeAt);
  }

  /**
   * Work that is ready now gets a fresh event at once: a call to this
   * object's own `wake()` (an alarm would add its scheduling latency to every
   * dispatch wave). The alarm stays set as the backstop.
   */
  async scheduleWake(wakeAt: number | null, now: number): Promise<void> {
    if (wakeAt !== null && wakeAt <= now) {
      if (this.selfWakePending) {
        return; // One wake in flight serves everything that became ready meanwhile.
      }
      if (this.selfWakeStreak >= MAX_SELF_WAKE_STREAK) {
        // Each self-call is a subrequest of the event that made it, and the platform
        // caps how deep subrequests nest; an alarm is a fresh top-level event.
        await this.setAlarm(now);
        return;
      }
      this.selfWakePending = true; // its backstop alarm was set before the commit
      this.deps.waitUntil(
        this.deps
          .selfWake()
          .catch((error: unknown) =>
            console.error(JSON.stringify({ msg: "self-wake failed", error: ensureEngineError(error).message })),
          ),
      );
      return;
    }
    if (wakeAt === null) {
      this.idle = true;
      await this.setAlarm(this.deps.heldUntil(now)); // set before the commit otherwise
    }
  }

  /** A hold ended (the run index has the run's latest row): a run that wants no alarm keeps none. */
  async holdReleased(): Promise<void> {
    if (this.idle && this.deps.heldUntil(Date.now()) === null) {
      await this.setAlarm(null);
    }
  }

  /**
   * Keeps the one alarm at or before the next timer. The alarm is only ever
   * moved earlier (or set when there is none): an alarm that fires with
   * nothing due just sets the next one, while moving it on every event would
   * cost a storage write per result. `null` (the run ended) clears it.
   */
  async setAlarm(at: number | null): Promise<void> {
    if (at === null) {
      if (this.alarmAt !== null) {
        this.alarmAt = null;
        await this.deps.storage.deleteAlarm();
      }
      return;
    }
    if (this.alarmAt !== null && this.alarmAt <= at) {
      return;
    }
    this.alarmAt = at;
    await this.deps.storage.setAlarm(at);
  }
}

/**
 * Work that a restart interrupts and a wake resumes: a start (a queued run
 * that is due, or an auto run stored in drafting), dispatches in flight,
 * children asked for but not yet known to exist, and children to cancel or
 * containers to release. A delayed start not yet due is left to its stored
 * alarm, set at its `start_at`.
 */
function hasWorkToResume(state: RunState, now: number): boolean {
  const { status, mode } = state.record;
  const startable =
    (status === "queued" && isStartDue(state.record, now)) || (status === "drafting" && mode === "auto");
  if (startable || hasPendingCleanup(state.record)) {
    return true;
  }
  return Object.values(state.nodes).some((node) =>
    node.invocations.some((invocation) => invocation.status === "running" || needsWakeAfterRestart(invocation)),
  );
}
