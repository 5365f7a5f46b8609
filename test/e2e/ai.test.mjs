// The llm, mcp, vector and metric actions from real workerd (`wrangler dev --local`),
// where code generation is forbidden for real: the AI SDK and the MCP SDK must work
// without it. The LLM and MCP peers are started here, on 127.0.0.1, and named in the
// definitions. Workers AI and Vectorize are remote-only, so under --local the vector
// action fails with a clear vector.no_binding; Analytics Engine is simulated locally.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { startLlmServer } from "../../scripts/lib/llm-server.mjs";
import { startMcpPeer } from "../../scripts/lib/mcp-peer.mjs";
import { env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

/** @type {import("../../scripts/lib/llm-server.mjs").LlmServer} */
let llm;
/** @type {import("../../scripts/lib/mcp-peer.mjs").McpPeer} */
let mcp;

before(async () => {
  llm = await startLlmServer({ port: 0 });
  mcp = await startMcpPeer();
});

after(async () => {
  await llm?.close();
  await mcp?.close();
});

/**
 * Registers a one-node workflow over `steps` (plus `bundle`), runs it, returns the run.
 * @param {unknown[]} steps
 * @param {Record<string, unknown>} [extra]  workflow fields, e.g. `tools`
 * @param {Record<string, unknown[]>} [bundle]
 */
async function runSteps(steps, extra = {}, bundle = {}) {
  await env();
  const id = uid("ai");
  await register({
    ...bundle,
    workflows: [{ id, ...extra, nodes: { main: { task: { steps }, output_mapping: { "output.result": "$" } } } }],
  });
  const start = await startRun(id, { input: {} });
  assert.equal(start.status, 201, show(start));
  return waitForRun(start.json.run_id);
}

describe("ai actions in real workerd", () => {
  test("an llm step returns the object an OpenAI-compatible server answers, with tokens on the run", async () => {
    const run = await runSteps([
      {
        ref: "ask",
        action: {
          kind: "llm",
          implementation: {
            prompt: {
              messages: [{ role: "user", template: "Name {{thing}}" }],
              produces: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
            },
            model: {
              provider: "openai-compatible",
              model_id: "local",
              base_url: `${llm.url}/v1`,
              pricing: { input_per_mtok: 1, output_per_mtok: 2 },
            },
          },
        },
        input_mapping: { thing: "the sea" },
        output_mapping: { "output.name": "$.name" },
      },
    ]);
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    assert.equal(run.output.result.name, "Name the sea");
    assert.deepEqual(run.usage, { input_tokens: 3, output_tokens: 3, cost_usd: 0.000009 });
  });

  test("an mcp step calls echo on the reference server over Streamable HTTP", async () => {
    const server = uid("srv");
    const key = uid("key");
    const run = await runSteps(
      [
        {
          ref: "echo",
          action: { kind: "mcp", implementation: { server, tool: "echo" } },
          input_mapping: { message: "from workerd" },
          output_mapping: { "output.text": "$.content[0].text" },
        },
      ],
      { tools: [`mcp:${server}/echo`] },
      { mcp_servers: [{ id: server, url: `${mcp.url}/k/${key}/mcp` }] },
    );
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    assert.equal(run.output.result.text, "Echo: from workerd");
    assert.equal(mcp.stats(key).calls.length, 1);
  });

  test("a metric step writes to the locally simulated dataset; vector and workers-ai steps say their binding is remote-only", async () => {
    const metric = await runSteps([
      {
        ref: "m",
        action: { kind: "metric", implementation: { metric_name: "e2e_metric", value: { expr: "1 + 1" } } },
        output_mapping: { "output.value": "$.value" },
      },
    ]);
    assert.equal(metric.status, "completed", JSON.stringify(metric.error));
    assert.equal(metric.output.result.value, 2);
    const vector = await runSteps([
      { ref: "q", action: { kind: "vector", implementation: { index: "default", query_template: "x" } } },
    ]);
    assert.equal(vector.status, "failed");
    assert.equal(vector.error.code, "vector.no_binding", vector.error.message);
    const workersAi = await runSteps([
      {
        ref: "ask",
        action: {
          kind: "llm",
          implementation: {
            prompt: { messages: [{ role: "user", template: "hi" }] },
            model: { provider: "workers-ai", model_id: "@cf/meta/llama-3.1-8b-instruct" },
          },
        },
      },
    ]);
    assert.equal(workersAi.status, "failed");
    assert.equal(workersAi.error.code, "llm.no_binding", workersAi.error.message);
  });
});
