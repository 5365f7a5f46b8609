import { describe, it, vi } from "vitest";
import { api, hits, httpTarget, listedRuns, register, resultsOf, uniqueId, waitForRun } from "./helpers.ts";

/** A plan run is a run like any other: approval mode, redrive, the run index. */

async function registerFlaky(): Promise<string> {
  const id = uniqueId("flaky");
  await register({
    actions: [
      { id, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/flaky/{{key}}?fail=1` } },
    ],
  });
  return id;
}

describe("plan runs", () => {
  it("waits in drafting in approval mode until approved, then runs", async ({ expect }) => {
    const flaky = await registerFlaky();
    const key = uniqueId("approved");
    // The first call fails (503) and is retried once by maxRetries: 1.
    const plan = { steps: [{ tool: flaky, params: { key } }], config: { maxRetries: 1, retryDelay: 0 } };
    const created = await api("POST", "/v1/plans", { plan, tools: [flaky], mode: "approval" });
    expect(created.status).toBe(201);
    expect(created.json.status).toBe("drafting");
    const runId = String(created.json.run_id);
    expect(await hits(key)).toBe(0);
    const approved = await api("POST", `/v1/runs/${runId}/approve`);
    expect(approved.status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.mode).toBe("approval");
    expect(run.results[0]).toMatchObject({ success: true, data: { ok: true, attempts: 2 }, metadata: { retries: 1 } });
  });

  it("redrives a plan that failed fast from its failed step", async ({ expect }) => {
    const flaky = await registerFlaky();
    const key = uniqueId("redrive");
    const plan = {
      steps: [
        { tool: flaky, params: { key } },
        { tool: flaky, params: { key }, depends_on: [0] },
      ],
      config: { maxRetries: 0, failFast: true },
    };
    const created = await api("POST", "/v1/plans", { plan, tools: [flaky] });
    const runId = String(created.json.run_id);
    const failed = await waitForRun(runId);
    expect(failed.status).toBe("failed");
    expect(resultsOf(failed).map((result) => result.success)).toEqual([false, false]);
    expect((await api("POST", `/v1/runs/${runId}/redrive`)).status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(resultsOf(run).map((result) => result.success)).toEqual([true, true]);
  });

  it("is listed by the run index under the workflow id plan", async ({ expect }) => {
    const flaky = await registerFlaky();
    const created = await api("POST", "/v1/plans", {
      plan: { steps: [{ tool: flaky, params: { key: uniqueId("listed") } }], config: { retryDelay: 0 } },
      tools: [flaky],
    });
    const runId = String(created.json.run_id);
    await waitForRun(runId);
    await vi.waitUntil(
      async () => {
        const { json } = await api("GET", "/v1/runs?workflow=plan&limit=100");
        return listedRuns(json).some((run) => run.run_id === runId && run.status === "completed");
      },
      { timeout: 10_000, interval: 50 },
    );
    const { json } = await api("GET", "/v1/runs?workflow=plan&limit=100");
    expect(listedRuns(json).find((run) => run.run_id === runId)).toMatchObject({
      workflow: { id: "plan", version: 1 },
    });
  });
});
