import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { api, journal, register, registerWorkflow, start, uniqueId, verified, waitForRun } from "./helpers.ts";

/** A workflow of one node whose task sleeps (mapping `input` into the step), then records that it woke. */
const sleeper = (id: string, implementation: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id,
  nodes: {
    only: {
      task: {
        steps: [
          {
            ref: "nap",
            action: { kind: "sleep", implementation },
            input_mapping: {
              until: { path: "$.input.until", optional: true },
              duration_ms: { path: "$.input.duration_ms", optional: true },
            },
            output_mapping: { "output.slept": "$" },
          },
        ],
      },
      output_mapping: { "output.slept": "$.slept" },
      ...extra,
    },
  },
});

const kindsOf = (entries: { kind: string }[]) => entries.map((entry) => entry.kind);

describe("sleep steps", () => {
  it("wait on the run's alarm, show the timer while they wait, and go on after it with slept_ms and woke_at", async ({
    expect,
  }) => {
    const id = uniqueId("nap");
    await registerWorkflow(sleeper(id, { duration_ms: 1_500 }));
    const startedAt = Date.now();
    const runId = await start(id);
    const waiting = await waitForRun(runId, (run) => run.status === "waiting");
    const timer = waiting.nodes.only.invocations[0].waiting_for;
    expect(timer.kind).toBe("timer");
    expect(Date.parse(timer.until) - startedAt).toBeGreaterThanOrEqual(1_400);
    expect(waiting.waiting_for).toEqual([{ ...timer, node: "only", item: null, step: "nap" }]);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(Date.now() - startedAt).toBeGreaterThanOrEqual(1_500);
    expect(run.output.slept.slept_ms).toBeGreaterThanOrEqual(1_500);
    expect(Date.parse(run.output.slept.woke_at)).toBeGreaterThanOrEqual(Date.parse(timer.until));
    expect(run.waiting_for).toEqual([]);
    const entries = await journal(runId);
    expect(kindsOf(entries).filter((kind) => kind.startsWith("timer."))).toEqual(["timer.started", "timer.fired"]);
    const started = entries.find((entry) => entry.kind === "timer.started");
    expect(started?.body).toMatchObject({ node: "only", item: null, step: "nap", until: timer.until });
    // Keyed by where it is (run, redrive, node, item, attempt, step), never by its duration.
    expect(started?.body.key).toBe(`${runId}/0/only/0/1/nap`);
    expect(await verified(runId)).toBe(true);
  });

  it("take their time from the step's input: an ISO until with an offset, or epoch milliseconds", async ({
    expect,
  }) => {
    const id = uniqueId("until");
    await registerWorkflow(sleeper(id, { duration_ms: 3_600_000 }));
    const at = new Date(Date.now() + 1_000);
    const iso = `${at.toISOString().slice(0, -1)}+00:00`;
    const [byIso, byEpoch] = await Promise.all([
      start(id, { input: { until: iso } }),
      start(id, { input: { until: at.getTime() } }),
    ]);
    for (const runId of [byIso, byEpoch]) {
      const run = await waitForRun(runId, undefined, 10_000);
      expect(run.status).toBe("completed");
      expect(Date.parse(run.output.slept.woke_at)).toBeGreaterThanOrEqual(at.getTime());
      // The input's until won over the implementation's hour.
      expect(run.output.slept.slept_ms).toBeLessThan(60_000);
    }
  });

  it("continue at once when the time is already past, without a timer", async ({ expect }) => {
    const id = uniqueId("past");
    await registerWorkflow(sleeper(id, { until: "2001-01-01T00:00:00Z" }));
    const run = await waitForRun(await start(id), undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output.slept.slept_ms).toBe(0);
    expect(kindsOf(await journal(run.run_id)).filter((kind) => kind.startsWith("timer."))).toEqual([]);
  });

  it("fail with sleep.invalid, not retried, when the input's time is missing, malformed or too far", async ({
    expect,
  }) => {
    const id = uniqueId("bad-sleep");
    await registerWorkflow(sleeper(id, {}, { retry: { max_attempts: 3, initial_delay_ms: 10 } }));
    for (const input of [{}, { until: "next tuesday" }, { duration_ms: 400 * 86_400_000 }]) {
      const run = await waitForRun(await start(id, { input }), undefined, 10_000);
      expect(run.status).toBe("failed");
      expect(run.error.code).toBe("sleep.invalid");
      expect(run.nodes.only.attempts).toBe(1);
    }
  });

  it("end when the run is cancelled: the timer is journaled cancelled and never fires", async ({ expect }) => {
    const id = uniqueId("cancel-nap");
    await registerWorkflow(sleeper(id, { duration_ms: 1_000 }));
    const runId = await start(id);
    await waitForRun(runId, (run) => run.status === "waiting");
    expect((await api("POST", `/v1/runs/${runId}/cancel`, {})).status).toBe(200);
    const cancelled = await waitForRun(runId);
    expect(cancelled.status).toBe("cancelled");
    expect(cancelled.waiting_for).toEqual([]);
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const entries = await journal(runId);
    const timers = entries.filter((entry) => entry.kind.startsWith("timer."));
    expect(kindsOf(timers)).toEqual(["timer.started", "timer.cancelled"]);
    expect(timers[1]?.body.reason).toEqual(expect.any(String));
    expect(kindsOf(entries).filter((kind) => kind === "task.dispatched")).toHaveLength(1);
    expect(await verified(runId)).toBe(true);
  });

  it("end on time, once, when the run's object is evicted while they sleep", async ({ expect }) => {
    const id = uniqueId("evicted-nap");
    await registerWorkflow(sleeper(id, { duration_ms: 1_200 }));
    const runId = await start(id);
    await waitForRun(runId, (run) => run.status === "waiting");
    await evictDurableObject(env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)));
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    const kinds = kindsOf(await journal(runId));
    expect(kinds.filter((kind) => kind === "timer.fired")).toHaveLength(1);
    expect(kinds.filter((kind) => kind === "task.completed")).toHaveLength(1);
  });

  it("are refused at registration with both duration_ms and until, and as an undo", async ({ expect }) => {
    const both = await api("POST", "/v1/definitions", {
      workflows: [sleeper(uniqueId("both"), { duration_ms: 5, until: "2030-01-01T00:00:00Z" })],
    });
    expect(both.status).toBe(400);
    expect(both.json.error.details).toContainEqual(
      expect.objectContaining({
        code: "definition.invalid_sleep",
        path: "workflows.0.nodes.only.task.steps.0.action.implementation",
      }),
    );
    const undo = await api("POST", "/v1/definitions", {
      actions: [
        {
          id: uniqueId("undo-sleeps"),
          kind: "context",
          implementation: { updates: [{ path: "a", expr: "1" }] },
          undo: { action: { kind: "sleep", implementation: { duration_ms: 10 } } },
        },
      ],
    });
    expect(undo.status).toBe(400);
    expect(JSON.stringify(undo.json)).toContain("definition.invalid_undo");
    await register({ workflows: [sleeper(uniqueId("ok"), { until: 1_900_000_000_000 })] });
  });
});
