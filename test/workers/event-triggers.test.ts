import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import type { EventHub } from "../../events/hub.ts";
import { sendEvents } from "../../events/index.ts";
import { EngineError } from "../../lib/errors.ts";
import type { EventTriggers } from "../../schemas/events.ts";
import { api, detailsOf, journal, register, uniqueId, waitForRun } from "./helpers.ts";

/** A workflow that runs one step and keeps its input; `extra` adds its triggers and input_schema. */
const triggered = (id: string, extra: Record<string, unknown>) => ({
  id,
  nodes: {
    only: {
      task: {
        steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } }],
      },
    },
  },
  ...extra,
});

/** The hub of a name that starts its triggered runs (shard 0: the name itself). */
const hub = (name: string) => env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name));

async function triggersOf(name: string, eventId: string): Promise<EventTriggers> {
  const answer = await hub(name).triggersOf(name, eventId);
  if (!answer.ok) {
    throw new Error(JSON.stringify(answer.error));
  }
  return answer.value;
}

/** Polls what an event's triggers did until every start is settled (none pending, the event matched). */
async function settledTriggers(name: string, eventId: string): Promise<EventTriggers> {
  let last: EventTriggers | undefined;
  await vi.waitUntil(
    async () => {
      last = await triggersOf(name, eventId);
      return last.matched && last.starts.every((start) => start.status !== "pending");
    },
    { timeout: 10_000, interval: 20 },
  );
  return last as EventTriggers;
}

const send = (body: unknown) => api("POST", "/v1/events", body);

/**
 * The runs of a workflow in the run index, once it lists `runId` completed
 * (the index is written after the run's own commits: eventually consistent).
 */
async function listedRuns(workflow: string, runId: string): Promise<string[]> {
  let runs: { run_id: string; status: string }[] = [];
  await vi.waitUntil(
    async () => {
      runs = (await api("GET", `/v1/runs?workflow=${workflow}`)).json.runs;
      return runs.some((run) => run.run_id === runId && run.status === "completed");
    },
    { timeout: 10_000, interval: 50 },
  );
  return runs.map((run) => run.run_id);
}

describe("event triggers", () => {
  it("start one run per matching event with the input their mapping builds; a resent id or a false if starts none", async ({
    expect,
  }) => {
    const id = uniqueId("on-order");
    const name = uniqueId("order.created");
    await register({
      workflows: [
        triggered(id, {
          input_schema: { type: "object", required: ["order_id"] },
          triggers: [
            {
              event: name,
              if: "event.data.amount > 10",
              input: {
                order_id: "$.data.order_id",
                doubled: { expr: "event.data.amount * 2" },
                label: { template: "order {{data.order_id}} ({{name}})" },
                event_id: "$.id",
              },
            },
          ],
        }),
      ],
    });
    const first = await send({ events: [{ name, id: "o-1", data: { order_id: "A", amount: 20 } }] });
    expect(first.status).toBe(202);
    expect((await send({ name, id: "o-1", data: { order_id: "A", amount: 20 } })).json).toEqual({
      events: [{ event_id: "o-1", duplicate: true }],
    });
    await send({ name, id: "o-2", data: { order_id: "B", amount: 5 } });
    const started = await settledTriggers(name, "o-1");
    expect(started.starts).toEqual([
      { workflow: id, version: 1, status: "started", attempts: 0, run_id: expect.stringMatching(/^run_/) },
    ]);
    const run = await waitForRun(String(started.starts[0]?.run_id));
    expect(run.status).toBe("completed");
    expect(run.input).toEqual({ order_id: "A", doubled: 40, label: `order A (${name})`, event_id: "o-1" });
    // The run says what started it, in its view and in its journal's run.created.
    expect(run.trigger).toEqual({ kind: "event", event_id: "o-1", name });
    const entries = await journal(run.run_id);
    expect(entries.find((entry) => entry.kind === "run.created")?.body.trigger).toEqual(run.trigger);
    expect(entries.find((entry) => entry.kind === "attest")?.body.created_by).toBe(`event:${name}`);
    expect(await settledTriggers(name, "o-2")).toEqual({ matched: true, starts: [] });
    const viewed = await api("GET", `/v1/events/o-1/triggers?name=${encodeURIComponent(name)}`);
    expect(viewed).toMatchObject({ status: 200, json: started });
    expect((await api("GET", `/v1/events/o-3/triggers?name=${encodeURIComponent(name)}`)).json.error.code).toBe(
      "event.not_found",
    );
    expect((await api("GET", "/v1/events/o-1/triggers")).status).toBe(400);
    expect(await listedRuns(id, run.run_id)).toEqual([run.run_id]);
  });

  it("start one run of each workflow an event triggers, the event's data as input when a trigger maps none", async ({
    expect,
  }) => {
    const [a, b, name] = [uniqueId("first"), uniqueId("second"), uniqueId("signup")];
    await register({
      workflows: [
        triggered(a, { triggers: [{ event: name }] }),
        // Two triggers of one workflow on the name: the first whose if holds starts its one run.
        triggered(b, {
          triggers: [
            { event: name, if: "false" },
            { event: name, input: { who: "$.data.user" } },
          ],
        }),
      ],
    });
    await send({ name, id: "u-1", data: { user: "ada" } });
    const { starts } = await settledTriggers(name, "u-1");
    expect(starts.map((start) => [start.workflow, start.status])).toEqual(
      [
        [a, "started"],
        [b, "started"],
      ].sort((x, y) => (String(x[0]) < String(y[0]) ? -1 : 1)),
    );
    const inputs = await Promise.all(
      starts.map(async (start) => [start.workflow, (await waitForRun(String(start.run_id))).input]),
    );
    expect(Object.fromEntries(inputs)).toEqual({ [a]: { user: "ada" }, [b]: { who: "ada" } });
  });

  it("start from the hub of a name's shard 0 only, however many shards take the event", async ({ expect }) => {
    const id = uniqueId("sharded");
    const name = uniqueId("sharded.event");
    await register({ workflows: [triggered(id, { triggers: [{ event: name }] })] });
    const answer = await sendEvents({ ...env, EVENT_HUB_SHARDS: "3" }, { name, id: "s-1", data: {} });
    expect(answer.events).toEqual([{ event_id: "s-1", duplicate: false }]);
    const { starts } = await settledTriggers(name, "s-1");
    expect(starts).toEqual([expect.objectContaining({ workflow: id, status: "started" })]);
    for (const shard of [1, 2]) {
      const rows = await runInDurableObject(hub(`${name}#${shard}`), (_instance: EventHub, state) =>
        state.storage.sql
          .exec(
            `SELECT (SELECT COUNT(*) FROM events) AS events, (SELECT COUNT(*) FROM trigger_events) +
               (SELECT COUNT(*) FROM trigger_starts) AS trigger_rows`,
          )
          .one(),
      );
      expect(rows).toEqual({ events: 1, trigger_rows: 0 });
    }
  });

  it("start a run for each event of a batch larger than one round matches", async ({ expect }) => {
    const id = uniqueId("busy");
    const name = uniqueId("busy.event");
    await register({ workflows: [triggered(id, { triggers: [{ event: name, input: { n: "$.data.n" } }] })] });
    const events = Array.from({ length: 30 }, (_, n) => ({ name, id: `b-${n}`, data: { n } }));
    await send({ events });
    const settled = await Promise.all(events.map((event) => settledTriggers(name, event.id)));
    expect(settled.map(({ starts }) => starts.map((one) => one.status))).toEqual(events.map(() => ["started"]));
    const runIds = new Set(settled.map(({ starts }) => starts[0]?.run_id));
    expect(runIds.size).toBe(30);
  });

  it("record a start whose input the workflow refuses as failed, with the reason, and never try it again", async ({
    expect,
  }) => {
    const id = uniqueId("strict");
    const name = uniqueId("bad.input");
    await register({
      workflows: [
        triggered(id, {
          input_schema: { type: "object", required: ["order_id"], properties: { order_id: { type: "string" } } },
          triggers: [{ event: name, input: { order_id: "$.data.n" } }],
        }),
      ],
    });
    await send({ name, id: "b-1", data: { n: 7 } });
    const { starts } = await settledTriggers(name, "b-1");
    expect(starts).toEqual([
      { workflow: id, version: 1, status: "failed", attempts: 0, error: expect.stringContaining("run.invalid_input") },
    ]);
    // Nothing of it is due any more: the hub's outbox holds no start to retry.
    const due = await runInDurableObject(hub(name), (_instance: EventHub, state) =>
      state.storage.sql.exec("SELECT COUNT(*) AS n FROM trigger_starts WHERE due_at IS NOT NULL").one(),
    );
    expect(due.n).toBe(0);
    expect((await api("GET", `/v1/runs?workflow=${id}`)).json.runs).toHaveLength(0);
  });

  it("record a trigger whose mapping fails on the event as failed, naming the field", async ({ expect }) => {
    const id = uniqueId("unmapped");
    const name = uniqueId("no.field");
    await register({ workflows: [triggered(id, { triggers: [{ event: name, input: { x: "$.data.missing" } }] })] });
    await send({ name, id: "m-1", data: {} });
    const { starts } = await settledTriggers(name, "m-1");
    expect(starts[0]).toMatchObject({ status: "failed", error: expect.stringContaining("input.x") });
  });

  it("retry a start that fails transiently, and start the run once it passes", async ({ expect }) => {
    const id = uniqueId("flaky");
    const name = uniqueId("flaky.event");
    await register({ workflows: [triggered(id, { triggers: [{ event: name }] })] });
    let failures = 0;
    await runInDurableObject(hub(name), (instance: EventHub) => {
      const real = instance.startRun;
      instance.startRun = async (start) => {
        if (failures < 2) {
          failures += 1;
          throw EngineError.retryable("run.unavailable", "the coordinator is restarting");
        }
        return real(start);
      };
    });
    await send({ name, id: "f-1", data: {} });
    await vi.waitUntil(async () => (await triggersOf(name, "f-1")).starts[0]?.attempts === 1, { timeout: 5_000 });
    // The retry waits for its backoff; the alarm sends it then.
    const { starts } = await settledTriggers(name, "f-1");
    expect(starts[0]).toMatchObject({ status: "started", attempts: 2 });
    expect(failures).toBe(2);
    expect(await listedRuns(id, String(starts[0]?.run_id))).toEqual([starts[0]?.run_id]);
  });

  it("start one run per event and workflow when the round is resent after a crash", async ({ expect }) => {
    const id = uniqueId("resent");
    const name = uniqueId("resent.event");
    await register({ workflows: [triggered(id, { triggers: [{ event: name }] })] });
    await send({ name, id: "r-1", data: { n: 1 } });
    const { starts } = await settledTriggers(name, "r-1");
    // As if the answer of the start was lost: the row is pending again, and the alarm resends it.
    await runInDurableObject(hub(name), (_instance: EventHub, state) => {
      state.storage.sql.exec("UPDATE trigger_starts SET status = 'pending', due_at = 0, run_id = NULL");
    });
    const again = await runInDurableObject(hub(name), async (instance: EventHub) => {
      await instance.runTriggers();
      return null;
    });
    expect(again).toBeNull();
    const resent = await settledTriggers(name, "r-1");
    expect(resent.starts[0]?.run_id).toBe(starts[0]?.run_id);
    expect(await listedRuns(id, String(starts[0]?.run_id))).toEqual([starts[0]?.run_id]);
  });

  it("are refused at registration when their if or input does not compile, or reads what is not bound", async ({
    expect,
  }) => {
    const id = uniqueId("bad-trigger");
    const response = await api("POST", "/v1/definitions", {
      workflows: [
        triggered(id, {
          triggers: [
            { event: "x", if: "event.data.a ==" },
            { event: "x", if: "input.a == 1", input: { a: { expr: "state.b" }, b: "$[" } },
          ],
        }),
      ],
    });
    expect(response.status).toBe(400);
    const paths = detailsOf(response.json).map((detail) => detail.path);
    expect(paths).toEqual(
      expect.arrayContaining([
        "workflows.0.triggers.0.if",
        "workflows.0.triggers.1.if",
        "workflows.0.triggers.1.input.a.expr",
        "workflows.0.triggers.1.input.b",
      ]),
    );
    const unnamed = await api("POST", "/v1/definitions", { workflows: [triggered(id, { triggers: [{ event: "" }] })] });
    expect(unnamed.status).toBe(400);
    expect(detailsOf(unnamed.json).map((detail) => detail.path)).toEqual(["workflows.0.triggers.0.event"]);
  });

  it("start a run of each of the 100 workflows one event name may trigger, and refuse a 101st", async ({ expect }) => {
    const name = uniqueId("crowded");
    const workflows = Array.from({ length: 100 }, (_, i) =>
      triggered(uniqueId(`w${i}`), { triggers: [{ event: name }] }),
    );
    await register({ workflows });
    const extra = await api("POST", "/v1/definitions", {
      workflows: [triggered(uniqueId("one-more"), { triggers: [{ event: name }] })],
    });
    expect(extra.status).toBe(400);
    expect(detailsOf(extra.json)).toEqual([
      expect.objectContaining({ path: "workflows.0.triggers.0.event", code: "definition.too_many_triggers" }),
    ]);
    // A new version of one of the hundred replaces its own trigger, so it still fits.
    const replaced = await api("POST", "/v1/definitions", { workflows: [{ ...workflows[0], description: "v2" }] });
    expect(replaced.status).toBe(201);

    // One event starts all hundred, in rounds of at most 12 starts (the time is printed: docs/architecture.md).
    const sentAt = Date.now();
    await send({ name, id: "all", data: {} });
    const { starts } = await settledTriggers(name, "all");
    const startedMs = Date.now() - sentAt;
    expect(starts.filter((one) => one.status === "started")).toHaveLength(100);
    expect(starts.find((one) => one.workflow === workflows[0]?.id)?.version).toBe(2);
    await Promise.all(starts.map((one) => waitForRun(String(one.run_id), undefined, 60_000)));
    console.log(
      JSON.stringify({ triggered_runs: 100, all_started_ms: startedMs, all_completed_ms: Date.now() - sentAt }),
    );
  });
});
