import { describe, it } from "vitest";
import { compileSchedule, jitterFor, nextSlot, nextSlots, slotsBetween, type SlotSpec } from "../../lib/cron.ts";
import { decideOverlap, dueSlots, RECENT_SLOTS, withRecord } from "../../schedules/index.ts";
import type { Schedule, ScheduleState } from "../../schemas/schedules.ts";

/**
 * A schedule's slots (lib/cron.ts) and the schedule object's decisions
 * (schedules/decide.ts), as plain functions of the time: cron in a time zone,
 * both daylight-saving changes, catch-up, jitter and the overlap policies.
 */

function spec(schedule: Partial<Schedule> & { cron: string }): SlotSpec {
  const compiled = compileSchedule(schedule);
  if (!compiled.ok) {
    throw new Error(compiled.message);
  }
  return compiled.spec;
}

const iso = (ms: number) => new Date(ms).toISOString();
const at = (text: string) => Date.parse(text);

function stateOf(definition: Partial<Schedule>, cursor: number): ScheduleState {
  return {
    version: 1,
    definition: { id: "nightly", workflow: "report", cron: "* * * * *", ...definition },
    paused: false,
    cursor,
    inflight: null,
    buffered: null,
    last_run: null,
    backfill: null,
    recent: [],
  };
}

describe("schedule slots", () => {
  it("read the cron expression in the schedule's time zone (UTC by default)", ({ expect }) => {
    const from = at("2025-06-02T00:00:00Z");
    expect(nextSlots(spec({ cron: "0 9 * * 1-5" }), from, 2).map(iso)).toEqual([
      "2025-06-02T09:00:00.000Z",
      "2025-06-03T09:00:00.000Z",
    ]);
    // 9:00 in Berlin is 07:00 UTC in summer and 08:00 UTC in winter.
    const berlin = spec({ cron: "0 9 * * 1-5", timezone: "Europe/Berlin" });
    expect(iso(nextSlot(berlin, from) ?? 0)).toBe("2025-06-02T07:00:00.000Z");
    expect(iso(nextSlot(berlin, at("2025-12-01T00:00:00Z")) ?? 0)).toBe("2025-12-01T08:00:00.000Z");
  });

  it("skip a local time that does not exist when the clocks go forward (Europe/Berlin, 30 March 2025)", ({
    expect,
  }) => {
    // 02:00 CET became 03:00 CEST: 02:30 never happened that night.
    const fixed = spec({ cron: "30 2 * * *", timezone: "Europe/Berlin" });
    expect(nextSlots(fixed, at("2025-03-28T12:00:00Z"), 3).map(iso)).toEqual([
      "2025-03-29T01:30:00.000Z",
      "2025-03-31T00:30:00.000Z",
      "2025-04-01T00:30:00.000Z",
    ]);
    const interval = spec({ cron: "*/30 * * * *", timezone: "Europe/Berlin" });
    // 01:30 CET, then 03:00 CEST: 02:00 and 02:30 local do not exist.
    expect(nextSlots(interval, at("2025-03-30T00:15:00Z"), 3).map(iso)).toEqual([
      "2025-03-30T00:30:00.000Z",
      "2025-03-30T01:00:00.000Z",
      "2025-03-30T01:30:00.000Z",
    ]);
  });

  it("run a local time that occurs twice when the clocks go back once, at its first occurrence (Europe/Berlin, 26 October 2025)", ({
    expect,
  }) => {
    // 03:00 CEST became 02:00 CET: 02:30 happened at 00:30 UTC and again at 01:30 UTC.
    const fixed = spec({ cron: "30 2 * * *", timezone: "Europe/Berlin" });
    expect(nextSlots(fixed, at("2025-10-25T12:00:00Z"), 2).map(iso)).toEqual([
      "2025-10-26T00:30:00.000Z",
      "2025-10-27T01:30:00.000Z",
    ]);
    const interval = spec({ cron: "*/30 * * * *", timezone: "Europe/Berlin" });
    // 02:00 CEST, 02:30 CEST, then (02:00 and 02:30 CET passed over) 03:00 CET.
    expect(nextSlots(interval, at("2025-10-25T23:45:00Z"), 3).map(iso)).toEqual([
      "2025-10-26T00:00:00.000Z",
      "2025-10-26T00:30:00.000Z",
      "2025-10-26T02:00:00.000Z",
    ]);
  });

  it("keep to start_at and end_at, both inclusive", ({ expect }) => {
    const bounded = spec({ cron: "0 * * * *", start_at: "2025-01-01T03:00:00Z", end_at: "2025-01-01T05:00:00Z" });
    expect(slotsBetween(bounded, 0, at("2026-01-01T00:00:00Z"), 10)).toEqual({
      slots: [at("2025-01-01T03:00:00Z"), at("2025-01-01T04:00:00Z"), at("2025-01-01T05:00:00Z")],
      more: false,
    });
  });

  it("count a range's slots up to a limit, and say when it holds more", ({ expect }) => {
    const minutely = spec({ cron: "* * * * *" });
    const from = at("2025-01-01T00:00:00Z");
    expect(slotsBetween(minutely, from, from + 4 * 60_000, 10).slots).toHaveLength(5);
    expect(slotsBetween(minutely, from, from + 4 * 60_000, 3)).toEqual({
      slots: [from, from + 60_000, from + 120_000],
      more: true,
    });
  });

  it("refuse an expression that does not parse, six fields, and an unknown time zone", ({ expect }) => {
    expect(compileSchedule({ cron: "61 * * * *" })).toMatchObject({ ok: false, field: "cron" });
    expect(compileSchedule({ cron: "0 * * * * *" })).toMatchObject({ ok: false, field: "cron" });
    expect(compileSchedule({ cron: "* * * * *", timezone: "Mars/Olympus" })).toMatchObject({
      ok: false,
      field: "timezone",
    });
  });

  it("delay each slot by a jitter fixed per schedule and slot, within jitter_ms", ({ expect }) => {
    const slot = at("2025-01-01T00:00:00Z");
    expect(jitterFor("nightly", slot, 0)).toBe(0);
    const delays = Array.from({ length: 50 }, (_, i) => jitterFor("nightly", slot + i * 60_000, 10_000));
    expect(delays.every((delay) => delay >= 0 && delay <= 10_000)).toBe(true);
    expect(new Set(delays).size).toBeGreaterThan(40);
    expect(jitterFor("nightly", slot, 10_000)).toBe(jitterFor("nightly", slot, 10_000));
  });
});

describe("schedule decisions", () => {
  const minute = at("2030-01-01T00:00:00Z");

  it("start the slots whose time came within the catch-up window, and mark older ones missed", ({ expect }) => {
    const state = stateOf({ cron: "* * * * *" }, minute - 1);
    // At 00:05:30 with the default one-minute window: 00:00 to 00:04 are missed, 00:05 is due.
    const { due, cursor } = dueSlots(state, spec({ cron: "* * * * *" }), minute + 5 * 60_000 + 30_000);
    expect(due.map(({ slot, missed }) => [iso(slot), missed])).toEqual([
      ["2030-01-01T00:00:00.000Z", true],
      ["2030-01-01T00:01:00.000Z", true],
      ["2030-01-01T00:02:00.000Z", true],
      ["2030-01-01T00:03:00.000Z", true],
      ["2030-01-01T00:04:00.000Z", true],
      ["2030-01-01T00:05:00.000Z", false],
    ]);
    expect(cursor).toBe(minute + 5 * 60_000);
    const wide = stateOf({ cron: "* * * * *", catchup_window_ms: 10 * 60_000 }, minute - 1);
    const caught = dueSlots(wide, spec({ cron: "* * * * *" }), minute + 5 * 60_000 + 30_000).due;
    expect(caught.every(({ missed }) => !missed)).toBe(true);
  });

  it("wait for a slot's jitter before it is due", ({ expect }) => {
    const state = stateOf({ cron: "* * * * *", jitter_ms: 30_000 }, minute - 1);
    const delay = jitterFor("nightly", minute, 30_000);
    expect(dueSlots(state, spec({ cron: "* * * * *" }), minute + delay - 1).due).toEqual([]);
    expect(dueSlots(state, spec({ cron: "* * * * *" }), minute + delay).due).toEqual([{ slot: minute, missed: false }]);
  });

  it("decide a slot by the overlap policy only while the previous run is going", ({ expect }) => {
    for (const policy of ["skip", "buffer_one", "allow_all", "cancel_other"] as const) {
      expect(decideOverlap(policy, false, false)).toBe("start");
    }
    expect(decideOverlap("skip", true, false)).toBe("skip");
    expect(decideOverlap("buffer_one", true, false)).toBe("buffer");
    expect(decideOverlap("buffer_one", true, true)).toBe("skip");
    expect(decideOverlap("allow_all", true, false)).toBe("start");
    expect(decideOverlap("cancel_other", true, false)).toBe("cancel_then_start");
  });

  it("keep one record per slot, newest first, at most the recent limit", ({ expect }) => {
    let recent = withRecord([], { scheduled_at: iso(minute), run_id: null, status: "buffered", source: "cron" });
    recent = withRecord(recent, { scheduled_at: iso(minute), run_id: "run_1", status: "queued", source: "buffer" });
    expect(recent).toEqual([{ scheduled_at: iso(minute), run_id: "run_1", status: "queued", source: "buffer" }]);
    for (let i = 1; i <= RECENT_SLOTS + 5; i += 1) {
      recent = withRecord(recent, {
        scheduled_at: iso(minute + i * 60_000),
        run_id: null,
        status: "skipped",
        source: "cron",
      });
    }
    expect(recent).toHaveLength(RECENT_SLOTS);
    expect(recent[0]?.scheduled_at).toBe(iso(minute + (RECENT_SLOTS + 5) * 60_000));
  });
});
