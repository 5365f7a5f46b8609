import { env, exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { verifyJournal } from "../../lib/journal/index.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { z } from "zod";
import { JsonValue, RunView } from "../../schemas/index.ts";
import { api, detailsOf, hits, httpTarget, mcpServer, register, resultsOf, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Agent plans in the dependency notation (docs/plans.md) against the local
 * HTTP target: each step calls a registered http action.
 */

/** Registers `slow` (GET /slow/<key>?ms=…&stamp=1), `echo` (POST /echo with the input as body), `status` (GET /status/<code>/<key>). */
async function registerActions(): Promise<{ slow: string; echo: string; status: string }> {
  const ids = { slow: uniqueId("slow"), echo: uniqueId("echo"), status: uniqueId("status") };
  await register({
    actions: [
      {
        id: ids.slow,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/slow/{{key}}?ms={{ms}}&stamp=1` },
        requires: { type: "object", required: ["key", "ms"], properties: { key: { type: "string" } } },
      },
      {
        id: ids.echo,
        kind: "http",
        implementation: { method: "POST", url_template: `${httpTarget()}/echo`, body_template: "{{json this}}" },
      },
      {
        id: ids.status,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/status/{{code}}/{{key}}` },
      },
    ],
  });
  return ids;
}

async function runPlan(body: Record<string, unknown>): Promise<RunView> {
  const response = await api("POST", "/v1/plans", body);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return RunView.parse(await waitForRun(String(response.json.run_id)));
}

/** The body the target answered a call with. */
const bodyOf = (data: unknown) => z.object({ body: JsonValue }).parse(data).body;

/** An ISO time the run view must have. */
function timeOf(value: string | null | undefined): string {
  if (!value) {
    throw new Error("expected a time");
  }
  return value;
}

/** What the target's `/slow?stamp=1` answers: when the call started and ended, on its clock. */
const Stamped = z.object({ started_at: z.number(), finished_at: z.number() });

describe("dependency plans", () => {
  it("runs independent steps in parallel: their calls overlap on the target's clock", async ({ expect }) => {
    const { slow } = await registerActions();
    const key = uniqueId("par");
    const steps = [0, 1, 2].map(() => ({ tool: slow, params: { key, ms: 300 } }));
    const run = await runPlan({ plan: { steps }, tools: [slow] });
    expect(run.status).toBe("completed");
    expect(run.workflow).toEqual({ id: "plan", version: 1 });
    const results = resultsOf(run);
    expect(results.map((result) => [result.step, result.success, result.tool])).toEqual([
      ["step-0", true, slow],
      ["step-1", true, slow],
      ["step-2", true, slow],
    ]);
    const calls = results.map((result) => Stamped.parse(result.data));
    // Every call began before any ended: the three ran at the same time.
    expect(Math.max(...calls.map((call) => call.started_at))).toBeLessThan(
      Math.min(...calls.map((call) => call.finished_at)),
    );
    expect(await hits(key)).toBe(3);
    for (const result of results) {
      expect(result.metadata).toMatchObject({ retries: 0, timestamp: expect.any(String) });
      expect(result.metadata.executionTime).toBeGreaterThanOrEqual(300);
    }
  });

  it("resolves ${step[N].data.*.field} across an array for a dependent step", async ({ expect }) => {
    const { echo } = await registerActions();
    const plan = {
      steps: [
        { tool: echo, params: { facilities: [{ id: "F1" }, { id: "F2" }, { id: "F3" }] } },
        {
          tool: echo,
          params: {
            facility_ids: "${step[0].data.body.facilities.*.id}",
            first: "${step[0].data.body.facilities[0].id}",
          },
          depends_on: [0],
        },
      ],
    };
    const run = await runPlan({ plan, tools: [echo] });
    expect(run.status).toBe("completed");
    expect(bodyOf(resultsOf(run)[1]?.data)).toEqual({ facility_ids: ["F1", "F2", "F3"], first: "F1" });
    expect(timeOf(run.nodes["step-1"]?.started_at) >= timeOf(run.nodes["step-0"]?.finished_at)).toBe(true);
  });

  it("records the plan as given and the compiled graph on run.created, in a journal that verifies", async ({
    expect,
  }) => {
    const { echo } = await registerActions();
    const plan = { steps: [{ tool: echo, params: { a: 1 } }], config: { maxParallelExecutions: 2 } };
    const response = await api("POST", "/v1/plans", { plan, tools: [echo] });
    const runId = String(response.json.run_id);
    await waitForRun(runId);
    const { json } = await api("GET", `/v1/runs/${runId}/journal`);
    const created = json.entries[0];
    expect(created.kind).toBe("run.created");
    expect(created.body.plan.given).toEqual(plan);
    expect(created.body.plan.graph).toMatchObject({
      notation: "dependency",
      layers: [["step-0"]],
      config: { maxParallelExecutions: 2, toolTimeout: 30000, maxRetries: 3, retryDelay: 1000, failFast: false },
      approvals: { preapproval_allowed: false, approved_steps: [] },
    });
    expect(created.body.plan.workflow_sha256).toMatch(/^[0-9a-f]{64}$/);
    const keys = await api("GET", "/v1/journal-keys");
    const report = await verifyJournal(json.entries, keys.json, { requireAttestation: true, runId });
    expect(report.ok).toBe(true);
  });

  it("goes on past a failed step with failFast false, and stops the plan with failFast true", async ({ expect }) => {
    const { status, echo } = await registerActions();
    const steps = [
      { tool: status, params: { code: 404, key: uniqueId("missing") } },
      { tool: echo, params: { ok: true } },
    ];
    const lenient = await runPlan({ plan: { steps }, tools: [status, echo] });
    expect(lenient.status).toBe("completed");
    expect(resultsOf(lenient)[0]).toMatchObject({ success: false, data: null, error: { code: "http.status" } });
    expect(resultsOf(lenient)[1]).toMatchObject({ success: true, data: { body: { ok: true } } });

    const slowSecond = [steps[0], { tool: status, params: { code: 200, key: uniqueId("late") }, depends_on: [0] }];
    const strict = await runPlan({ plan: { steps: slowSecond, config: { failFast: true } }, tools: [status] });
    expect(strict.status).toBe("failed");
    expect(strict.error).toMatchObject({ code: "http.status", node: "step-0" });
    expect(resultsOf(strict)[1]?.success).toBe(false);
  });

  it("previews the compiled graph without creating a run", async ({ expect }) => {
    const { echo } = await registerActions();
    const plan = {
      steps: [
        { tool: echo, params: {} },
        { tool: echo, params: {} },
        { tool: echo, params: { x: "${step[0].data.body}" }, depends_on: [0, 1] },
      ],
    };
    const { status, json } = await api("POST", "/v1/plans", { plan, tools: [echo], mode: "preview" });
    expect(status).toBe(200);
    expect(json.run_id).toBeNull();
    expect(json.status).toBe("preview");
    expect(json.graph.layers).toEqual([["step-0", "step-1"], ["step-2"]]);
    expect(json.graph.steps[2]).toMatchObject({
      depends_on: ["step-0", "step-1"],
      args: { x: "$.state['step-0']['body']" },
    });
  });

  it("refuses a cycle and a reference to a step that is not a dependency, with paths", async ({ expect }) => {
    const { echo } = await registerActions();
    const cycle = {
      steps: [
        { tool: echo, params: {}, depends_on: [1] },
        { tool: echo, params: {}, depends_on: [0] },
      ],
    };
    const cyclic = await api("POST", "/v1/plans", { plan: cycle, tools: [echo] });
    expect(cyclic.status).toBe(400);
    expect(cyclic.json.error.details).toEqual([
      expect.objectContaining({ code: "plan.cycle", path: expect.stringMatching(/^plan\.steps\.\d\.depends_on$/) }),
    ]);

    const stray = {
      steps: [
        { tool: echo, params: {} },
        { tool: echo, params: { x: "${step[0].data.id}" } },
      ],
    };
    const unrelated = await api("POST", "/v1/plans", { plan: stray, tools: [echo] });
    expect(unrelated.status).toBe(400);
    expect(unrelated.json.error.details).toEqual([
      expect.objectContaining({ code: "plan.invalid_reference", path: "plan.steps.1.params.x" }),
    ]);
  });

  it("fails closed on a tool the allowlist lacks and refuses literal args the tool's schema rejects", async ({
    expect,
  }) => {
    const { slow, echo } = await registerActions();
    const missing = await api("POST", "/v1/plans", { plan: { steps: [{ tool: slow, params: {} }] }, tools: [echo] });
    expect(missing.status).toBe(403);
    expect(missing.json.error.details).toEqual([expect.objectContaining({ path: "plan.steps.0.tool" })]);

    const bad = await api("POST", "/v1/plans", {
      plan: { steps: [{ tool: slow, params: { key: 7 } }] },
      tools: [slow],
    });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe("plan.args_invalid");
    expect(detailsOf(bad.json).map((detail) => detail.path)).toEqual(
      expect.arrayContaining([expect.stringMatching(/^plan\.steps\.0\.params/)]),
    );
  });

  it("runs no plan when PLAN_PREAPPROVAL is off and approved_steps is given", async ({ expect }) => {
    const { echo } = await registerActions();
    expect((env as unknown as { PLAN_PREAPPROVAL?: string }).PLAN_PREAPPROVAL).toBeUndefined();
    const refused = await api("POST", "/v1/plans", {
      plan: { steps: [{ tool: echo, params: {} }] },
      tools: [echo],
      approved_steps: ["step-0"],
    });
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe("plan.preapproval_disabled");
  });

  it("passes a wildcard reference to an MCP tool of the reference server", async ({ expect }) => {
    const { echo } = await registerActions();
    const key = uniqueId("mcp");
    const server = uniqueId("everything").replaceAll("-", "_");
    await register({ mcp_servers: [{ id: server, url: `${mcpServer()}/k/${key}/mcp` }] });
    const plan = {
      steps: [
        { tool: echo, params: { names: [{ n: "ada" }, { n: "grace" }] } },
        { tool: `mcp:${server}/get-sum`, params: { a: 2, b: 3 } },
        { tool: `mcp:${server}/echo`, params: { message: "${step[0].data.body.names[1].n}" }, depends_on: [0] },
      ],
    };
    const run = await runPlan({ plan, tools: [echo, `mcp:${server}/*`] });
    expect(run.status).toBe("completed");
    const results = resultsOf(run);
    expect(results.map((result) => result.success)).toEqual([true, true, true]);
    expect(JSON.stringify(results[1]?.data)).toContain("5");
    expect(JSON.stringify(results[2]?.data)).toContain("grace");
  });

  it("reports args a tool refuses once resolved as plan.args_invalid", async ({ expect }) => {
    const { echo, slow } = await registerActions();
    const plan = {
      steps: [
        { tool: echo, params: { key: 42 } },
        { tool: slow, params: { key: "${step[0].data.body.key}", ms: 1 }, depends_on: [0] },
      ],
    };
    const run = await runPlan({ plan, tools: [echo, slow] });
    expect(run.status).toBe("completed");
    expect(resultsOf(run)[1]).toMatchObject({ success: false, error: { code: "plan.args_invalid" } });
    expect(run.nodes["step-1"]?.error?.code).toBe("action.invalid_input");
  });

  it("starts a plan over Workers RPC, and the same idempotency key finds the same run", async ({ expect }) => {
    const { echo } = await registerActions();
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const request = {
      plan: { steps: [{ tool: echo, params: { via: "rpc" } }] },
      tools: [echo],
      idempotency_key: uniqueId("k"),
    };
    const first = await rpc.startPlan(request);
    const again = await rpc.startPlan(request);
    expect(first.ok && again.ok).toBe(true);
    if (!first.ok || !again.ok) {
      return;
    }
    expect(first.value.created).toBe(true);
    expect(again.value).toMatchObject({ created: false, run_id: first.value.run_id });
    const run = await waitForRun(String(first.value.run_id));
    expect(run.results[0].data.body).toEqual({ via: "rpc" });
    const conflict = await api("POST", "/v1/plans", { ...request, input: { other: true } });
    expect(conflict.status).toBe(409);
  });
});
