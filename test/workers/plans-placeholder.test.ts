import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { RPC_PRINCIPAL } from "../../src/auth.ts";
import { startPlan } from "../../src/plans.ts";
import { z } from "zod";
import { JsonValue, type Json } from "../../schemas/index.ts";
import {
  api,
  detailsOf,
  gateOpenOrSettled,
  gatesOf,
  hits,
  httpTarget,
  mcpServer,
  register,
  resultsOf,
  uniqueId,
  waitForRun,
} from "./helpers.ts";

/**
 * Agent plans in the placeholder notation (docs/plans.md) against the local
 * HTTP target and the MCP reference server.
 */

/** Registers `echo` (POST /echo with the input as body, counted under `key`) and a high-risk twin of it. */
async function registerEcho(key: string): Promise<{ echo: string; risky: string }> {
  const ids = { echo: uniqueId("echo"), risky: uniqueId("risky") };
  const implementation = {
    method: "POST",
    url_template: `${httpTarget()}/echo?key=${key}`,
    body_template: "{{json this}}",
  };
  await register({
    actions: [
      { id: ids.echo, kind: "http", implementation },
      { id: ids.risky, kind: "http", implementation, risk: "high" },
    ],
  });
  return ids;
}

/** The bodies the echo target answered each child of an expanded step with. */
function bodiesOf(data: unknown): Record<string, Json>[] {
  return z
    .array(z.object({ body: z.record(z.string(), JsonValue) }))
    .parse(data)
    .map((child) => child.body);
}

async function startPlanRun(body: Record<string, unknown>): Promise<string> {
  const response = await api("POST", "/v1/plans", body);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return String(response.json.run_id);
}

describe("placeholder plans", () => {
  it("expands $step-01.items[*].id into one call per item, and fans out implicitly over the children", async ({
    expect,
  }) => {
    const key = uniqueId("expand");
    const { echo } = await registerEcho(key);
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { items: [{ id: "a" }, { id: "b" }, { id: "c" }] } },
        { id: "step-02", tool: echo, args: { id: "$step-01.body.items[*].id", fixed: 1 } },
        { id: "step-03", tool: echo, args: { seen: "$step-02.body.id" } },
      ],
    };
    const runId = await startPlanRun({ plan, tools: [echo] });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.nodes["step-02"].items.total).toBe(3);
    expect(bodiesOf(resultsOf(run)[1]?.data)).toEqual([
      { id: "a", fixed: 1 },
      { id: "b", fixed: 1 },
      { id: "c", fixed: 1 },
    ]);
    // step-03 names the base step-02, which only has children: one call per child.
    expect(run.nodes["step-03"].items.total).toBe(3);
    expect(bodiesOf(resultsOf(run)[2]?.data).map((body) => body.seen)).toEqual(["a", "b", "c"]);
    expect(await hits(key)).toBe(7);
    const preview = await api("POST", "/v1/plans", { plan, tools: [echo], mode: "preview" });
    expect(preview.json.graph.expansions).toEqual([
      { step: "step-02", over: "$.state['step-01']['body']['items'][*]", implicit: false },
      { step: "step-03", over: "$.state['step-02'][*]", implicit: true },
    ]);
    expect(preview.json.graph.steps[1].args).toEqual({ id: "$.item['id']", fixed: 1 });
  });

  it("routes to the fallback step when a placeholder does not resolve", async ({ expect }) => {
    const key = uniqueId("fallback");
    const { echo } = await registerEcho(key);
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { a: 1 } },
        { id: "step-02", tool: echo, args: { x: "$step-01.body.missing" } },
        { id: "step-99", tool: echo, args: { apology: "could not finish" } },
      ],
      fallback: "step-99",
    };
    const run = await waitForRun(await startPlanRun({ plan, tools: [echo] }));
    expect(run.status).toBe("completed");
    expect(run.results[1]).toMatchObject({ success: false, error: { code: "plan.args_unresolved" } });
    expect(run.results[2]).toMatchObject({ success: true, data: { body: { apology: "could not finish" } } });
    // Without an unresolved placeholder the fallback is skipped.
    const fine = {
      ...plan,
      steps: [plan.steps[0], { id: "step-02", tool: echo, args: { x: "$step-01.body.a" } }, plan.steps[2]],
    };
    const clean = await waitForRun(await startPlanRun({ plan: fine, tools: [echo] }));
    expect(clean.status).toBe("completed");
    expect(clean.nodes["step-99"].status).toBe("skipped");
  });

  it("refuses args the tool's input schema rejects", async ({ expect }) => {
    const { status, json } = await api("POST", "/v1/plans", {
      plan: { steps: [{ id: "step-01", tool: "tool:write_artifact", args: { name: 42 } }] },
      tools: ["tool:write_artifact"],
    });
    expect(status).toBe(400);
    expect(json.error.code).toBe("plan.args_invalid");
    expect(detailsOf(json).length).toBeGreaterThan(0);
    expect(detailsOf(json).every((detail) => detail.path.startsWith("plan.steps.0.args"))).toBe(true);
  });

  it("answers every approval gate of an expanded high-risk step through approved_steps", async ({ expect }) => {
    const key = uniqueId("approve");
    const { echo, risky } = await registerEcho(key);
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { ids: [1, 2] } },
        { id: "step-02", tool: risky, args: { id: "$step-01.body.ids[*]" } },
      ],
    };
    const runId = await startPlanRun({ plan, tools: [echo, risky] });
    const waiting = await waitForRun(
      runId,
      (run) => gatesOf(run).filter((gate) => gate.status === "open").length === 2,
    );
    expect(gatesOf(waiting).map((gate) => [gate.kind, gate.node, gate.item])).toEqual([
      ["approval", "step-02", 0],
      ["approval", "step-02", 1],
    ]);
    const approved = await api("POST", `/v1/runs/${runId}/approve`, { approved_steps: ["step-02"] });
    expect(approved.status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(bodiesOf(resultsOf(run)[1]?.data).map((body) => body.id)).toEqual([1, 2]);
  });

  it("approving a plan with approved_steps before its steps are reached grants their gates as they open", async ({
    expect,
  }) => {
    const key = uniqueId("standing");
    const { echo, risky } = await registerEcho(key);
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { ids: [1, 2, 3] } },
        { id: "step-02", tool: risky, args: { id: "$step-01.body.ids[*]" } },
        { id: "step-03", tool: risky, args: { last: true } },
      ],
    };
    const runId = await startPlanRun({ plan, tools: [echo, risky], mode: "approval" });
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("drafting");
    // No gate is open yet: step-02's three children and step-03 open theirs only once step-01 ran.
    const approved = await api("POST", `/v1/runs/${runId}/approve`, { approved_steps: ["step-02"] });
    expect(approved.status).toBe(200);
    const waiting = await waitForRun(runId, (run) => run.gates.length === 4 || run.status === "failed");
    // step-02's children were granted as their gates opened; step-03, not approved, waits for a person.
    const gates = gatesOf(waiting).sort((a, b) => `${a.node}/${a.item}`.localeCompare(`${b.node}/${b.item}`));
    expect(gates.map((gate) => [gate.node, gate.item, gate.status, gate.responder ?? null])).toEqual([
      ["step-02", 0, "answered", "approved_steps"],
      ["step-02", 1, "answered", "approved_steps"],
      ["step-02", 2, "answered", "approved_steps"],
      ["step-03", null, "open", null],
    ]);
    await api("POST", `/v1/runs/${runId}/gates/${gates[3]?.gate_id}`, { response: { approved: true } });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(bodiesOf(resultsOf(run)[1]?.data).map((body) => body.id)).toEqual([1, 2, 3]);
  });

  it("keeps at most 1,000 approved steps over every approve call, and refuses more with a 400", async ({ expect }) => {
    const { echo, risky } = await registerEcho(uniqueId("cap"));
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { go: true } },
        { id: "step-02", tool: risky, args: { after: "$step-01.body.go" } },
      ],
    };
    const runId = await startPlanRun({ plan, tools: [echo, risky] });
    const ids = (from: number) => Array.from({ length: 500 }, (_, index) => `step-x-${from + index}`);
    for (const from of [0, 500]) {
      expect((await api("POST", `/v1/runs/${runId}/approve`, { approved_steps: ids(from) })).status).toBe(200);
    }
    const over = await api("POST", `/v1/runs/${runId}/approve`, { approved_steps: ["step-02"] });
    expect(over.status).toBe(400);
    expect(over.json.error.code).toBe("run.invalid_request");
  });

  it("runs a pre-approved high-risk step without a gate where the deployment allows it", async ({ expect }) => {
    const key = uniqueId("pre");
    const { risky } = await registerEcho(key);
    const allowing = { ...env, PLAN_PREAPPROVAL: "allow" } as Env;
    const plan = { steps: [{ id: "step-01", tool: risky, args: { go: true } }] };
    const { run } = await startPlan(allowing, { plan, tools: [risky], approved_steps: ["step-01"] }, RPC_PRINCIPAL);
    expect(run.graph.high_risk).toEqual(["step-01"]);
    expect(run.graph.approvals).toEqual({ preapproval_allowed: true, approved_steps: ["step-01"] });
    const done = await waitForRun(String(run.run_id));
    expect(done.status).toBe("completed");
    expect(done.gates).toEqual([]);
  });

  it("asks for a missing input through a gate before any step runs, and merges the answer into the args", async ({
    expect,
  }) => {
    const key = uniqueId("inputs");
    const { echo } = await registerEcho(key);
    const plan = {
      inputs: { type: "object", required: ["user", "limit"], properties: { user: { type: "string" } } },
      steps: [{ id: "step-01", tool: echo, args: { user: "$input.user", limit: "$input.limit" } }],
    };
    const runId = await startPlanRun({ plan, tools: [echo], input: { limit: 5 } });
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    const gate = waiting.gates[0];
    expect(gate).toMatchObject({ kind: "input", node: "inputs", status: "open" });
    expect(gate.input_schema.required).toEqual(["user"]);
    expect(await hits(key)).toBe(0);
    const answered = await api("POST", `/v1/runs/${runId}/gates/${gate.gate_id}`, { response: { user: "bob" } });
    expect(answered.status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.results[0].data.body).toEqual({ user: "bob", limit: 5 });
  });

  it("calls an MCP tool of the reference server with a resolved placeholder", async ({ expect }) => {
    const key = uniqueId("mcp");
    const { echo } = await registerEcho(key);
    const server = uniqueId("everything").replaceAll("-", "_");
    await register({ mcp_servers: [{ id: server, url: `${mcpServer()}/k/${key}/mcp` }] });
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { text: "hello plans" } },
        { id: "step-02", tool: `mcp:${server}/echo`, args: { message: "$step-01.body.text" } },
      ],
    };
    const run = await waitForRun(await startPlanRun({ plan, tools: [echo, `mcp:${server}/echo`] }));
    expect(run.status).toBe("completed");
    expect(JSON.stringify(run.results[1].data)).toContain("hello plans");
  });
});
