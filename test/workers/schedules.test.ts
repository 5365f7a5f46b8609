import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import type { ScheduleHub } from "../../schedules/hub.ts";
import { MAX_BACKFILL_SLOTS } from "../../schedules/hub.ts";
import { startSlot, type StartRun } from "../../schedules/index.ts";
import { startTriggeredRun } from "../../src/start.ts";
import type { SlotRecord } from "../../schemas/schedules.ts";
import { api, journal, register, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Schedules (schedules/): one Durable Object per schedule, woken by its alarm
 * for each slot. The object's clock is set by the test (`now`), so a slot's
 * time comes when the test says; its alarm is then run at once
 * (`runDurableObjectAlarm`). Times are in 2031, so no alarm fires by itself.
 */

const T0 = Date.parse("2031-01-01T00:00:00Z");
const MINUTE = 60_000;
const iso = (ms: number) => new Date(ms).toISOString();

function hubStub(id: string) {
  return env.SCHEDULE_HUB.get(env.SCHEDULE_HUB.idFromName(id));
}

/** Sets the schedule object's clock to `ms` (a new instance after a restart starts on the real clock again). */
function setClock(id: string, ms: number): Promise<void> {
  return runInDurableObject(hubStub(id), (instance: ScheduleHub) => {
    instance.now = () => ms;
  });
}

/** Moves the clock to `ms` and runs the object's alarm then; answers whether an alarm was set. */
async function wakeAt(id: string, ms: number): Promise<boolean> {
  await setClock(id, ms);
  return runDurableObjectAlarm(hubStub(id));
}

/** A workflow that ends at once with its input as output, or (`waits`) one that waits for a human answer. */
function workflow(id: string, waits = false) {
  const action = waits
    ? { kind: "human", implementation: { prompt_template: "go?", input_schema: { type: "object" } } }
    : { kind: "context", implementation: { updates: [{ path: "echo", expr: "input" }] } };
  return {
    id,
    nodes: { main: { task: { steps: [{ ref: "s", action, input_mapping: { seen: "$.input" } }] } } },
  };
}

/** Registers a workflow and a schedule of it (per minute from T0 unless `schedule` says otherwise). */
async function registerSchedule(
  schedule: Record<string, unknown> = {},
  options: { waits?: boolean } = {},
): Promise<{ id: string; workflowId: string }> {
  const id = uniqueId("sched");
  const workflowId = uniqueId("wf");
  await register({
    workflows: [workflow(workflowId, options.waits)],
    schedules: [{ id, workflow: workflowId, cron: "* * * * *", start_at: iso(T0), ...schedule }],
  });
  return { id, workflowId };
}

async function status(id: string): Promise<{ paused: boolean; next: string[]; recent: SlotRecord[] }> {
  const response = await api("GET", `/v1/schedules/${id}/status`);
  if (response.status !== 200) {
    throw new Error(JSON.stringify(response.json));
  }
  return response.json;
}

/** The record of one slot in the schedule's recent slots. */
async function slot(id: string, ms: number): Promise<SlotRecord | undefined> {
  return (await status(id)).recent.find((record) => record.scheduled_at === iso(ms));
}

/** The run ids the run index lists for a workflow, once it lists at least `count`. */
async function runsOf(workflowId: string, count: number): Promise<string[]> {
  let ids: string[] = [];
  await vi.waitUntil(
    async () => {
      ids = (await api("GET", `/v1/runs?workflow=${workflowId}`)).json.runs.map(
        (run: { run_id: string }) => run.run_id,
      );
      return ids.length >= count;
    },
    { timeout: 10_000 },
  );
  return ids.sort();
}

describe("a per-minute schedule", () => {
  it("starts exactly one run per slot across a restart of its object between slots and two firings of one slot at once", async ({
    expect,
  }) => {
    const { id, workflowId } = await registerSchedule({
      input: { at: { expr: "schedule.scheduled_at" }, version: { expr: "schedule.version" }, fixed: 1 },
    });
    expect((await status(id)).next.slice(0, 2)).toEqual([iso(T0), iso(T0 + MINUTE)]);

    expect(await wakeAt(id, T0 + 1_000)).toBe(true);
    const first = await slot(id, T0);
    expect(first).toMatchObject({ status: expect.any(String), source: "cron" });
    const firstRun = await waitForRun(String(first?.run_id));
    expect(firstRun.input).toEqual({ at: iso(T0), version: 1, fixed: 1 });
    expect(firstRun.trigger).toEqual({ kind: "schedule", schedule: id, version: 1, scheduled_at: iso(T0) });

    // A restart between slots: the next instance takes up where the stored state says.
    await evictDurableObject(hubStub(id));
    expect(await wakeAt(id, T0 + MINUTE + 1_000)).toBe(true);

    // The third slot fired three times at once: its alarm, and two backfills of that very slot that
    // start it whatever runs (allow_all); then the backfills' own wakes.
    await setClock(id, T0 + 2 * MINUTE + 1_000);
    const stub = hubStub(id);
    const third = { from: iso(T0 + 2 * MINUTE), to: iso(T0 + 2 * MINUTE), overlap: "allow_all" };
    await Promise.all([
      runDurableObjectAlarm(stub),
      api("POST", `/v1/schedules/${id}/backfill`, third),
      api("POST", `/v1/schedules/${id}/backfill`, third),
    ]);
    await Promise.all([runDurableObjectAlarm(stub), runDurableObjectAlarm(stub)]);

    const recent = (await status(id)).recent.filter((record) => record.run_id !== null);
    expect(recent.map((record) => record.scheduled_at)).toEqual([iso(T0 + 2 * MINUTE), iso(T0 + MINUTE), iso(T0)]);
    const runIds = recent.map((record) => String(record.run_id)).sort();
    expect(new Set(runIds).size).toBe(3);
    // The run index holds exactly those three runs of the workflow: none twice, none more.
    expect(await runsOf(workflowId, 3)).toEqual(runIds);
    const scheduled = await api("GET", `/v1/runs?workflow=${workflowId}&trigger=schedule`);
    expect(scheduled.json.runs).toHaveLength(3);
  });

  it("finishes a start cut off by a restart with the same run, never a second", async ({ expect }) => {
    const { id, workflowId } = await registerSchedule();
    await setClock(id, T0 + 1_000);
    // The run is created, then the object dies before it records the slot.
    await runInDurableObject(hubStub(id), (instance: ScheduleHub) => {
      const start = instance.startRun;
      instance.startRun = async (request) => {
        await start(request);
        throw new Error("the object was reset");
      };
    });
    await expect(runDurableObjectAlarm(hubStub(id))).rejects.toThrow("the object was reset");
    await evictDurableObject(hubStub(id));
    expect(await wakeAt(id, T0 + 2_000)).toBe(true);
    const record = await slot(id, T0);
    expect(record?.run_id).toMatch(/^run_/);
    expect(await runsOf(workflowId, 1)).toEqual([record?.run_id]);
  });
});

describe("a slot's identity", () => {
  it("is its run's: two starts of one slot at once, as two firings anywhere would make, start one run", async ({
    expect,
  }) => {
    const { id, workflowId } = await registerSchedule();
    const definition = (await api("GET", `/v1/schedules/${id}`)).json.definition;
    const start: StartRun = (request) => startTriggeredRun(env, request);
    const [a, b] = await Promise.all([
      startSlot(start, definition, 1, T0, "cron"),
      startSlot(start, definition, 1, T0, "backfill"),
    ]);
    expect(a.run_id).toMatch(/^run_/);
    expect(b.run_id).toBe(a.run_id);
    expect(await runsOf(workflowId, 1)).toEqual([a.run_id]);
  });
});

describe("catch-up", () => {
  it("starts a slot inside the window late, and skips and records older ones instead of firing them in a burst", async ({
    expect,
  }) => {
    const { id, workflowId } = await registerSchedule();
    await wakeAt(id, T0 + 50_000); // 50 s late, inside the default 60 s window
    expect((await slot(id, T0))?.run_id).toMatch(/^run_/);
    // The object sleeps through three slots; it wakes 10 s after the fifth.
    await wakeAt(id, T0 + 4 * MINUTE + 10_000);
    const recent = (await status(id)).recent;
    expect(recent.map(({ scheduled_at, status: state, reason }) => [scheduled_at, state, reason])).toEqual([
      [iso(T0 + 4 * MINUTE), expect.not.stringMatching(/^skipped$/), undefined],
      [iso(T0 + 3 * MINUTE), "skipped", "missed: later than the catch-up window (60000 ms)"],
      [iso(T0 + 2 * MINUTE), "skipped", "missed: later than the catch-up window (60000 ms)"],
      [iso(T0 + MINUTE), "skipped", "missed: later than the catch-up window (60000 ms)"],
      [iso(T0), expect.any(String), undefined],
    ]);
    expect(await runsOf(workflowId, 2)).toHaveLength(2);
  });

  it("starts every slot within a wider catch-up window", async ({ expect }) => {
    const { id, workflowId } = await registerSchedule({ catchup_window_ms: 10 * MINUTE });
    await wakeAt(id, T0 + 3 * MINUTE + 10_000);
    const started = (await status(id)).recent.filter((record) => record.run_id !== null);
    expect(started.map((record) => record.scheduled_at)).toEqual([3, 2, 1, 0].map((n) => iso(T0 + n * MINUTE)));
    expect(await runsOf(workflowId, 4)).toHaveLength(4);
  });
});

describe("overlap policies, while the previous run waits", () => {
  /** A schedule whose runs wait for an answer, its first slot started. */
  async function firstRunWaiting(overlap?: string) {
    const schedule = await registerSchedule(overlap === undefined ? {} : { overlap }, { waits: true });
    await wakeAt(schedule.id, T0 + 1_000);
    const first = String((await slot(schedule.id, T0))?.run_id);
    await waitForRun(first, (run) => run.status === "waiting");
    return { ...schedule, first };
  }

  it("skip (the default): the slot is skipped and recorded with the run it waited on", async ({ expect }) => {
    const { id, first } = await firstRunWaiting();
    await wakeAt(id, T0 + MINUTE + 1_000);
    expect(await slot(id, T0 + MINUTE)).toEqual({
      scheduled_at: iso(T0 + MINUTE),
      run_id: null,
      status: "skipped",
      reason: `overlap: run ${first} has not ended`,
      source: "cron",
    });
  });

  it("buffer_one: one slot waits for the run to end, a further one is skipped, and the buffered one starts after", async ({
    expect,
  }) => {
    const { id, first, workflowId } = await firstRunWaiting("buffer_one");
    await wakeAt(id, T0 + MINUTE + 1_000);
    expect(await slot(id, T0 + MINUTE)).toMatchObject({ run_id: null, status: "buffered" });
    await wakeAt(id, T0 + 2 * MINUTE + 1_000);
    expect(await slot(id, T0 + 2 * MINUTE)).toMatchObject({ run_id: null, status: "skipped" });
    // Still going: the buffered slot keeps waiting.
    await wakeAt(id, T0 + 2 * MINUTE + 20_000);
    expect(await slot(id, T0 + MINUTE)).toMatchObject({ status: "buffered" });
    expect((await api("POST", `/v1/runs/${first}/cancel`)).status).toBe(200);
    await wakeAt(id, T0 + 2 * MINUTE + 40_000);
    const buffered = await slot(id, T0 + MINUTE);
    expect(buffered).toMatchObject({ run_id: expect.stringMatching(/^run_/), source: "buffer" });
    expect(await runsOf(workflowId, 2)).toEqual([first, String(buffered?.run_id)].sort());
  });

  it("allow_all: the slot starts a run beside the one still going", async ({ expect }) => {
    const { id, first } = await firstRunWaiting("allow_all");
    await wakeAt(id, T0 + MINUTE + 1_000);
    const second = String((await slot(id, T0 + MINUTE))?.run_id);
    expect(second).toMatch(/^run_/);
    expect(second).not.toBe(first);
    expect((await api("GET", `/v1/runs/${first}`)).json.status).toBe("waiting");
  });

  it("cancel_other: the run still going is cancelled and the slot starts its own", async ({ expect }) => {
    const { id, first } = await firstRunWaiting("cancel_other");
    await wakeAt(id, T0 + MINUTE + 1_000);
    const second = String((await slot(id, T0 + MINUTE))?.run_id);
    expect(second).toMatch(/^run_/);
    const cancelled = await waitForRun(first);
    expect(cancelled.status).toBe("cancelled");
    const statuses = (await journal(first)).filter((entry) => entry.kind === "run.status");
    expect(statuses.at(-1)?.body).toMatchObject({
      to: "cancelled",
      reason: `cancelled by schedule ${id}: the slot ${iso(T0 + MINUTE)} started`,
    });
    expect((await api("GET", `/v1/runs/${second}`)).json.status).not.toBe("cancelled");
  });
});

describe("schedule controls", () => {
  it("backfill starts one run per slot of the range, by the overlap policy given", async ({ expect }) => {
    // Yearly at 03:00 on 1 January: the range 2020..2024 holds five slots.
    const { id, workflowId } = await registerSchedule({ cron: "0 3 1 1 *", start_at: undefined });
    const answer = await api("POST", `/v1/schedules/${id}/backfill`, {
      from: "2020-01-01T00:00:00Z",
      to: "2024-12-31T00:00:00Z",
      overlap: "allow_all",
    });
    expect(answer.status).toBe(202);
    expect(answer.json).toEqual({ slots: 5, first: "2020-01-01T03:00:00.000Z", last: "2024-01-01T03:00:00.000Z" });
    // The object's alarm goes on with the backfill at once (its clock is the real one here).
    await vi.waitUntil(async () => (await status(id)).recent.filter((r) => r.run_id !== null).length === 5, {
      timeout: 10_000,
    });
    const records = (await status(id)).recent;
    expect(records.every((record) => record.source === "backfill")).toBe(true);
    expect(await runsOf(workflowId, 5)).toHaveLength(5);
  });

  it("backfill by the schedule's skip policy starts the first slot and skips those that find it going", async ({
    expect,
  }) => {
    const { id, workflowId } = await registerSchedule({ cron: "0 3 1 1 *", start_at: undefined }, { waits: true });
    const answer = await api("POST", `/v1/schedules/${id}/backfill`, {
      from: "2020-01-01T00:00:00Z",
      to: "2022-12-31T00:00:00Z",
    });
    expect(answer.json.slots).toBe(3);
    await vi.waitUntil(async () => (await status(id)).recent.length === 3, { timeout: 10_000 });
    const records = (await status(id)).recent;
    expect(records.map((record) => record.status)).toEqual(["skipped", "skipped", expect.any(String)]);
    expect(records[2]?.run_id).toMatch(/^run_/);
    expect(await runsOf(workflowId, 1)).toEqual([records[2]?.run_id]);
  });

  it("refuses a backfill of more than the slot limit, a reversed range and a malformed body, with paths", async ({
    expect,
  }) => {
    const { id } = await registerSchedule();
    const tooMany = await api("POST", `/v1/schedules/${id}/backfill`, {
      from: iso(T0),
      to: iso(T0 + MAX_BACKFILL_SLOTS * MINUTE),
    });
    expect(tooMany.status).toBe(400);
    expect(tooMany.json.error.code).toBe("schedule.invalid_backfill");
    expect(tooMany.json.error.details).toEqual([
      { path: "to", code: "schedule.backfill_too_large", message: expect.stringContaining("more than 1000 slots") },
    ]);
    const reversed = await api("POST", `/v1/schedules/${id}/backfill`, { from: iso(T0 + MINUTE), to: iso(T0) });
    expect(reversed.status).toBe(400);
    expect(reversed.json.error.details[0].path).toBe("to");
    const malformed = await api("POST", `/v1/schedules/${id}/backfill`, { from: "yesterday" });
    expect(malformed.status).toBe(400);
    expect(malformed.json.error.details.map((detail: { path: string }) => detail.path).sort()).toEqual(["from", "to"]);
  });

  it("pause stops the slots, resume starts them again from now, and trigger starts one run now", async ({ expect }) => {
    const { id } = await registerSchedule();
    const paused = await api("POST", `/v1/schedules/${id}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.json.paused).toBe(true);
    // Paused: the slots' time comes and goes; nothing starts (no alarm is even set).
    await setClock(id, T0 + 3 * MINUTE + 1_000);
    expect(await runDurableObjectAlarm(hubStub(id))).toBe(false);
    const resumed = await api("POST", `/v1/schedules/${id}/resume`);
    expect(resumed.json.paused).toBe(false);
    expect(resumed.json.next).toHaveLength(5);
    expect(resumed.json.next.slice(0, 2)).toEqual([iso(T0 + 4 * MINUTE), iso(T0 + 5 * MINUTE)]);
    const triggered = await api("POST", `/v1/schedules/${id}/trigger`);
    expect(triggered.status).toBe(200);
    expect(triggered.json).toMatchObject({
      scheduled_at: iso(T0 + 3 * MINUTE + 1_000),
      run_id: expect.stringMatching(/^run_/),
      source: "trigger",
    });
    await wakeAt(id, T0 + 4 * MINUTE + 1_000);
    const recent = (await status(id)).recent;
    expect(recent.map((record) => record.scheduled_at)).toEqual([iso(T0 + 4 * MINUTE), iso(T0 + 3 * MINUTE + 1_000)]);
  });

  it("answers 404 for a schedule that is not registered", async ({ expect }) => {
    for (const [method, path] of [
      ["GET", "/v1/schedules/nothing-here/status"],
      ["POST", "/v1/schedules/nothing-here/trigger"],
      ["GET", "/v1/schedules/Not%20an%20id/status"],
    ] as const) {
      const response = await api(method, path);
      expect(response.status).toBe(404);
      expect(response.json.error.code).toBe("schedule.not_found");
    }
  });
});

describe("schedule definitions", () => {
  it("a new version is the active one at once; registering the same content again changes nothing", async ({
    expect,
  }) => {
    const { id, workflowId } = await registerSchedule({ cron: "0 * * * *" });
    expect((await status(id)).next[1]).toBe(iso(T0 + 60 * MINUTE));
    const again = await api("POST", "/v1/definitions", {
      schedules: [{ id, workflow: workflowId, cron: "0 * * * *", start_at: iso(T0) }],
    });
    expect(again.json.created).toEqual([{ kind: "schedules", id, version: 1, existing: true }]);
    await register({ schedules: [{ id, workflow: workflowId, cron: "*/5 * * * *", start_at: iso(T0) }] });
    const current = await api("GET", `/v1/schedules/${id}/status`);
    expect(current.json.version).toBe(2);
    expect(current.json.next.slice(0, 2)).toEqual([iso(T0), iso(T0 + 5 * MINUTE)]);
    expect((await api("GET", `/v1/schedules/${id}`)).json.version).toBe(2);
  });

  it("registration refuses a cron that does not parse or never comes, an unknown zone or workflow, and input CEL over other variables", async ({
    expect,
  }) => {
    const workflowId = uniqueId("wf");
    await register({ workflows: [workflow(workflowId)] });
    const policy = await api("POST", "/v1/definitions", {
      schedules: [{ id: uniqueId("f"), workflow: workflowId, cron: "0 9 * * *", overlap: "queue" }],
    });
    expect(policy.status).toBe(400);
    expect(policy.json.error.details.map((detail: { path: string }) => detail.path)).toEqual(["schedules.0.overlap"]);
    const checked = await api("POST", "/v1/definitions", {
      schedules: [
        { id: uniqueId("a"), workflow: workflowId, cron: "0 9 * *" },
        { id: uniqueId("b"), workflow: workflowId, cron: "0 9 * * *", timezone: "Europe/Atlantis" },
        { id: uniqueId("c"), workflow: "no-such-workflow", cron: "0 9 * * *" },
        { id: uniqueId("d"), workflow: workflowId, cron: "0 0 30 2 *" },
        { id: uniqueId("e"), workflow: workflowId, cron: "0 9 * * *", input: { n: { expr: "input.n" } } },
      ],
    });
    expect(checked.status).toBe(400);
    expect(
      checked.json.error.details.map((detail: { path: string; code: string }) => [detail.path, detail.code]),
    ).toEqual([
      ["schedules.0.cron", "definition.invalid_cron"],
      ["schedules.1.timezone", "definition.invalid_timezone"],
      ["schedules.2.workflow", "definition.unknown_reference"],
      ["schedules.3.cron", "definition.invalid_cron"],
      ["schedules.4.input.n.expr", "definition.invalid_cel"],
    ]);
  });

  it("a slot whose input the workflow refuses is recorded as start_failed with the code, and the schedule goes on", async ({
    expect,
  }) => {
    const id = uniqueId("sched");
    const workflowId = uniqueId("wf");
    await register({
      workflows: [{ ...workflow(workflowId), input_schema: { type: "object", required: ["report"] } }],
      schedules: [{ id, workflow: workflowId, cron: "* * * * *", start_at: iso(T0) }],
    });
    await wakeAt(id, T0 + 1_000);
    const record = await slot(id, T0);
    expect(record).toMatchObject({ run_id: null, status: "start_failed" });
    expect(record?.reason).toMatch(/^run\.invalid_input: /);
    expect((await status(id)).next[0]).toBe(iso(T0 + MINUTE));
  });
});
