import { runInDurableObject } from "cloudflare:test";
import { describe, it } from "vitest";
import { toolInputSchema } from "../../catalog/llm-tools.ts";
import { RunStore } from "../../coordinator/storage.ts";
import { checkJsonSchema, validateJson } from "../../lib/json-schema.ts";
import type { RunSnapshot } from "../../schemas/resolved.ts";
import { TOOL_NAMES } from "../../schemas/tools.ts";
import { stubOf } from "./durable-helpers.ts";
import { api, httpTarget, llmServer, mcpServer, register, start, uniqueId } from "./helpers.ts";

/** An inline model on the local LLM server; `pricing` when asked. */
const model = (priced = false) => ({
  provider: "openai-compatible",
  model_id: "test-model",
  base_url: `${llmServer()}/v1`,
  ...(priced ? { pricing: { input_per_mtok: 1, output_per_mtok: 2 } } : {}),
});

const prompt = (produces?: Record<string, unknown>) => ({
  messages: [{ role: "user", template: "Do {{task}}" }],
  ...(produces === undefined ? {} : { produces }),
});

/** A registered llm action `id` with `extra` implementation fields (its tools, limits). */
const llmAction = (id: string, extra: Record<string, unknown>) => ({
  id,
  kind: "llm",
  implementation: { prompt: prompt(), model: model(), ...extra },
});

const httpGet = (url: string) => ({ kind: "http", implementation: { method: "GET", url_template: url } });

/** The details of a registration's 400 `definition.invalid`; fails when it registered. */
async function refused(bundle: Record<string, unknown>): Promise<{ path: string; code: string; message: string }[]> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 400 || response.json.error.code !== "definition.invalid") {
    throw new Error(`expected 400 definition.invalid, got ${response.status}: ${JSON.stringify(response.json)}`);
  }
  return response.json.error.details;
}

/** The `{ path, code }` of each detail, for comparing with what a test expects. */
const problems = (details: { path: string; code: string }[]) => details.map(({ path, code }) => ({ path, code }));

/** The snapshot a run's coordinator keeps, read from its storage. */
function frozenSnapshot(runId: string): Promise<RunSnapshot | undefined> {
  return runInDurableObject(stubOf(runId), (_instance, state) => new RunStore(state.storage.sql).load()?.snapshot);
}

describe("registration of an llm action's tools", () => {
  it("refuses a tool that waits (human, sleep, event), an llm with tools of its own and a workflow chosen at run time", async ({
    expect,
  }) => {
    const [nap, agent, child, llm] = [uniqueId("nap"), uniqueId("agent"), uniqueId("child"), uniqueId("llm")];
    const details = await refused({
      workflows: [
        { id: child, nodes: { a: { task: { steps: [{ ref: "s", action: httpGet(`${httpTarget()}/json`) }] } } } },
      ],
      actions: [
        { id: nap, kind: "sleep", implementation: { duration_ms: 10 } },
        llmAction(agent, { tools: ["tool:read_file"] }),
        llmAction(llm, {
          tools: [
            { action: { kind: "human", implementation: { prompt_template: "ok?", input_schema: {} } }, name: "ask" },
            nap,
            { action: { kind: "event", implementation: { name: "done" } }, name: "wait" },
            agent,
            {
              action: { kind: "workflow", implementation: { workflow: { from: "$.input.w", allowed: [child] } } },
              name: "pick",
            },
            // A workflow tool that names its workflow is a nested agent: allowed.
            { action: { kind: "workflow", implementation: { workflow: child } }, name: "nested" },
          ],
        }),
      ],
    });
    const at = "actions.2.implementation.tools";
    expect(problems(details)).toEqual([
      { path: `${at}.0.action`, code: "definition.invalid_tool" },
      { path: `${at}.1`, code: "definition.invalid_tool" },
      { path: `${at}.2.action`, code: "definition.invalid_tool" },
      { path: `${at}.3`, code: "definition.invalid_tool" },
      { path: `${at}.4.action`, code: "definition.invalid_tool" },
    ]);
    expect(details[0]?.message).toContain("a human action cannot be a tool");
    expect(details[3]?.message).toContain("an llm action with tools of its own cannot be a tool");
    expect(details[4]?.message).toContain("{ from, allowed }");
  });

  it("refuses duplicate names, a name that cannot be defaulted and a pin on a tool that is not an MCP tool", async ({
    expect,
  }) => {
    const [server, fetcher] = [uniqueId("srv"), uniqueId("fetch")];
    const details = await refused({
      mcp_servers: [{ id: server, url: `${mcpServer()}/mcp` }],
      actions: [
        { id: fetcher, ...httpGet(`${httpTarget()}/json`) },
        llmAction(uniqueId("llm"), {
          tools: [
            "tool:read_file",
            { action: fetcher, name: "read_file" },
            `mcp:${server}/get.weather`,
            { action: httpGet(`${httpTarget()}/json`) },
            { action: "tool:list_files", pin: `sha256:${"0".repeat(64)}` },
            { action: `mcp:${server}/get.weather`, name: "weather", pin: `sha256:${"0".repeat(64)}` },
          ],
        }),
      ],
    });
    const at = "actions.1.implementation.tools";
    expect(problems(details)).toEqual([
      { path: `${at}.1.name`, code: "definition.duplicate_tool" },
      { path: `${at}.2`, code: "definition.invalid_tool" },
      { path: `${at}.3.name`, code: "definition.invalid_tool" },
      { path: `${at}.4.pin`, code: "definition.invalid_tool" },
    ]);
    expect(details[0]?.message).toContain('tools.0 is named "read_file" too');
    expect(details[1]?.message).toContain('"get.weather" is not a valid tool name');
  });

  it("refuses an unknown standard tool, action or MCP server, and checks an inline tool action as any action", async ({
    expect,
  }) => {
    const details = await refused({
      actions: [
        llmAction(uniqueId("llm"), {
          tools: [
            "tool:launch_rockets",
            uniqueId("ghost"),
            `mcp:${uniqueId("nosrv")}/echo`,
            { action: httpGet("{{#if}}"), name: "broken" },
          ],
        }),
      ],
    });
    const at = "actions.0.implementation.tools";
    expect(problems(details)).toEqual([
      { path: `${at}.0`, code: "definition.unknown_tool" },
      { path: `${at}.1`, code: "definition.unknown_reference" },
      { path: `${at}.2`, code: "definition.unknown_reference" },
      { path: `${at}.3.action.implementation.url_template`, code: "definition.invalid_template" },
    ]);
  });

  it("refuses max_turns, budget and parallel_tool_calls without tools", async ({ expect }) => {
    const details = await refused({
      actions: [llmAction(uniqueId("llm"), { max_turns: 3, budget: { tokens: 100 }, parallel_tool_calls: false })],
    });
    expect(problems(details)).toEqual(
      ["max_turns", "budget", "parallel_tool_calls"].map((field) => ({
        path: `actions.0.implementation.${field}`,
        code: "definition.missing_tools",
      })),
    );
  });

  it("refuses budget.cost_usd when the model or a fallback model has no pricing, inline or registered", async ({
    expect,
  }) => {
    const [priced, unpriced] = [uniqueId("priced"), uniqueId("unpriced")];
    const details = await refused({
      models: [
        { id: priced, ...model(true) },
        { id: unpriced, ...model() },
      ],
      actions: [
        llmAction(uniqueId("llm"), {
          model: model(),
          fallback_models: [priced, unpriced, model(true)],
          tools: ["tool:read_file"],
          budget: { cost_usd: 0.5 },
        }),
        // Tokens need no pricing.
        llmAction(uniqueId("llm"), { tools: ["tool:read_file"], budget: { tokens: 1000 } }),
      ],
    });
    expect(problems(details)).toEqual([
      { path: "actions.0.implementation.model", code: "definition.missing_pricing" },
      { path: "actions.0.implementation.fallback_models.1", code: "definition.missing_pricing" },
    ]);
  });

  it("refuses a prompt whose produces declares tool_calls, turns or usage on an llm with tools", async ({ expect }) => {
    const registered = uniqueId("prompt");
    const produces = (key: string) => ({ type: "object", properties: { answer: { type: "string" }, [key]: {} } });
    const details = await refused({
      prompts: [{ id: registered, ...prompt(produces("usage")) }],
      actions: [
        llmAction(uniqueId("llm"), { prompt: prompt(produces("tool_calls")), tools: ["tool:read_file"] }),
        llmAction(uniqueId("llm"), { prompt: registered, tools: ["tool:read_file"] }),
        // Without tools the keys are the answer's own.
        llmAction(uniqueId("llm"), { prompt: prompt(produces("turns")) }),
      ],
    });
    expect(problems(details)).toEqual([
      { path: "actions.0.implementation.prompt.produces", code: "definition.reserved_output_key" },
      { path: "actions.1.implementation.prompt", code: "definition.reserved_output_key" },
    ]);
  });
});

describe("resolution of an llm action's tools", () => {
  it("freezes each tool's name, input schema and action (with its undo) into the run's snapshot", async ({
    expect,
  }) => {
    const [server, create, wf] = [uniqueId("srv"), uniqueId("create"), uniqueId("wf")];
    const requires = { type: "object", properties: { title: { type: "string" } }, required: ["title"] };
    const createAction = (path: string) => ({
      id: create,
      description: "Creates an item",
      requires,
      kind: "http",
      implementation: { method: "POST", url_template: `${httpTarget()}/${path}`, body: { title: "$.input.title" } },
      undo: { action: httpGet(`${httpTarget()}/undo`) },
    });
    const inline = { ...httpGet(`${httpTarget()}/json`), description: "Reads the feed" };
    const step = {
      ref: "agent",
      action: {
        kind: "llm",
        implementation: {
          prompt: prompt(),
          model: model(),
          tools: [
            create,
            { action: `mcp:${server}/echo`, description: "Echoes" },
            "tool:read_file",
            { action: inline, name: "feed" },
          ],
          max_turns: 4,
          parallel_tool_calls: false,
        },
      },
    };
    await register({
      mcp_servers: [{ id: server, url: `${mcpServer()}/mcp` }],
      actions: [createAction("json")],
      workflows: [{ id: wf, nodes: { main: { task: { steps: [step] } } } }],
    });
    const runId = await start(wf);
    const read = async () => (await frozenSnapshot(runId))?.tasks.main?.steps[0]?.action;
    const frozen = await read();
    if (frozen?.kind !== "llm") {
      throw new Error(`expected the llm step, got ${JSON.stringify(frozen)}`);
    }
    const { tools, max_turns: maxTurns, parallel_tool_calls: parallel } = frozen.implementation;
    expect({ maxTurns, parallel }).toEqual({ maxTurns: 4, parallel: false });
    const stepId = `${wf}/main/agent`;
    expect(tools?.map(({ name, description, input_schema }) => ({ name, description, input_schema }))).toEqual([
      { name: create, description: "Creates an item", input_schema: requires },
      { name: "echo", description: "Echoes", input_schema: null },
      { name: "read_file", description: undefined, input_schema: toolInputSchema("read_file") },
      { name: "feed", description: "Reads the feed", input_schema: { type: "object" } },
    ]);
    expect(tools?.[0]?.action).toMatchObject({
      id: create,
      version: 1,
      kind: "http",
      implementation: { url_template: `${httpTarget()}/json` },
      undo: { action: { id: `${create}/undo`, version: 0, kind: "http" } },
    });
    expect(tools?.[1]?.action).toMatchObject({
      id: `${stepId}/tools/echo`,
      version: 0,
      kind: "mcp",
      implementation: { tool: "echo", server: { id: server, version: 1, url: `${mcpServer()}/mcp` } },
    });
    expect(tools?.[2]?.action).toEqual({
      id: `${stepId}/tools/read_file`,
      version: 0,
      kind: "tool",
      implementation: { tool: "read_file" },
    });
    expect(tools?.[3]?.action).toMatchObject({ id: `${stepId}/tools/feed`, version: 0, kind: "http" });

    // A version registered later changes new runs, not this one.
    await register({ actions: [createAction("changed")] });
    expect(await read()).toEqual(frozen);
    const later = (await frozenSnapshot(await start(wf)))?.tasks.main?.steps[0]?.action;
    expect(later?.kind === "llm" && later.implementation.tools?.[0]?.action).toMatchObject({
      version: 2,
      implementation: { url_template: `${httpTarget()}/changed` },
    });
  });

  it("refuses at run start a registered tool that has since become an llm action with tools", async ({ expect }) => {
    const [inner, wf] = [uniqueId("inner"), uniqueId("wf")];
    const agent = { kind: "llm", implementation: { prompt: prompt(), model: model(), tools: [inner] } };
    await register({
      actions: [llmAction(inner, {})],
      workflows: [{ id: wf, nodes: { main: { task: { steps: [{ ref: "agent", action: agent }] } } } }],
    });
    await register({ actions: [llmAction(inner, { tools: ["tool:read_file"] })] });
    const response = await api("POST", `/v1/workflows/${wf}/runs`, { input: {} });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("definition.invalid_tool");
    expect(response.json.error.message).toContain("tools are one level deep");
  });

  it("refuses at run start a budget in dollars whose registered model has since lost its pricing", async ({
    expect,
  }) => {
    const [priced, wf] = [uniqueId("model"), uniqueId("wf")];
    const agent = {
      kind: "llm",
      implementation: { prompt: prompt(), model: priced, tools: ["tool:read_file"], budget: { cost_usd: 1 } },
    };
    await register({
      models: [{ id: priced, ...model(true) }],
      workflows: [{ id: wf, nodes: { main: { task: { steps: [{ ref: "agent", action: agent }] } } } }],
    });
    await register({ models: [{ id: priced, ...model() }] });
    const response = await api("POST", `/v1/workflows/${wf}/runs`, { input: {} });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("definition.invalid_tool");
    expect(response.json.error.message).toContain(`${priced}@2 has no "pricing"`);
  });

  it("refuses at run start an undo that is an llm action with tools", async ({ expect }) => {
    const [agent, wf] = [uniqueId("agent"), uniqueId("wf")];
    await register({
      actions: [llmAction(agent, { tools: ["tool:read_file"] })],
      workflows: [
        {
          id: wf,
          nodes: {
            main: {
              task: {
                steps: [{ ref: "s", action: { ...httpGet(`${httpTarget()}/json`), undo: { action: agent } } }],
              },
            },
          },
        },
      ],
    });
    const response = await api("POST", `/v1/workflows/${wf}/runs`, { input: {} });
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("definition.invalid_undo");
  });

  it("offers each standard tool's input as a JSON Schema the engine's validator accepts", ({ expect }) => {
    for (const name of TOOL_NAMES) {
      const schema = toolInputSchema(name);
      expect(checkJsonSchema(schema, name), name).toEqual([]);
      expect(schema, name).not.toHaveProperty("$schema");
      expect(toolInputSchema(name), name).toBe(schema);
    }
    // The schema still says what the tool takes.
    expect(validateJson(toolInputSchema("read_file"), { path: "a.txt" })).toEqual([]);
    expect(validateJson(toolInputSchema("read_file"), { file: "a.txt" })).not.toEqual([]);
  });
});
