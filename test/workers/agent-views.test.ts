import { describe, it, vi } from "vitest";
import { NodeDetail } from "../../schemas/api.ts";
import {
  api,
  hits,
  httpStep,
  httpTarget,
  journal,
  llmServer,
  register,
  runWorkflow,
  singleTaskWorkflow,
  start,
  uniqueId,
  waitForRun,
} from "./helpers.ts";

// The node view of an agent step (GET /v1/runs/{id}/nodes/{node}, `agent`): its turns from the
// step records, its tool calls from the tool_call.* entries, against the local LLM server.

const PRICING = { input_per_mtok: 3, output_per_mtok: 15 };
const RETRY = { execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10, max_delay_ms: 20 } } };

async function postScript(key: string, turns: unknown[]): Promise<void> {
  const response = await fetch(`${llmServer()}/scripts/${key}`, {
    method: "POST",
    headers: { "content-type": "application/json" },
    body: JSON.stringify({ turns }),
  });
  if (response.status !== 200) {
    throw new Error(await response.text());
  }
}

/** An http action the agent may call, posting `{ ticket }` to `path` of the HTTP target. */
function ticketAction(id: string, path: string, extra: Record<string, unknown> = {}) {
  return {
    id,
    kind: "http",
    description: "Looks a ticket up",
    requires: { type: "object", required: ["ticket"], properties: { ticket: { type: "string" } } },
    implementation: { method: "POST", url_template: `${httpTarget()}${path}`, body: { ticket: "$.input.ticket" } },
    ...extra,
  };
}

/** The step's model: the local LLM server. */
function localModel(id: string) {
  return {
    id,
    provider: "openai-compatible",
    model_id: "local-echo",
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
    pricing: PRICING,
  };
}

/** An agent step over the script `script`, offering `tools`. */
function agentStep(script: string, model: string, tools: unknown[], extra: Record<string, unknown> = {}) {
  return {
    ref: "agent",
    action: {
      kind: "llm",
      implementation: {
        prompt: { messages: [{ role: "user", template: `Triage [[script:${script}]]` }] },
        model,
        tools,
        ...extra,
      },
    },
    output_mapping: { "output.agent": "$" },
  };
}

/**
 * Three tool calls over three turns: `lookup` (answers at once), then in one
 * turn `flaky` (a 503, then 200 after its action's retry) and a tool the step
 * does not offer (refused, never run), then the answer.
 */
async function runThreeCalls() {
  const ids = { lookup: uniqueId("lookup"), flaky: uniqueId("flaky"), model: uniqueId("model") };
  const keys = { script: uniqueId("agent"), lookup: uniqueId("hit"), flaky: uniqueId("flaky") };
  await postScript(keys.script, [
    { tool_calls: [{ name: "lookup", input: { ticket: "T-1" } }] },
    {
      tool_calls: [
        { name: "flaky", input: { ticket: "T-2" } },
        { name: "delete_everything", input: { all: true } },
      ],
    },
    { text: "T-1 and T-2 are printer fires." },
  ]);
  const tools = [
    { action: ids.lookup, name: "lookup" },
    { action: ids.flaky, name: "flaky" },
  ];
  const step = agentStep(keys.script, ids.model, tools, { max_turns: 5, budget: { tokens: 50_000 } });
  const run = await runWorkflow(
    singleTaskWorkflow(uniqueId("wf"), [step]),
    {},
    {
      actions: [
        ticketAction(ids.lookup, `/echo/lookup?key=${keys.lookup}`),
        ticketAction(ids.flaky, `/flaky/${keys.flaky}?fail=1`, RETRY),
      ],
      models: [localModel(ids.model)],
    },
  );
  return { run, keys };
}

describe("the node view of an agent step", () => {
  it("shows each turn and each tool call with its input, output or error, status and attempts, and the usage", async ({
    expect,
  }) => {
    const { run, keys } = await runThreeCalls();
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(await hits(keys.lookup)).toBe(1);

    const response = await api("GET", `/v1/runs/${run.run_id}/nodes/main`);
    expect(response.status).toBe(200);
    const detail = NodeDetail.parse(response.json);
    const agent = detail.invocations[0]?.agent;
    expect(agent?.step).toBe("agent");

    // Three model turns, each with its model, tokens, cost and finish reason.
    expect(agent?.turns.map((turn) => [turn.turn, turn.model, turn.provider, turn.finish_reason])).toEqual([
      [1, "local-echo", "openai-compatible", "tool-calls"],
      [2, "local-echo", "openai-compatible", "tool-calls"],
      [3, "local-echo", "openai-compatible", "stop"],
    ]);
    for (const turn of agent?.turns ?? []) {
      expect(turn.tokens.input).toBeGreaterThan(0);
      expect(turn.cost_usd).toBeGreaterThan(0);
    }
    expect(agent?.turns[2]?.answer).toBe("T-1 and T-2 are printer fires.");

    // Each tool call: where it was asked, its input, how it ended, and how often its action was called.
    const calls = agent?.tool_calls ?? [];
    expect(calls.map((call) => [call.turn, call.index, call.name, call.input, call.status, call.attempts])).toEqual([
      [1, 0, "lookup", { ticket: "T-1" }, "completed", 1],
      [2, 0, "flaky", { ticket: "T-2" }, "completed", 2],
      [2, 1, "delete_everything", { all: true }, "failed", 0],
    ]);
    expect(agent?.tool_calls_total).toBe(3);
    expect(calls[0]?.output).toMatchObject({ status: 200, body: { body: { ticket: "T-1" } } });
    expect(calls[1]?.output).toMatchObject({ status: 200 });
    expect(calls[2]?.error?.code).toBe("llm.unknown_tool");
    expect(calls[2]?.output).toBeUndefined();
    expect(calls[0]?.duration_ms).toBeGreaterThanOrEqual(0);
    // The provider's id of each call, as the journal's tool_call.requested has it.
    const requested = (await journal(run.run_id)).filter((entry) => entry.kind === "tool_call.requested");
    expect(calls.map((call) => call.call)).toEqual(requested.map((entry) => entry.body.call));

    // What the loop spent is the run's usage; the limits are the step's.
    expect({
      input_tokens: agent?.usage.tokens.input,
      output_tokens: agent?.usage.tokens.output,
      cost_usd: agent?.usage.cost_usd,
    }).toEqual(run.usage);
    expect(agent?.usage).toEqual(run.output.result.agent.usage);
    expect([agent?.budget, agent?.max_turns]).toEqual([{ tokens: 50_000 }, 5]);
  });

  it("shows the loop of the invocation's latest attempt: a retry starts the loop over", async ({ expect }) => {
    const ids = { lookup: uniqueId("lookup"), model: uniqueId("model") };
    const keys = { script: uniqueId("agent"), lookup: uniqueId("hit"), after: uniqueId("after") };
    // Each attempt replays the same conversation: one lookup, then the answer.
    await postScript(keys.script, [{ tool_calls: [{ name: "lookup", input: { ticket: "T-7" } }] }, { text: "done" }]);
    const once = { execution: { retry_policy: { max_attempts: 1 } } };
    const after = httpStep("after", `${httpTarget()}/flaky/${keys.after}?fail=1`, { on_failure: "retry" });
    const workflow = {
      id: uniqueId("wf"),
      nodes: {
        main: {
          task: {
            steps: [
              agentStep(keys.script, ids.model, [{ action: ids.lookup, name: "lookup" }]),
              { ...after, action: { ...after.action, ...once } },
            ],
          },
          retry: { max_attempts: 2, initial_delay_ms: 10 },
        },
      },
    };
    const run = await runWorkflow(
      workflow,
      {},
      { actions: [ticketAction(ids.lookup, `/echo/lookup?key=${keys.lookup}`)], models: [localModel(ids.model)] },
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(await hits(keys.lookup)).toBe(2);

    const detail = NodeDetail.parse((await api("GET", `/v1/runs/${run.run_id}/nodes/main`)).json);
    const invocation = detail.invocations[0];
    expect(invocation?.attempts).toBe(2);
    const agent = invocation?.agent;
    expect(agent?.turns.map((turn) => turn.turn)).toEqual([1, 2]);
    expect(agent?.tool_calls.map((call) => [call.turn, call.name, call.status])).toEqual([[1, "lookup", "completed"]]);
    expect(agent?.max_turns).toBe(8);
    expect(agent?.budget).toBeUndefined();
    // The run paid for both attempts' turns; the view's usage is the second's: half of it.
    expect((agent?.usage.tokens.input ?? 0) * 2).toBe(run.usage.input_tokens);
  });

  it("shows a call running while its step waits, and cancelled with the reason once the run is cancelled", async ({
    expect,
  }) => {
    const ids = { slow: uniqueId("slow"), model: uniqueId("model") };
    const script = uniqueId("agent");
    await postScript(script, [{ tool_calls: [{ name: "slow", input: { ticket: "T-9" } }] }, { text: "never asked" }]);
    const step = agentStep(script, ids.model, [{ action: ids.slow, name: "slow" }]);
    const workflow = singleTaskWorkflow(uniqueId("wf"), [step]);
    await register({
      actions: [ticketAction(ids.slow, "/slow?ms=5000")],
      models: [localModel(ids.model)],
      workflows: [workflow],
    });
    const runId = await start(workflow.id);
    const nodeView = async () =>
      NodeDetail.parse((await api("GET", `/v1/runs/${runId}/nodes/main`)).json).invocations[0]?.agent;

    // The first turn asked for the tool; the call runs while the step waits.
    await vi.waitUntil(async () => (await nodeView())?.tool_calls[0]?.status === "running", { timeout: 10_000 });
    const running = await nodeView();
    expect(running?.turns.map((turn) => turn.finish_reason)).toEqual(["tool-calls"]);
    expect(running?.tool_calls).toEqual([
      {
        turn: 1,
        index: 0,
        name: "slow",
        call: expect.any(String),
        input: { ticket: "T-9" },
        status: "running",
        attempts: 1,
      },
    ]);

    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`, { reason: "enough" });
    expect(cancelled.status).toBe(200);
    await waitForRun(runId);
    const [call] = (await nodeView())?.tool_calls ?? [];
    expect(call?.status).toBe("cancelled");
    expect(call?.error?.code).toBe("tool_call.cancelled");
    expect(call?.output).toBeUndefined();
  });
});
