import { describe, it } from "vitest";
import { CliError } from "../../cli/api.ts";
import { scheduleCommand, schedulesCommand } from "../../cli/schedules.ts";
import { recording } from "./cli-recording.ts";

/** `trellis schedules` and `trellis schedule <id> …` against a recording stand-in for the API (docs/cli.md). */

const status = (paused: boolean) => ({
  id: "nightly",
  version: 2,
  paused,
  next: ["2026-03-03T01:30:00.000Z", "2026-03-04T01:30:00.000Z"],
  recent: [{ scheduled_at: "2026-03-02T01:30:00.000Z", run_id: "run_1", status: "completed", source: "cron" }],
});

describe("trellis schedules", () => {
  it("lists each schedule with its state, next slot and latest slot", async ({ expect }) => {
    const { io, calls, printed } = recording({
      "/v1/schedules?limit=100": { definitions: [{ kind: "schedules", id: "nightly", version: 2 }], next_cursor: null },
      "/v1/schedules/nightly/status": status(false),
    });
    expect(await schedulesCommand(io)).toBe(0);
    expect(calls).toEqual(["GET /v1/schedules?limit=100", "GET /v1/schedules/nightly/status"]);
    expect(printed()).toBe(
      "nightly@2                active  next 2026-03-03T01:30:00.000Z  last 2026-03-02T01:30:00.000Z completed\n",
    );
  });
});

describe("trellis schedule", () => {
  it("pauses and resumes through the control routes, printing the state after", async ({ expect }) => {
    const { io, calls, printed } = recording({
      "/v1/schedules/nightly/pause": status(true),
      "/v1/schedules/nightly/resume": status(false),
    });
    await scheduleCommand(io, "nightly", "pause", {});
    await scheduleCommand(io, "nightly", "resume", {});
    expect(calls).toEqual(["POST /v1/schedules/nightly/pause", "POST /v1/schedules/nightly/resume"]);
    expect(printed()).toMatch(/^nightly@2 +paused {2}next .*\nnightly@2 +active {2}next /);
  });

  it("triggers one run and prints its slot, or exits 1 when the start was refused", async ({ expect }) => {
    const started = recording({
      "/v1/schedules/nightly/trigger": {
        scheduled_at: "2026-03-02T09:00:00.000Z",
        run_id: "run_2",
        status: "queued",
        source: "trigger",
      },
    });
    expect(await scheduleCommand(started.io, "nightly", "trigger", {})).toBe(0);
    expect(started.printed()).toBe("2026-03-02T09:00:00.000Z  run_2  queued\n");
    const refused = recording({
      "/v1/schedules/nightly/trigger": {
        scheduled_at: "2026-03-02T09:00:00.000Z",
        run_id: null,
        status: "start_failed",
        reason: "run.invalid_input: no",
        source: "trigger",
      },
    });
    expect(await scheduleCommand(refused.io, "nightly", "trigger", {})).toBe(1);
    expect(refused.printed()).toBe("2026-03-02T09:00:00.000Z  -  start_failed  run.invalid_input: no\n");
  });

  it("backfills a range with --from, --to and --overlap, and needs both ends", async ({ expect }) => {
    const { io, bodies, printed } = recording({
      "/v1/schedules/nightly/backfill": {
        slots: 3,
        first: "2026-03-01T01:30:00.000Z",
        last: "2026-03-03T01:30:00.000Z",
      },
    });
    const range = { from: "2026-03-01T00:00:00Z", to: "2026-03-03T23:59:00Z" };
    await scheduleCommand(io, "nightly", "backfill", { ...range, overlap: "allow_all" });
    expect(bodies).toEqual([{ ...range, overlap: "allow_all" }]);
    expect(printed()).toBe("queued 3 slot(s): 2026-03-01T01:30:00.000Z … 2026-03-03T01:30:00.000Z\n");
    await expect(scheduleCommand(io, "nightly", "backfill", { from: range.from })).rejects.toBeInstanceOf(CliError);
  });
});
