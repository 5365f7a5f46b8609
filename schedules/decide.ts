import {
  DEFAULT_CATCHUP_WINDOW_MS,
  type OverlapPolicy,
  type Schedule,
  type ScheduleState,
  type SlotRecord,
} from "../schemas/schedules.ts";
import { jitterFor, nextSlot, type SlotSpec } from "../lib/cron.ts";

/**
 * The schedule object's decisions, as plain functions of its state and the
 * time: which slots are due, which were missed, what a slot does when the
 * previous run has not ended, and when to wake next. No storage, no calls.
 */

/** At most this many slots are looked at per wake; a longer outage's older slots are passed over in one step. */
export const MAX_SLOTS_PER_WAKE = 1_000;
/** `recent` keeps this many slots, newest first. */
export const RECENT_SLOTS = 50;
/** While a buffered slot waits, the previous run is looked at this often. */
export const BUFFER_POLL_MS = 15_000;

/** A slot whose time has come: to start, or missed (older than the catch-up window). */
export interface DueSlot {
  slot: number;
  missed: boolean;
}

/**
 * The cron slots due at `now`, after the cursor, oldest first: a slot is due
 * once its slot time plus its jitter has come, and missed when that was more
 * than `catchup_window_ms` ago. `cursor` is where the next wake continues.
 */
export function dueSlots(state: ScheduleState, spec: SlotSpec, now: number): { due: DueSlot[]; cursor: number } {
  const definition = state.definition;
  const window = definition.catchup_window_ms ?? DEFAULT_CATCHUP_WINDOW_MS;
  const due: DueSlot[] = [];
  let cursor = state.cursor;
  for (let slot = nextSlot(spec, cursor); slot !== null; slot = nextSlot(spec, slot)) {
    const dueAt = slot + jitterFor(definition.id, slot, definition.jitter_ms ?? 0);
    if (dueAt > now) {
      break;
    }
    if (due.length === MAX_SLOTS_PER_WAKE) {
      // A long outage: the rest up to the window are passed over unrecorded, never started.
      return { due, cursor: Math.max(cursor, now - window - 1) };
    }
    due.push({ slot, missed: now - dueAt > window });
    cursor = slot;
  }
  return { due, cursor };
}

/** When the next cron slot is due (its jitter included), or null when none will come. */
export function nextDueAt(definition: Schedule, spec: SlotSpec, cursor: number): number | null {
  const slot = nextSlot(spec, cursor);
  return slot === null ? null : slot + jitterFor(definition.id, slot, definition.jitter_ms ?? 0);
}

/** What a slot does, given whether the schedule's previous run is still going. */
export type OverlapDecision = "start" | "skip" | "buffer" | "cancel_then_start";

export function decideOverlap(policy: OverlapPolicy, previousRunning: boolean, buffered: boolean): OverlapDecision {
  if (!previousRunning) {
    return "start";
  }
  const decisions: { [P in OverlapPolicy]: OverlapDecision } = {
    skip: "skip",
    buffer_one: buffered ? "skip" : "buffer",
    allow_all: "start",
    cancel_other: "cancel_then_start",
  };
  return decisions[policy];
}

/** `recent` with `record` in it, newest slot first: a slot already there is replaced, never listed twice. */
export function withRecord(recent: readonly SlotRecord[], record: SlotRecord): SlotRecord[] {
  const others = recent.filter((existing) => existing.scheduled_at !== record.scheduled_at);
  return [record, ...others]
    .sort((a, b) => Date.parse(b.scheduled_at) - Date.parse(a.scheduled_at))
    .slice(0, RECENT_SLOTS);
}

/** When the object must wake next: the next due slot, a backfill to go on with, a buffered slot to look at. */
export function nextWakeAt(state: ScheduleState, spec: SlotSpec, now: number): number | null {
  const wakes: number[] = [];
  if (!state.paused) {
    const due = nextDueAt(state.definition, spec, state.cursor);
    if (due !== null) {
      wakes.push(due);
    }
  }
  if (state.backfill !== null || state.inflight !== null) {
    wakes.push(now);
  }
  if (state.buffered !== null) {
    wakes.push(now + BUFFER_POLL_MS);
  }
  return wakes.length === 0 ? null : Math.min(...wakes);
}
