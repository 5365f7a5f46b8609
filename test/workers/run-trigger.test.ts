import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { startTriggeredRun } from "../../src/start.ts";
import { api, journal, register, start, uniqueId, waitForRun } from "./helpers.ts";

// How a run was started, on its record, its `run.created`, its view and the run index.

const contextStep = {
  ref: "one",
  action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } },
};

async function registerPair(): Promise<{ parent: string; child: string }> {
  const ids = { parent: uniqueId("parent"), child: uniqueId("child") };
  await register({
    workflows: [
      { id: ids.child, nodes: { only: { task: { steps: [contextStep] } } } },
      { id: ids.parent, nodes: { sub: { workflow: ids.child } } },
    ],
  });
  return ids;
}

async function createdTrigger(runId: string): Promise<unknown> {
  return (await journal(runId)).find((entry) => entry.kind === "run.created")?.body.trigger;
}

describe("a run's trigger", () => {
  it("is api for a run the API started, parent (with the parent's id and key) for its child, on the view and run.created", async ({
    expect,
  }) => {
    const { parent } = await registerPair();
    const runId = await start(parent);
    const run = await waitForRun(runId);
    expect(run.trigger).toEqual({ kind: "api" });
    expect(await createdTrigger(runId)).toEqual({ kind: "api" });
    const childId = run.children[0].run_id;
    const child = await waitForRun(childId);
    expect(child.trigger).toEqual({ kind: "parent", run_id: runId, key: expect.stringContaining(runId) });
    expect(await createdTrigger(childId)).toEqual(child.trigger);
  });

  it("is plan for an agent plan's run", async ({ expect }) => {
    const plan = { steps: [{ tool: "tool:list_artifacts", params: {} }] };
    const created = await api("POST", "/v1/plans", { plan, tools: ["tool:list_artifacts"] });
    expect(created.status, JSON.stringify(created.json)).toBe(201);
    const run = await waitForRun(String(created.json.run_id));
    expect(run.trigger).toEqual({ kind: "plan" });
  });

  it("starts one run per key through the typed start, and GET /v1/runs filters by the trigger's kind", async ({
    expect,
  }) => {
    const { child } = await registerPair();
    const scheduleId = uniqueId("nightly");
    const trigger = {
      kind: "schedule" as const,
      schedule: scheduleId,
      version: 1,
      scheduled_at: "2026-11-28T09:00:00.000Z",
    };
    const slot = { workflow: child, input: {}, trigger, key: `${scheduleId}\n${trigger.scheduled_at}` };
    const first = await startTriggeredRun(env, { ...slot, created_by: `schedule:${scheduleId}` });
    const again = await startTriggeredRun(env, { ...slot, created_by: `schedule:${scheduleId}` });
    expect(first.created).toBe(true);
    expect(again).toMatchObject({ created: false, run: { run_id: first.run.run_id } });
    const run = await waitForRun(first.run.run_id);
    expect(run.trigger).toEqual(trigger);
    // The index is written after the run's commit.
    const listed = await vi.waitUntil(
      async () => {
        const page = await api("GET", `/v1/runs?trigger=schedule&workflow=${child}`);
        return page.json.runs.length > 0 ? page : undefined;
      },
      { timeout: 10_000, interval: 50 },
    );
    expect(
      listed.json.runs.map((summary: { run_id: string; trigger: string }) => [summary.run_id, summary.trigger]),
    ).toEqual([[first.run.run_id, "schedule"]]);
    const byApi = await api("GET", `/v1/runs?trigger=api&workflow=${child}`);
    expect(byApi.json.runs).toEqual([]);
  });

  it("refuses a start whose input the workflow's input_schema refuses, and an unknown trigger kind in a listing", async ({
    expect,
  }) => {
    const id = uniqueId("typed");
    await register({
      workflows: [
        {
          id,
          input_schema: { type: "object", required: ["order"], properties: { order: { type: "string" } } },
          nodes: { only: { task: { steps: [contextStep] } } },
        },
      ],
    });
    const trigger = { kind: "event" as const, event_id: uniqueId("evt"), name: "order.created" };
    await expect(
      startTriggeredRun(env, {
        workflow: id,
        input: {},
        trigger,
        key: `${trigger.event_id}\n${id}`,
        created_by: "event:order.created",
      }),
    ).rejects.toMatchObject({ code: "run.invalid_input" });
    const listed = await api("GET", "/v1/runs?trigger=cron");
    expect(listed.status).toBe(400);
    expect(listed.json.error.details[0].path).toBe("trigger");
  });
});
