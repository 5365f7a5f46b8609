// The MCP server at /v1/mcp, through the official MCP SDK client in Node against `wrangler dev`
// (real workerd: no code generation at run time, one fresh server per request).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CreateTaskResultSchema, ElicitRequestSchema } from "@modelcontextprotocol/sdk/types.js";
import { api, env, register, show, uid } from "./helpers.mjs";

const OK_SCHEMA = { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } };
const SLEPT_SCHEMA = { type: "object", required: ["slept"], properties: { slept: { type: "boolean" } } };

/** A workflow of one context step: `v` = `n` + 1. */
function addOne(id, extra = {}) {
  return {
    id,
    description: `adds one (${id})`,
    input_schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
    output_schema: { type: "object", required: ["v"], properties: { v: { type: "integer" } } },
    nodes: {
      add: {
        task: {
          steps: [
            {
              ref: "add",
              action: { kind: "context", implementation: { updates: [{ path: "v", expr: "input.n + 1" }] } },
              input_mapping: { n: "$.input.n" },
              output_mapping: { "output.v": "$.v" },
            },
          ],
        },
        input_mapping: { n: "$.input.n" },
        output_mapping: { "output.v": "$.v" },
      },
    },
    ...extra,
  };
}

/** A workflow that sleeps `ms`, then answers `{ slept: true }`. */
function sleeper(id, ms) {
  return {
    id,
    mcp: { expose: true, description: "sleeps a while" },
    nodes: {
      nap: {
        task: {
          steps: [
            { ref: "nap", action: { kind: "sleep", implementation: { duration_ms: ms } } },
            {
              ref: "done",
              action: { kind: "context", implementation: { updates: [{ path: "slept", expr: "true" }] } },
              output_mapping: { "output.slept": "$.slept" },
            },
          ],
        },
        output_mapping: { "output.slept": "$.slept" },
      },
    },
  };
}

/** A workflow that asks a person `ok?` and answers `{ ok }`. */
function asker(id) {
  return {
    id,
    mcp: { expose: true },
    nodes: {
      ask: {
        task: {
          steps: [
            {
              ref: "ask",
              action: { kind: "human", implementation: { prompt_template: "ship {{what}}?", input_schema: OK_SCHEMA } },
              input_mapping: { what: "$.input.what" },
            },
            {
              ref: "after",
              action: { kind: "context", implementation: { updates: [{ path: "ok", expr: "input.ok" }] } },
              input_mapping: { ok: "$.state.ask.response.ok" },
              output_mapping: { "output.ok": "$.ok" },
            },
          ],
        },
        input_mapping: { what: "$.input.what" },
        output_mapping: { "output.ok": "$.ok" },
      },
    },
  };
}

/** An SDK client connected to the suite's Worker with `token`; `onElicit` makes it declare form elicitation. */
async function connect(token, onElicit) {
  const { url } = await env();
  const transport = new StreamableHTTPClientTransport(new URL(`${url}/v1/mcp`), {
    requestInit: { headers: { authorization: `Bearer ${token}` } },
  });
  const client = new Client(
    { name: "trellis-e2e", version: "1.0.0" },
    { capabilities: onElicit ? { elicitation: { form: {} } } : {} },
  );
  if (onElicit) {
    client.setRequestHandler(ElicitRequestSchema, async (request) => onElicit(request.params));
  }
  await client.connect(transport);
  return client;
}

/** The tool result's JSON text (every result carries one). */
function jsonOf(result) {
  const texts = result.content.filter((part) => part.type === "text").map((part) => part.text);
  for (const text of texts.reverse()) {
    try {
      return JSON.parse(text);
    } catch {
      // a sentence, not the JSON
    }
  }
  throw new Error(`no JSON text in ${JSON.stringify(result)}`);
}

describe("the MCP server at /v1/mcp", () => {
  const ids = {
    fast: uid("mcp-fast"),
    hidden: uid("mcp-hidden"),
    slow: uid("mcp-slow"),
    typedSlow: uid("mcp-typed-slow"),
    gated: uid("mcp-gated"),
  };
  /** @type {Client} */
  let client;

  before(async () => {
    const { token } = await env();
    await register({
      workflows: [
        addOne(ids.fast, { mcp: { expose: true, description: "Adds one to n." } }),
        addOne(ids.hidden),
        sleeper(ids.slow, 3_000),
        { ...sleeper(ids.typedSlow, 3_000), output_schema: SLEPT_SCHEMA },
        asker(ids.gated),
      ],
    });
    client = await connect(token);
  });

  after(async () => {
    await client?.close();
  });

  test("lists each exposed workflow as a tool with its schemas, and the trellis_* tools; an unexposed one is not listed", async () => {
    const { tools } = await client.listTools();
    const byName = new Map(tools.map((tool) => [tool.name, tool]));
    const fast = byName.get(ids.fast);
    assert.ok(fast, `no tool ${ids.fast} in ${[...byName.keys()].join(", ")}`);
    assert.equal(fast.description, "Adds one to n.");
    assert.deepEqual(fast.inputSchema, addOne(ids.fast).input_schema);
    assert.deepEqual(fast.outputSchema, addOne(ids.fast).output_schema);
    assert.equal(byName.has(ids.hidden), false, "a workflow without mcp.expose is not a tool");
    assert.equal(byName.get(ids.slow)?.description, "sleeps a while");
    assert.deepEqual(byName.get(ids.slow)?.inputSchema, { type: "object" });
    assert.equal(byName.get(ids.slow)?.outputSchema, undefined);
    for (const name of [
      "trellis_list_workflows",
      "trellis_list_runs",
      "trellis_get_run",
      "trellis_wait_run",
      "trellis_answer_gate",
      "trellis_cancel_run",
      "trellis_send_event",
    ]) {
      assert.equal(byName.get(name)?.inputSchema.type, "object", name);
    }
    assert.deepEqual(byName.get("trellis_get_run")?.inputSchema.required, ["run_id"]);
  });

  test("a fast workflow's call answers its output as structured content", async () => {
    const result = await client.callTool({ name: ids.fast, arguments: { n: 41 } });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    assert.deepEqual(result.structuredContent, { v: 42 });
    assert.deepEqual(jsonOf(result), { v: 42 });
    const handle = result._meta["trellis/run"];
    assert.equal(handle.status, "completed");
    const run = await api("GET", `/v1/runs/${handle.run_id}`);
    assert.equal(run.json.workflow.id, ids.fast, show(run));
  });

  test("a bad input answers the start's 400 as an error result, with each problem's path", async () => {
    const result = await client.callTool({ name: ids.fast, arguments: { n: "forty-one" } });
    assert.equal(result.isError, true);
    assert.equal(result.structuredContent, undefined, "a tool with an output schema has no structured error");
    const body = jsonOf(result);
    assert.equal(body.error.code, "run.invalid_input");
    assert.ok(
      body.error.details.some((detail) => detail.path === "input.n" || detail.path === "n"),
      JSON.stringify(body),
    );
    assert.match(result.content[0].text, /^run\.invalid_input: /);
  });

  test("an unexposed workflow cannot be called as a tool", async () => {
    await assert.rejects(client.callTool({ name: ids.hidden, arguments: { n: 1 } }), /not found/);
  });

  test("a slow workflow answers a handle, which trellis_wait_run follows to the output", async () => {
    const { url } = await env();
    const result = await client.callTool({ name: ids.slow, arguments: {}, _meta: { "trellis/wait_seconds": 0 } });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const handle = result.structuredContent;
    assert.match(handle.run_id, /^run_/);
    assert.ok(["running", "waiting", "queued"].includes(handle.status), handle.status);
    assert.equal(handle.url, `${url}/runs/${handle.run_id}`);
    assert.match(result.content[0].text, /trellis_wait_run/);
    const got = await client.callTool({ name: "trellis_get_run", arguments: { run_id: handle.run_id } });
    assert.equal(got.structuredContent.workflow.id, ids.slow);
    const waited = await client.callTool({
      name: "trellis_wait_run",
      arguments: { run_id: handle.run_id, wait_seconds: 30 },
    });
    assert.deepEqual(waited.structuredContent, { slept: true }, JSON.stringify(waited));
    const listed = await client.callTool({ name: "trellis_list_runs", arguments: { workflow: ids.slow } });
    assert.deepEqual(
      listed.structuredContent.runs.map((run) => run.run_id),
      [handle.run_id],
    );
  });

  test("one run per tool call: the same idempotency key in _meta finds the same run", async () => {
    const key = uid("call");
    const first = await client.callTool({
      name: ids.fast,
      arguments: { n: 1 },
      _meta: { "trellis/idempotency_key": key },
    });
    const again = await client.callTool({
      name: ids.fast,
      arguments: { n: 1 },
      _meta: { "trellis/idempotency_key": key },
    });
    const other = await client.callTool({ name: ids.fast, arguments: { n: 1 } });
    assert.equal(first._meta["trellis/run"].run_id, again._meta["trellis/run"].run_id);
    assert.notEqual(first._meta["trellis/run"].run_id, other._meta["trellis/run"].run_id);
  });

  test("without elicitation, a gate is reported as needing input and trellis_answer_gate answers it", async () => {
    const result = await client.callTool({ name: ids.gated, arguments: { what: "v2" } });
    assert.equal(result.isError, undefined, JSON.stringify(result));
    const report = result.structuredContent;
    assert.equal(report.status, "waiting");
    const [gate] = report.needs_input;
    assert.equal(gate.prompt, "ship v2?");
    assert.deepEqual(gate.input_schema, OK_SCHEMA);
    assert.equal(gate.answer_with, "trellis_answer_gate");
    // An approval link for the caller itself: the person behind the agent may answer in a browser.
    const whoami = await api("GET", "/v1/whoami");
    assert.equal(gate.approval_link.approver, whoami.json.principal.name, JSON.stringify(gate));
    assert.match(gate.approval_link.url, new RegExp(`/v1/links/${report.run_id}/lnk_[0-9a-f]{16}/[0-9a-f]{64}$`));
    assert.ok(result.content[0].text.includes(gate.approval_link.url), result.content[0].text);
    const page = await fetch(gate.approval_link.url);
    assert.equal(page.status, 200);
    assert.match(await page.text(), /ship v2\?/);
    const polled = await client.callTool({
      name: "trellis_wait_run",
      arguments: { run_id: report.run_id, wait_seconds: 0 },
    });
    assert.deepEqual(polled.structuredContent.needs_input[0].approval_link, {
      ...gate.approval_link,
      url: null,
    });
    const bad = await client.callTool({
      name: "trellis_answer_gate",
      arguments: { run_id: report.run_id, gate_id: gate.gate_id, response: { ok: "yes" } },
    });
    assert.equal(bad.isError, true);
    assert.equal(bad.structuredContent.error.code, "gate.invalid_response");
    const answered = await client.callTool({
      name: "trellis_answer_gate",
      arguments: { run_id: report.run_id, gate_id: gate.gate_id, response: { ok: true } },
    });
    assert.equal(answered.structuredContent.status, "answered", JSON.stringify(answered));
    const waited = await client.callTool({ name: "trellis_wait_run", arguments: { run_id: report.run_id } });
    assert.deepEqual(waited.structuredContent, { ok: true });
  });

  test("with elicitation, the gate is asked in the call, answered with the caller's identity, and the call answers the output", async () => {
    const { token } = await env();
    const asked = [];
    const eliciting = await connect(token, async (params) => {
      asked.push(params);
      return { action: "accept", content: { ok: false } };
    });
    try {
      const result = await eliciting.callTool({ name: ids.gated, arguments: { what: "v3" } });
      assert.deepEqual(result.structuredContent, { ok: false }, JSON.stringify(result));
      assert.equal(asked.length, 1);
      assert.equal(asked[0].message, "ship v3?");
      assert.deepEqual(asked[0].requestedSchema, OK_SCHEMA);
      const runId = result._meta["trellis/run"].run_id;
      const gates = await api("GET", `/v1/runs/${runId}/gates`);
      const [gate] = gates.json.gates;
      assert.equal(gate.status, "answered");
      assert.equal(gate.responder, "mcp elicitation");
      const whoami = await api("GET", "/v1/whoami");
      assert.equal(gate.answered_by.token_id, whoami.json.principal.token_id, show(gates));
    } finally {
      await eliciting.close();
    }
  });

  test("a declined elicitation leaves the gate open, reported as needing input", async () => {
    const { token } = await env();
    const eliciting = await connect(token, async () => ({ action: "decline" }));
    try {
      const result = await eliciting.callTool({
        name: ids.gated,
        arguments: { what: "v4" },
        _meta: { "trellis/wait_seconds": 1 },
      });
      const report = result.structuredContent;
      assert.equal(report.needs_input[0].status ?? "open", "open");
      assert.equal(report.needs_input[0].elicited, true, JSON.stringify(result));
      const cancelled = await eliciting.callTool({ name: "trellis_cancel_run", arguments: { run_id: report.run_id } });
      assert.equal(cancelled.structuredContent.status, "cancelled");
    } finally {
      await eliciting.close();
    }
  });

  test("a client that supports tasks gets the run as a task, and its output (matching the output schema) from tasks/result", async () => {
    const { tools } = await client.listTools();
    assert.deepEqual(tools.find((tool) => tool.name === ids.typedSlow)?.execution, { taskSupport: "optional" });
    // Called plainly, a typed tool's run still going is an error result that says it has not failed.
    const plain = await client.callTool({ name: ids.typedSlow, arguments: {}, _meta: { "trellis/wait_seconds": 0 } });
    assert.equal(plain.isError, true);
    assert.match(plain.content[0].text, /has not failed/);
    const messages = [];
    for await (const message of client.experimental.tasks.callToolStream({ name: ids.typedSlow, arguments: {} })) {
      messages.push(message);
    }
    const created = messages.find((message) => message.type === "taskCreated");
    assert.ok(created, JSON.stringify(messages));
    const taskId = created.task.taskId;
    const run = await api("GET", `/v1/runs/${taskId}`);
    assert.equal(run.json.workflow.id, ids.typedSlow, show(run));
    assert.ok(messages.some((message) => message.type === "taskStatus" && message.task.status === "working"));
    const last = messages.at(-1);
    assert.equal(last.type, "result", JSON.stringify(last));
    assert.deepEqual(last.result.structuredContent, { slept: true });
    assert.equal(last.result.isError, undefined);
    assert.deepEqual(last.result._meta["io.modelcontextprotocol/related-task"], { taskId });
    const task = await client.experimental.tasks.getTask(taskId);
    assert.equal(task.status, "completed");
    assert.equal(task.ttl, null);
  });

  test("a task's gate is asked by elicitation on tasks/result; tasks/cancel cancels a run; tasks/list lists the caller's", async () => {
    const { token } = await env();
    const asked = [];
    const eliciting = await connect(token, async (params) => {
      asked.push(params);
      return { action: "accept", content: { ok: true } };
    });
    try {
      await eliciting.listTools();
      const messages = [];
      const stream = eliciting.experimental.tasks.callToolStream({ name: ids.gated, arguments: { what: "v5" } });
      for await (const message of stream) {
        messages.push(message);
      }
      assert.deepEqual(messages.at(-1)?.result?.structuredContent, { ok: true }, JSON.stringify(messages));
      assert.equal(asked.length, 1);
      assert.equal(asked[0].message, "ship v5?");

      const created = await eliciting.request(
        { method: "tools/call", params: { name: ids.slow, arguments: {}, task: {} } },
        CreateTaskResultSchema,
      );
      const cancelled = await eliciting.experimental.tasks.cancelTask(created.task.taskId);
      assert.equal(cancelled.status, "cancelled");
      assert.equal((await api("GET", `/v1/runs/${created.task.taskId}`)).json.status, "cancelled");
      await assert.rejects(eliciting.experimental.tasks.cancelTask(created.task.taskId), /already cancelled/);
      let listed = [];
      for (let i = 0; i < 50 && !listed.includes(created.task.taskId); i += 1) {
        listed = (await eliciting.experimental.tasks.listTasks()).tasks.map((task) => task.taskId);
        await new Promise((resolve) => setTimeout(resolve, 200));
      }
      assert.ok(listed.includes(created.task.taskId), JSON.stringify(listed));
    } finally {
      await eliciting.close();
    }
  });

  test("a reader's token sees no workflow tool and no tool that changes anything", async () => {
    const made = await api("POST", "/v1/tokens", { body: { name: uid("mcp-reader"), roles: ["reader"] } });
    assert.equal(made.status, 201, show(made));
    const reader = await connect(made.json.token);
    try {
      const names = (await reader.listTools()).tools.map((tool) => tool.name).sort();
      assert.deepEqual(names, ["trellis_get_run", "trellis_list_runs", "trellis_list_workflows", "trellis_wait_run"]);
      const refused = await reader.callTool({
        name: "trellis_cancel_run",
        arguments: { run_id: "run_00000000000000000000000000000000" },
      });
      assert.equal(refused.isError, true);
      assert.equal(refused.structuredContent.error.code, "auth.forbidden");
    } finally {
      await reader.close();
    }
  });

  test("a wrong token is 401 before any MCP handling", async () => {
    const { url } = await env();
    const res = await fetch(`${url}/v1/mcp`, {
      method: "POST",
      headers: {
        "authorization": "Bearer not-a-token",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
      },
      body: JSON.stringify({ jsonrpc: "2.0", id: 1, method: "tools/list" }),
    });
    assert.equal(res.status, 401);
    assert.equal((await res.json()).error.code, "auth.invalid_token");
    await assert.rejects(connect("not-a-token"), (error) => error.code === 401);
  });
});
