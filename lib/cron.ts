import { Cron } from "croner";
import type { Schedule } from "../schemas/schedules.ts";

/**
 * A schedule's slots: the instants its cron expression names in its time zone
 * (croner: no dependencies, no code generation, time zones through `Intl`; see
 * docs/definitions.md, "Schedules"). Pure: every function takes the time it
 * counts from.
 *
 * Daylight saving: a local time that does not exist (the hour skipped when
 * clocks go forward) is no slot that day; a local time that occurs twice (the
 * hour repeated when clocks go back) is one slot, at its first occurrence.
 * croner moves a fixed time out of a gap to the gap's end and runs an interval
 * expression in both passes of a repeated hour, so both are filtered here.
 */

/** What a schedule's slots depend on, compiled once. */
export interface SlotSpec {
  readonly cron: Cron;
  readonly offsets: Intl.DateTimeFormat;
  /** No slot before this (ms), or null. */
  readonly startAt: number | null;
  /** No slot after this (ms), or null. */
  readonly endAt: number | null;
}

export type CronCompileResult =
  { ok: true; spec: SlotSpec } | { ok: false; message: string; field: "cron" | "timezone" };

/** At most this many instants croner names may be dropped (DST) in search of the next slot. */
const MAX_DROPPED_CANDIDATES = 16;
const DAY_MS = 86_400_000;
/** The fields of a local time, each as a number. */
const LOCAL_TIME_FIELDS = {
  year: "numeric",
  month: "numeric",
  day: "numeric",
  hour: "numeric",
  minute: "numeric",
  second: "numeric",
} as const;

/** Compiles a schedule's cron, time zone and bounds; an invalid expression or unknown zone says which and why. */
export function compileSchedule(
  schedule: Pick<Schedule, "cron" | "timezone" | "start_at" | "end_at">,
): CronCompileResult {
  const timezone = schedule.timezone ?? "UTC";
  let offsets: Intl.DateTimeFormat;
  try {
    offsets = new Intl.DateTimeFormat("en-US", { timeZone: timezone, hourCycle: "h23", ...LOCAL_TIME_FIELDS });
  } catch {
    return { ok: false, field: "timezone", message: `"${timezone}" is not an IANA time zone name` };
  }
  try {
    const cron = new Cron(schedule.cron, { timezone, mode: "5-part" });
    const startAt = schedule.start_at === undefined ? null : Date.parse(schedule.start_at);
    const endAt = schedule.end_at === undefined ? null : Date.parse(schedule.end_at);
    return { ok: true, spec: { cron, offsets, startAt, endAt } };
  } catch (error) {
    const message = error instanceof Error ? error.message.replace(/^CronPattern: /, "") : String(error);
    return { ok: false, field: "cron", message };
  }
}

/** The first slot strictly after `after` (ms), or null when there is none (past `end_at`, or a date that never comes). */
export function nextSlot(spec: SlotSpec, after: number): number | null {
  let from = spec.startAt !== null && after < spec.startAt ? spec.startAt - 1 : after;
  for (let dropped = 0; dropped <= MAX_DROPPED_CANDIDATES; dropped += 1) {
    const candidate = spec.cron.nextRun(new Date(from))?.getTime();
    if (candidate === undefined || (spec.endAt !== null && candidate > spec.endAt)) {
      return null;
    }
    if (isKept(spec, candidate)) {
      return candidate;
    }
    from = candidate;
  }
  return null;
}

/** The next `count` slots after `after`. */
export function nextSlots(spec: SlotSpec, after: number, count: number): number[] {
  const slots: number[] = [];
  let at = after;
  while (slots.length < count) {
    const next = nextSlot(spec, at);
    if (next === null) {
      break;
    }
    slots.push(next);
    at = next;
  }
  return slots;
}

/** The slots from `from` to `to` (both inclusive), at most `limit`; `more` says the range holds more. */
export function slotsBetween(
  spec: SlotSpec,
  from: number,
  to: number,
  limit: number,
): { slots: number[]; more: boolean } {
  const slots: number[] = [];
  for (let next = nextSlot(spec, from - 1); next !== null && next <= to; next = nextSlot(spec, next)) {
    if (slots.length === limit) {
      return { slots, more: true };
    }
    slots.push(next);
  }
  return { slots, more: false };
}

/** A slot croner names is kept when its local time is the one the expression asks for, at its first occurrence. */
function isKept(spec: SlotSpec, instant: number): boolean {
  return spec.cron.match(new Date(instant)) && !isRepeatedLocalTime(spec.offsets, instant);
}

/**
 * Whether the local time at `instant` already occurred earlier (the second
 * pass through an hour the clocks went back over). Zones change their offset
 * at most once a day, so the offset a day earlier is the one before the change.
 */
export function isRepeatedLocalTime(offsets: Intl.DateTimeFormat, instant: number): boolean {
  const offset = offsetAt(offsets, instant);
  const before = offsetAt(offsets, instant - DAY_MS);
  if (before <= offset) {
    return false;
  }
  const earlier = instant + offset - before;
  return earlier < instant && offsetAt(offsets, earlier) === before;
}

/** The zone's offset from UTC at `instant` (ms), read from the local time `Intl` formats. */
function offsetAt(offsets: Intl.DateTimeFormat, instant: number): number {
  const seconds = Math.floor(instant / 1000) * 1000;
  const part: Record<string, number> = {};
  for (const { type, value } of offsets.formatToParts(new Date(seconds))) {
    part[type] = Number(value);
  }
  const local = Date.UTC(
    part.year ?? 1970,
    (part.month ?? 1) - 1,
    part.day ?? 1,
    part.hour ?? 0,
    part.minute ?? 0,
    part.second ?? 0,
  );
  return local - seconds;
}

/**
 * How long after its slot a slot's run starts, 0 to `jitterMs`: fixed per
 * (schedule, slot), so a restart waits the same, and spread evenly over the range.
 */
export function jitterFor(scheduleId: string, slot: number, jitterMs: number): number {
  if (jitterMs <= 0) {
    return 0;
  }
  // FNV-1a, 32 bits: enough spread for a delay, and synchronous.
  let hash = 0x811c9dc5;
  for (const char of `${scheduleId}\n${slot}`) {
    hash ^= char.charCodeAt(0);
    hash = Math.imul(hash, 0x01000193) >>> 0;
  }
  return Math.floor((hash / 0x1_0000_0000) * (jitterMs + 1));
}
