import { describe, it } from "vitest";
import { api, hits, httpTarget, journal, register, uniqueId, verifyRun, waitForRun } from "./helpers.ts";

/** `make` "creates" `id`; its undo, `remove`, marks `<key>-<id>` on the HTTP target. */
async function registerMake(): Promise<{ make: string; risky: string; boom: string }> {
  const [make, remove, boom, risky] = [uniqueId("make"), uniqueId("remove"), uniqueId("boom"), uniqueId("risky")];
  await register({
    actions: [
      {
        id: remove,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/mark/{{key}}-{{id}}` },
      },
      {
        id: make,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/json?id={{id}}` },
        undo: { action: remove, input_mapping: { id: "$.output.body.id", key: "$.input.key" } },
      },
      { id: boom, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
      {
        id: risky,
        kind: "http",
        risk: "high",
        implementation: { method: "GET", url_template: `${httpTarget()}/json` },
      },
    ],
  });
  return { make, risky, boom };
}

const compensated = (view: { compensation?: { status: string } }) =>
  view.compensation?.status === "completed" || view.compensation?.status === "failed";

/**
 * A plan run compensates like a workflow run (docs/plans.md, docs/definitions.md
 * "Undo and compensation"): a step whose registered action declares an `undo`
 * enqueues it, and when a later step fails the undos run latest first.
 */
describe("compensation of a plan run", () => {
  it("runs the undos of the completed steps in reverse order after a step fails, and the journal verifies", async ({
    expect,
  }) => {
    const key = uniqueId("plan-saga");
    const { make, boom } = await registerMake();
    const plan = {
      steps: [
        { tool: make, params: { id: "first", key } },
        { tool: make, params: { id: "second", key }, depends_on: [0] },
        { tool: boom, params: {}, depends_on: [1] },
      ],
      config: { failFast: true },
    };
    const started = await api("POST", "/v1/plans", { plan, tools: [make, boom] });
    expect(started.status, JSON.stringify(started.json)).toBe(201);
    const runId = String(started.json.run_id);
    const run = await waitForRun(runId, compensated);
    expect(run.status).toBe("failed");
    expect(run.compensation).toMatchObject({ status: "completed", trigger: "on_failure" });
    expect(await hits(`${key}-first`)).toBe(1);
    expect(await hits(`${key}-second`)).toBe(1);
    const undone = (await journal(runId))
      .filter((entry) => entry.kind === "undo.completed")
      .map((entry) => entry.body.node);
    expect(undone).toEqual(["step-1", "step-0"]);
    expect(await verifyRun(runId)).toMatchObject({ ok: true, attested: true });
  });

  it("runs the undo of a completed step when the plan is cancelled at an approval gate", async ({ expect }) => {
    const key = uniqueId("plan-cancel");
    const { make, risky } = await registerMake();
    const plan = {
      steps: [
        { tool: make, params: { id: "made", key } },
        { tool: risky, params: {}, depends_on: [0] },
      ],
    };
    const started = await api("POST", "/v1/plans", { plan, tools: [make, risky] });
    expect(started.status, JSON.stringify(started.json)).toBe(201);
    const runId = String(started.json.run_id);
    await waitForRun(runId, (view) => view.gates.some((gate: { status: string }) => gate.status === "open"));
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { reason: "not today" })).status).toBe(200);
    const run = await waitForRun(runId, compensated);
    expect(run.status).toBe("cancelled");
    expect(run.compensation).toMatchObject({ status: "completed", trigger: "on_cancel" });
    expect(await hits(`${key}-made`)).toBe(1);
    expect(await verifyRun(runId)).toMatchObject({ ok: true, attested: true });
  });
});
