import { describe, it } from "vitest";
import { RunView } from "../../schemas/index.ts";
import {
  api,
  detailsOf,
  gatesOf,
  hits,
  httpTarget,
  journal,
  llmServer,
  mcpServer,
  register,
  resultsOf,
  singleTaskWorkflow,
  start,
  uniqueId,
  verified,
  waitForRun,
  postLlmScript,
} from "./helpers.ts";

/**
 * The `plan` action kind (docs/plans.md, "Running a plan from a workflow"):
 * a plan, written by an earlier step, run as a child run with the checks of
 * `POST /v1/plans`; the step's output is the child's `{ results }`.
 */

/** Registers `echo` (POST /echo?key=…, the input as body) and a high-risk twin of it. */
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

/** A `plan` step: its input the task input (the plan) unless `step` maps it, its output at `output.plan`. */
function planStep(implementation: Record<string, unknown>, step: Record<string, unknown> = {}) {
  return {
    ref: "execute",
    action: { kind: "plan", implementation },
    output_mapping: { "output.plan": "$" },
    ...step,
  };
}

/** Runs a one-node workflow whose task is `steps`, on `input`; answers the run id. */
async function startSteps(steps: unknown[], input: unknown, extra: Record<string, unknown> = {}): Promise<string> {
  const id = uniqueId("wf");
  await register({ workflows: [singleTaskWorkflow(id, steps, extra)] });
  return start(id, { input });
}

/** A planner: an llm step whose prompt asks for a plan, answered by the local server's script `key`. */
function plannerStep(key: string) {
  return {
    ref: "planner",
    action: {
      kind: "llm",
      implementation: {
        prompt: {
          messages: [{ role: "user", template: `Plan the greeting [[script:${key}]]` }],
          produces: { type: "object", required: ["steps"], properties: { steps: { type: "array" } } },
        },
        model: {
          provider: "openai-compatible",
          model_id: "local-echo",
          base_url: `${llmServer()}/v1`,
          api_key: "$env:LLM_API_KEY",
        },
      },
    },
  };
}

/** The kinds of the run's `child.*` journal entries. */
async function childEntries(runId: string): Promise<string[]> {
  return (await journal(runId)).map((entry) => entry.kind).filter((kind) => kind.startsWith("child."));
}

async function view(runId: string): Promise<RunView> {
  return RunView.parse((await api("GET", `/v1/runs/${runId}`)).json);
}

describe("plan steps", () => {
  it("run the plan an llm step wrote as a child run; the step's results are the child's", async ({ expect }) => {
    const key = uniqueId("planned");
    const { echo } = await registerEcho(key);
    const server = uniqueId("everything").replaceAll("-", "_");
    await register({ mcp_servers: [{ id: server, url: `${mcpServer()}/k/${key}/mcp` }] });
    const written = {
      steps: [
        { tool: echo, params: { names: ["ada", "grace"] } },
        { tool: `mcp:${server}/echo`, params: { message: "${step[0].data.body.names[1]}" }, depends_on: [0] },
      ],
    };
    await postLlmScript(key, [{ json: written }]);
    const runId = await startSteps(
      [
        plannerStep(key),
        planStep({ tools: [echo, `mcp:${server}/echo`] }, { input_mapping: { steps: "$.state.planner.steps" } }),
      ],
      {},
      // The run allows the MCP server's every tool; the plan asks for one of them.
      { tools: [`mcp:${server}/*`] },
    );
    const run = RunView.parse(await waitForRun(runId));
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.children).toHaveLength(1);
    const link = run.children[0];
    expect(link).toMatchObject({ node: "main", step: "execute", workflow: "plan", status: "completed" });
    const child = await view(link?.run_id ?? "");
    expect(child.workflow).toEqual({ id: "plan", version: 1 });
    expect(child.parent).toEqual({ run_id: runId, node: "main", step: "execute" });
    const results = resultsOf(child);
    expect(results.map((result) => [result.step, result.success])).toEqual([
      ["step-0", true],
      ["step-1", true],
    ]);
    expect(JSON.stringify(results[1]?.data)).toContain("grace");
    // The step's output is the child's results, exactly as its run view shows them.
    expect(run.output).toEqual({ result: { plan: { results } } });
    // The child's first journal entry records the plan as the llm wrote it, and who started it.
    const created = (await journal(link?.run_id ?? "")).find((entry) => entry.kind === "run.created");
    expect(created?.body.plan).toMatchObject({
      notation: "dependency",
      given: written,
      tools: [echo, `mcp:${server}/echo`],
    });
    expect(await hits(key)).toBe(1);
    expect(await verified(link?.run_id ?? "")).toBe(true);
    expect(await verified(runId)).toBe(true);
  });

  it("fail plan.invalid with the path of each problem when the plan is bad, and start no child", async ({ expect }) => {
    const key = uniqueId("bad");
    const { echo } = await registerEcho(key);
    const plan = {
      steps: [
        { tool: echo, params: { a: "${step[1].data}" }, depends_on: [1] },
        { tool: echo, params: {}, depends_on: [0] },
      ],
    };
    const run = RunView.parse(await waitForRun(await startSteps([planStep({ tools: [echo] })], plan)));
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "plan.invalid", step: "execute" });
    expect(run.error?.message).toMatch(/plan\.steps\.\d\.depends_on/);
    // Refused by the step itself: no child was even asked for.
    expect(run.children).toEqual([]);
    expect(await childEntries(run.run_id)).toEqual([]);
    expect(await hits(key)).toBe(0);
  });

  it("fail plan.tool_not_allowed, before any child, when a step calls what the action's tools do not list", async ({
    expect,
  }) => {
    const key = uniqueId("unlisted");
    const { echo, risky } = await registerEcho(key);
    const plan = {
      steps: [
        { tool: echo, params: {} },
        { tool: risky, params: {} },
      ],
    };
    const run = RunView.parse(await waitForRun(await startSteps([planStep({ tools: [echo] })], plan)));
    expect(run.error).toMatchObject({ code: "plan.tool_not_allowed", step: "execute" });
    expect(run.error?.message).toContain("plan.steps.1.tool");
    // Refused by the step itself: no child was even asked for.
    expect(run.children).toEqual([]);
    expect(await childEntries(run.run_id)).toEqual([]);
  });

  it("fail plan.tool_not_allowed when the plan grants a tool the run's own allowlist does not", async ({ expect }) => {
    const plan = { steps: [{ tool: "tool:list_artifacts", params: {} }] };
    const runId = await startSteps(
      [planStep({ tools: ["tool:write_artifact", "tool:list_artifacts"] })],
      plan,
      // The run may list artifacts, not write them: the plan's grant of write_artifact goes beyond it.
      { tools: ["tool:list_artifacts", "mcp:other/*"] },
    );
    const run = RunView.parse(await waitForRun(runId));
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "plan.tool_not_allowed", step: "execute" });
    expect(run.error?.message).toContain('tools.0: "tool:write_artifact" is not on this run\'s tools allowlist');
    expect(run.error?.message).not.toContain("tools.1");
    // The child wait finished failed, and no child run was created.
    expect(run.children).toEqual([]);
    const finished = (await journal(runId)).filter((entry) => entry.kind === "child.finished");
    expect(finished.map((entry) => [entry.body.child_run_id, entry.body.status, entry.body.error?.code])).toEqual([
      [null, "failed", "plan.tool_not_allowed"],
    ]);
  });

  it("wait while a high-risk plan step waits at the child's approval gate, and finish once it is approved", async ({
    expect,
  }) => {
    const key = uniqueId("risky");
    const { echo, risky } = await registerEcho(key);
    const plan = {
      steps: [
        { tool: echo, params: { n: 1 } },
        { tool: risky, params: { n: "${step[0].data.body.n}" }, depends_on: [0] },
      ],
    };
    const runId = await startSteps([planStep({ tools: [echo, risky] })], plan);
    const waiting = await waitForRun(runId, (run) => run.children.length === 1 || run.status === "failed");
    const childId = String(waiting.children[0]?.run_id);
    const child = await waitForRun(childId, (run) => gatesOf(run).some((gate) => gate.status === "open"));
    const [gate] = gatesOf(child);
    expect(gate).toMatchObject({ kind: "approval", node: "step-1", status: "open" });
    expect((await view(runId)).status).toBe("waiting");
    expect(await hits(key)).toBe(1);
    const answered = await api("POST", `/v1/runs/${childId}/gates/${gate?.gate_id}`, {
      response: { approved: true },
    });
    expect(answered.status).toBe(200);
    const run = RunView.parse(await waitForRun(runId));
    expect(run.status).toBe("completed");
    const results = resultsOf(await view(childId));
    expect(results.map((result) => result.success)).toEqual([true, true]);
    expect(run.output).toEqual({ result: { plan: { results } } });
    expect(await hits(key)).toBe(2);
  });

  it("create the child in drafting under mode approval; approving it runs the plan and finishes the step", async ({
    expect,
  }) => {
    const key = uniqueId("drafted");
    const { echo } = await registerEcho(key);
    const plan = { steps: [{ tool: echo, params: { n: 1 } }] };
    const runId = await startSteps([planStep({ tools: [echo], mode: "approval" })], plan);
    const waiting = await waitForRun(runId, (run) => run.children.length === 1 || run.status === "failed");
    const childId = String(waiting.children[0]?.run_id);
    expect((await view(childId)).status).toBe("drafting");
    expect(await hits(key)).toBe(0);
    expect((await api("POST", `/v1/runs/${childId}/approve`)).status).toBe(200);
    const run = RunView.parse(await waitForRun(runId));
    expect(run.status).toBe("completed");
    expect((await view(childId)).mode).toBe("approval");
    expect(await hits(key)).toBe(1);
  });

  it("ask the child's input gate for required plan inputs, as a plan run does", async ({ expect }) => {
    const key = uniqueId("inputs");
    const { echo } = await registerEcho(key);
    const plan = {
      inputs: { type: "object", required: ["who"], properties: { who: { type: "string" } } },
      steps: [{ tool: echo, params: { greet: "${input.who}" } }],
    };
    const runId = await startSteps([planStep({ tools: [echo] })], plan);
    const waiting = await waitForRun(runId, (run) => run.children.length === 1 || run.status === "failed");
    const childId = String(waiting.children[0]?.run_id);
    const child = await waitForRun(childId, (run) => gatesOf(run).some((gate) => gate.status === "open"));
    const [gate] = gatesOf(child);
    expect(gate).toMatchObject({ kind: "input", node: "inputs" });
    await api("POST", `/v1/runs/${childId}/gates/${gate?.gate_id}`, { response: { who: "ada" } });
    const run = RunView.parse(await waitForRun(runId));
    expect(run.status).toBe("completed");
    expect(JSON.stringify(run.output)).toContain('"greet":"ada"');
  });

  it("fail with the child's error when a fail-fast plan fails", async ({ expect }) => {
    const key = uniqueId("fails");
    const status = uniqueId("status");
    await register({
      actions: [
        {
          id: status,
          kind: "http",
          implementation: { method: "GET", url_template: `${httpTarget()}/status/{{code}}/{{key}}` },
        },
      ],
    });
    const plan = { steps: [{ tool: status, params: { code: 404, key } }], config: { failFast: true, maxRetries: 0 } };
    const run = RunView.parse(await waitForRun(await startSteps([planStep({ tools: [status] })], plan)));
    expect(run.status).toBe("failed");
    const child = await view(run.children[0]?.run_id ?? "");
    expect(child.status).toBe("failed");
    expect(child.error?.code).toBe("http.status");
    expect(run.error).toMatchObject({ code: "http.status", step: "execute" });
  });

  it("refuse approved_steps where the deployment does not allow pre-approval", async ({ expect }) => {
    const key = uniqueId("preapproved");
    const { risky } = await registerEcho(key);
    const plan = { steps: [{ tool: risky, params: {} }] };
    const run = RunView.parse(
      await waitForRun(await startSteps([planStep({ tools: [risky], approved_steps: ["step-0"] })], plan)),
    );
    expect(run.error).toMatchObject({ code: "plan.preapproval_disabled", step: "execute" });
    expect(run.children).toEqual([]);
    expect(await hits(key)).toBe(0);
  });
});

describe("plan actions at registration", () => {
  it("refuse a grant that names no action, standard tool or MCP tool", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      actions: [
        {
          id: uniqueId("planner"),
          kind: "plan",
          implementation: { tools: ["tool:no_such_tool", "mcp:Bad Server/x", "fine_action", "mcp:srv/*"] },
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(detailsOf(response.json).map((detail) => [detail.path, (detail as { code?: string }).code])).toEqual([
      ["actions.0.implementation.tools.0", "definition.unknown_tool"],
      ["actions.0.implementation.tools.1", "definition.invalid_grant"],
    ]);
  });
});
