import { describe, it } from "vitest";
import {
  api,
  gateOpenOrSettled,
  hits,
  register,
  start,
  waitForRun,
  httpTarget,
  journal,
  llmServer,
  mcpServer,
  runWorkflow,
  singleTaskWorkflow,
  uniqueId,
  verifyRun,
  postLlmScript,
} from "./helpers.ts";

// An `llm` step with tools, against the local LLM server (scripted turns), the HTTP target and the MCP reference server.

const PRICING = { input_per_mtok: 3, output_per_mtok: 15 };

function model(id: string, provider: "openai-compatible" | "anthropic" = "openai-compatible") {
  return {
    id,
    provider,
    model_id: "local-echo",
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
    pricing: PRICING,
  };
}

interface SeenRequest {
  model: string;
  messages: Array<{ role: string; text?: string; tool_calls?: unknown[]; tool_results?: unknown[] }>;
  tools?: string[];
  parallel_tool_calls?: boolean;
}

async function requestsSeen(key: string): Promise<SeenRequest[]> {
  return ((await (await fetch(`${llmServer()}/requests/${key}`)).json()) as { requests: SeenRequest[] }).requests;
}

interface McpStats {
  calls: { name: string; arguments: unknown }[];
}

async function mcpStats(key: string): Promise<McpStats> {
  return (await (await fetch(`${mcpServer()}/_stats/${key}`)).json()) as McpStats;
}

/** A registered http action the agent may call: the HTTP target echoes it, counted under `key`. */
function lookupAction(id: string, key: string) {
  return {
    id,
    kind: "http",
    description: "Looks a ticket up",
    requires: { type: "object", required: ["ticket"], properties: { ticket: { type: "string" } } },
    implementation: {
      method: "POST",
      url_template: `${httpTarget()}/echo/lookup?key=${key}`,
      body: { ticket: "$.input.ticket" },
    },
  };
}

/** An agent step: its prompt names the script, its tools are given. */
function agentStep(script: string, modelId: string, tools: unknown[], extra: Record<string, unknown> = {}) {
  return {
    ref: "agent",
    action: {
      kind: "llm",
      implementation: {
        prompt: { messages: [{ role: "user", template: `Triage the ticket [[script:${script}]]` }] },
        model: modelId,
        tools,
        ...extra,
      },
    },
    output_mapping: { "output.agent": "$" },
  };
}

describe("an llm step with tools", () => {
  it("runs three turns: an http tool, then an MCP tool twice in parallel, then answers; each call ran once", async ({
    expect,
  }) => {
    const script = uniqueId("agent");
    const target = uniqueId("hit");
    const mcpKey = uniqueId("mcp");
    const ids = { lookup: uniqueId("lookup"), model: uniqueId("model"), server: uniqueId("srv") };
    await postLlmScript(script, [
      { tool_calls: [{ name: "lookup", input: { ticket: "T-1" } }] },
      {
        tool_calls: [
          { name: "echo", input: { message: "first" } },
          { name: "echo", input: { message: "second" } },
        ],
      },
      { text: "Ticket T-1 is a printer fire." },
    ]);
    const workflow = singleTaskWorkflow(
      uniqueId("wf"),
      [agentStep(script, ids.model, [{ action: ids.lookup, name: "lookup" }, `mcp:${ids.server}/echo`])],
      { tools: [`mcp:${ids.server}/echo`] },
    );
    const run = await runWorkflow(
      workflow,
      {},
      {
        actions: [lookupAction(ids.lookup, target)],
        models: [model(ids.model)],
        mcp_servers: [{ id: ids.server, url: `${mcpServer()}/k/${mcpKey}/mcp` }],
      },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const output = run.output.result.agent;
    expect(output.content).toBe("Ticket T-1 is a printer fire.");
    expect(output.turns).toBe(3);
    expect(output.tool_calls.map((call: { name: string; input: unknown }) => [call.name, call.input])).toEqual([
      ["lookup", { ticket: "T-1" }],
      ["echo", { message: "first" }],
      ["echo", { message: "second" }],
    ]);
    expect(output.tool_calls[0].output.body.body).toEqual({ ticket: "T-1" });
    expect(output.tool_calls[1].output.content[0].text).toBe("Echo: first");
    // Each tool ran exactly once, and the model was asked three times.
    expect(await hits(target)).toBe(1);
    expect((await mcpStats(mcpKey)).calls.map((call) => call.arguments)).toEqual(
      expect.arrayContaining([{ message: "first" }, { message: "second" }]),
    );
    expect((await mcpStats(mcpKey)).calls).toHaveLength(2);
    const requests = await requestsSeen(script);
    expect(requests).toHaveLength(3);
    // Usage: the output's is every turn's, and the run's is the same.
    expect(output.usage.tokens.input).toBeGreaterThan(0);
    expect(run.usage).toEqual({
      input_tokens: output.usage.tokens.input,
      output_tokens: output.usage.tokens.output,
      cost_usd: output.usage.cost_usd,
    });

    const entries = await journal(run.run_id);
    const kinds = entries.map((entry) => entry.kind);
    expect(kinds.filter((kind) => kind === "tool_call.requested")).toHaveLength(3);
    expect(kinds.filter((kind) => kind === "tool_call.completed")).toHaveLength(3);
    // The two echo calls were both dispatched before either completed.
    const echoes = entries.filter((entry) => entry.kind.startsWith("tool_call.") && entry.body.name === "echo");
    expect(echoes.map((entry) => entry.kind).slice(2, 4)).toEqual(["tool_call.dispatched", "tool_call.dispatched"]);
    expect((await verifyRun(run.run_id)).ok).toBe(true);
  });

  it("fails llm.max_turns_exceeded when its last turn still asks for tools, and runs none of that turn's calls", async ({
    expect,
  }) => {
    const { run, target } = await runAgent({
      turns: [{ tool_calls: [{ name: "lookup", input: { ticket: "T-2" } }] }],
      extra: { max_turns: 1 },
    });
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "llm.max_turns_exceeded", retryable: false, step: "agent" });
    expect(await hits(target)).toBe(0);
    // The turn that was made is paid for.
    expect(run.usage.input_tokens).toBeGreaterThan(0);
  });

  it("stops at its token budget with llm.budget_exceeded, before the calls of the turn that passed it", async ({
    expect,
  }) => {
    const { run, target } = await runAgent({
      turns: [{ tool_calls: [{ name: "lookup", input: { ticket: "T-3" } }] }, { text: "never asked" }],
      extra: { budget: { tokens: 1 } },
    });
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "llm.budget_exceeded", retryable: false });
    expect(run.error.message).toMatch(/tokens of a budget of 1/);
    expect(await hits(target)).toBe(0);
    expect(run.usage.input_tokens).toBeGreaterThan(0);
  });

  it("answers a call to a tool it does not offer, or with an input its schema refuses, without running it", async ({
    expect,
  }) => {
    const { run, target, script } = await runAgent({
      turns: [
        {
          tool_calls: [
            { name: "lookup", input: { wrong: 1 } },
            { name: "delete_everything", input: {} },
          ],
        },
        { text: "I will stop." },
      ],
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const calls = run.output.result.agent.tool_calls;
    expect(calls.map((call: { error?: { code: string } }) => call.error?.code)).toEqual([
      "action.invalid_input",
      "llm.unknown_tool",
    ]);
    expect(await hits(target)).toBe(0);
    // The model read both errors in its second turn.
    const second = (await requestsSeen(script))[1];
    const results = (second?.messages ?? []).flatMap(
      (message) => (message.tool_results ?? []) as Array<{ content: string }>,
    );
    expect(results.map((result) => result.content)).toEqual([
      expect.stringContaining("action.invalid_input"),
      expect.stringContaining("llm.unknown_tool"),
    ]);
  });

  it("runs at most 32 calls of one turn and answers the rest llm.too_many_calls", async ({ expect }) => {
    const calls = Array.from({ length: 34 }, (_, i) => ({ name: "lookup", input: { ticket: `T-${i}` } }));
    const { run, target } = await runAgent({ turns: [{ tool_calls: calls }, { text: "enough" }] });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const codes = run.output.result.agent.tool_calls.map((call: { error?: { code: string } }) => call.error?.code);
    expect(codes.filter((code: string | undefined) => code === undefined)).toHaveLength(32);
    expect(codes.slice(32)).toEqual(["llm.too_many_calls", "llm.too_many_calls"]);
    expect(await hits(target)).toBe(32);
  });

  it("refuses a tool: tool outside the run's allowlist before the model is called", async ({ expect }) => {
    const { run, script } = await runAgent({
      turns: [{ text: "never asked" }],
      tools: (ids) => [{ action: ids.lookup, name: "lookup" }, "tool:list_artifacts"],
    });
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "llm.tool_not_allowed", retryable: false });
    expect(run.error.message).toContain('"tool:list_artifacts"');
    expect(await requestsSeen(script)).toEqual([]);
  });

  it("with parallel_tool_calls false, asks the model for one call a turn and runs the calls it gets one at a time", async ({
    expect,
  }) => {
    const { run, script } = await runAgent({
      turns: [
        {
          tool_calls: [
            { name: "lookup", input: { ticket: "A" } },
            { name: "lookup", input: { ticket: "B" } },
          ],
        },
        { text: "done" },
      ],
      extra: { parallel_tool_calls: false },
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect((await requestsSeen(script))[0]?.parallel_tool_calls).toBe(false);
    const order = (await journal(run.run_id))
      .filter((entry) => entry.kind === "tool_call.dispatched" || entry.kind === "tool_call.completed")
      .map((entry) => `${entry.kind.slice("tool_call.".length)} ${entry.body.index}`);
    expect(order).toEqual(["dispatched 0", "completed 0", "dispatched 1", "completed 1"]);
  });

  it("holds tool calls back to the run's max_parallel", async ({ expect }) => {
    const { run } = await runAgent({
      turns: [
        {
          tool_calls: [
            { name: "lookup", input: { ticket: "A" } },
            { name: "lookup", input: { ticket: "B" } },
          ],
        },
        { text: "done" },
      ],
      workflow: { max_parallel: 1 },
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const order = (await journal(run.run_id))
      .filter((entry) => entry.kind === "tool_call.dispatched" || entry.kind === "tool_call.completed")
      .map((entry) => `${entry.kind.slice("tool_call.".length)} ${entry.body.index}`);
    expect(order).toEqual(["dispatched 0", "completed 0", "dispatched 1", "completed 1"]);
  });

  it("repairs a final answer that does not match produces, on the model that gave it, as one more turn", async ({
    expect,
  }) => {
    const script = uniqueId("agent");
    const ids = { lookup: uniqueId("lookup"), model: uniqueId("model") };
    await postLlmScript(script, [
      { tool_calls: [{ name: "lookup", input: { ticket: "T-5" } }] },
      { json: { severity: "apocalyptic" } },
      { json: { severity: "high" } },
    ]);
    const step = agentStep(script, ids.model, [{ action: ids.lookup, name: "lookup" }]);
    const prompt = {
      messages: [{ role: "user", template: `Triage [[script:${script}]]` }],
      produces: {
        type: "object",
        required: ["severity"],
        properties: { severity: { enum: ["low", "high"] } },
        additionalProperties: false,
      },
    };
    const agent = { ...step, action: { ...step.action, implementation: { ...step.action.implementation, prompt } } };
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [agent]),
      {},
      {
        actions: [lookupAction(ids.lookup, uniqueId("hit"))],
        models: [model(ids.model)],
      },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const output = run.output.result.agent;
    expect(output.severity).toBe("high");
    expect(output.turns).toBe(3);
    expect(output.tool_calls).toHaveLength(1);
    // The repair told the model what was wrong.
    const requests = await requestsSeen(script);
    expect(requests).toHaveLength(3);
    expect(requests[2]?.messages.at(-1)?.text).toContain("does not match the required JSON Schema");
    // The step's summary in the run view adds up both dispatches' model calls.
    const summary = run.nodes.main.invocations[0].steps.find((step: { step: string }) => step.step === "agent");
    expect(summary.tokens).toEqual(output.usage.tokens);
    expect(summary.attempts).toBe(3);
  });

  it("speaks Anthropic's tool_use and tool_result as well as OpenAI's tool_calls", async ({ expect }) => {
    const { run, target, script } = await runAgent({
      turns: [{ tool_calls: [{ name: "lookup", input: { ticket: "T-9" } }] }, { text: "Anthropic done." }],
      provider: "anthropic",
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.agent.content).toBe("Anthropic done.");
    expect(await hits(target)).toBe(1);
    const second = (await requestsSeen(script))[1];
    expect(second?.messages.map((message) => message.role)).toEqual(["user", "assistant", "tool"]);
  });
});

describe("an agent's high-risk tools, workflow tools and undos", () => {
  it("asks an approval for each call of a high-risk tool: an approved call runs, a rejected one is told to the model", async ({
    expect,
  }) => {
    const script = uniqueId("agent");
    const page = uniqueId("page");
    const ids = { page: uniqueId("page-oncall"), model: uniqueId("model"), wf: uniqueId("wf") };
    await postLlmScript(script, [
      {
        tool_calls: [
          { name: "page", input: { who: "alice" } },
          { name: "page", input: { who: "bob" } },
        ],
      },
      { text: "Paged alice; bob was not approved." },
    ]);
    await register({
      actions: [{ ...pageAction(ids.page, page), risk: "high" }],
      models: [model(ids.model)],
      workflows: [singleTaskWorkflow(ids.wf, [agentStep(script, ids.model, [{ action: ids.page, name: "page" }])])],
    });
    const runId = await start(ids.wf);
    const waiting = await waitForRun(
      runId,
      (run) => run.gates?.filter((gate: any) => gate.status === "open").length === 2,
    );
    const gates = waiting.gates.filter((gate: any) => gate.status === "open");
    expect(gates.map((gate: any) => gate.kind)).toEqual(["approval", "approval"]);
    expect(gates[0].prompt).toContain('"who":"alice"');
    expect(waiting.waiting_for[0]).toMatchObject({ kind: "tools", turn: 1 });
    expect(await hits(page)).toBe(0);
    // The node view shows both calls waiting for their gates.
    const node = (await api("GET", `/v1/runs/${runId}/nodes/main`)).json;
    expect(node.invocations[0].agent.tool_calls.map((call: any) => [call.status, call.gate_id])).toEqual([
      ["approval", gates[0].gate_id],
      ["approval", gates[1].gate_id],
    ]);
    await api("POST", `/v1/runs/${runId}/gates/${gates[0].gate_id}`, { response: { approved: true } });
    await api("POST", `/v1/runs/${runId}/gates/${gates[1].gate_id}`, {
      response: { approved: false, reason: "bob is on leave" },
    });
    const run = await waitForRun(runId);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(await hits(page)).toBe(1);
    const calls = run.output.result.agent.tool_calls;
    expect(calls[0].output.body.body).toEqual({ who: "alice" });
    expect(calls[1].error).toEqual({
      code: "approval.rejected",
      message: "the call of tool page was not approved: bob is on leave",
    });
    // The model was told: bob's call was denied, with the reason.
    const second = (await requestsSeen(script))[1];
    const results = (second?.messages ?? []).flatMap(
      (message) => (message.tool_results ?? []) as Array<{ content: string }>,
    );
    expect(results[1]?.content).toContain("bob is on leave");
    const entries = await journal(runId);
    const requested = entries.filter((entry) => entry.kind === "approval.requested");
    expect(requested.map((entry) => entry.body.tool_call)).toEqual([
      expect.objectContaining({ turn: 1, index: 0, name: "page" }),
      expect.objectContaining({ turn: 1, index: 1, name: "page" }),
    ]);
    expect((await verifyRun(runId)).ok).toBe(true);
  });

  it("cancelling the run while a tool call waits for approval expires its gate", async ({ expect }) => {
    const script = uniqueId("agent");
    const ids = { page: uniqueId("page-oncall"), model: uniqueId("model"), wf: uniqueId("wf") };
    await postLlmScript(script, [{ tool_calls: [{ name: "page", input: { who: "carol" } }] }]);
    await register({
      actions: [{ ...pageAction(ids.page, uniqueId("page")), risk: "high" }],
      models: [model(ids.model)],
      workflows: [singleTaskWorkflow(ids.wf, [agentStep(script, ids.model, [{ action: ids.page, name: "page" }])])],
    });
    const runId = await start(ids.wf);
    await waitForRun(runId, gateOpenOrSettled);
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { reason: "no paging today" })).status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("cancelled");
    expect(run.gates[0]).toMatchObject({ status: "expired" });
    const kinds = (await journal(runId)).map((entry) => entry.kind);
    expect(kinds).toContain("tool_call.cancelled");
  });

  it("runs a workflow tool as a child run and gives the model its output", async ({ expect }) => {
    const script = uniqueId("agent");
    const ids = { child: uniqueId("double"), model: uniqueId("model") };
    await postLlmScript(script, [{ tool_calls: [{ name: "double", input: { n: 21 } }] }, { text: "It is 42." }]);
    const doubler = {
      id: ids.child,
      input_schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
      nodes: {
        x2: {
          task: {
            steps: [
              {
                ref: "x2",
                action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n * 2" }] } },
                output_mapping: { "output.n": "$.n" },
              },
            ],
          },
          output_mapping: { "output.n": "$.n" },
        },
      },
    };
    const tool = { action: { kind: "workflow", implementation: { workflow: ids.child } }, name: "double" };
    await register({ workflows: [doubler] });
    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [agentStep(script, ids.model, [tool])]),
      {},
      {
        models: [model(ids.model)],
      },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.agent.tool_calls[0], JSON.stringify(run.output.result.agent.tool_calls)).toMatchObject({
      output: { n: 42 },
    });
    const started = (await journal(run.run_id)).find((entry) => entry.kind === "child.started");
    expect(started?.body).toMatchObject({ node: "main", step: "agent" });
    const child = await waitForRun(started?.body.child_run_id);
    expect(child.status).toBe("completed");
  });

  it("compensates a completed tool call with its tool's undo when the run fails later", async ({ expect }) => {
    const script = uniqueId("agent");
    const undone = uniqueId("undone");
    const ids = { page: uniqueId("page-oncall"), model: uniqueId("model"), wf: uniqueId("wf") };
    await postLlmScript(script, [{ tool_calls: [{ name: "page", input: { who: "dave" } }] }, { text: "paged" }]);
    const page = {
      ...pageAction(ids.page, uniqueId("page")),
      undo: {
        action: {
          kind: "http",
          implementation: {
            method: "POST",
            url_template: `${httpTarget()}/mark/${undone}`,
            body: { who: "$.input.who" },
          },
        },
      },
    };
    const failing = {
      ref: "fail",
      action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
    };
    const workflow = singleTaskWorkflow(
      ids.wf,
      [agentStep(script, ids.model, [{ action: ids.page, name: "page" }]), failing],
      {
        compensate: "on_failure",
      },
    );
    await register({ actions: [page], models: [model(ids.model)], workflows: [workflow] });
    const runId = await start(ids.wf);
    const run = await waitForRun(
      runId,
      (view) => view.compensation?.status === "completed" || view.compensation?.status === "failed",
    );
    expect(run.status).toBe("failed");
    expect(run.compensation.status).toBe("completed");
    expect(run.compensation.undos.map((undo: { step: string; status: string }) => [undo.step, undo.status])).toEqual([
      ["agent/page", "completed"],
    ]);
    expect(await hits(undone)).toBe(1);
  });
});

/** A registered http action that "pages" someone: the HTTP target echoes it, counted under `key`. */
function pageAction(id: string, key: string) {
  return {
    id,
    kind: "http",
    requires: { type: "object", required: ["who"], properties: { who: { type: "string" } } },
    implementation: {
      method: "POST",
      url_template: `${httpTarget()}/echo/page?key=${key}`,
      body: { who: "$.input.who" },
    },
  };
}

/** Runs one agent step over `turns` with a `lookup` http tool (counted under `target`). */
async function runAgent(options: {
  turns: unknown[];
  extra?: Record<string, unknown>;
  tools?: (ids: { lookup: string }) => unknown[];
  workflow?: Record<string, unknown>;
  provider?: "openai-compatible" | "anthropic";
}): Promise<{ run: any; target: string; script: string }> {
  const script = uniqueId("agent");
  const target = uniqueId("hit");
  const ids = { lookup: uniqueId("lookup"), model: uniqueId("model") };
  await postLlmScript(script, options.turns);
  const tools = options.tools?.(ids) ?? [{ action: ids.lookup, name: "lookup" }];
  const workflow = singleTaskWorkflow(
    uniqueId("wf"),
    [agentStep(script, ids.model, tools, options.extra)],
    options.workflow ?? {},
  );
  const run = await runWorkflow(
    workflow,
    {},
    {
      actions: [lookupAction(ids.lookup, target)],
      models: [model(ids.model, options.provider)],
    },
  );
  return { run, target, script };
}
