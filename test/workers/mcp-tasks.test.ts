import { env, exports } from "cloudflare:workers";
import { McpError, RELATED_TASK_META_KEY, type Task } from "@modelcontextprotocol/sdk/types.js";
import { describe, it } from "vitest";
import { z } from "zod";
import type { RunView } from "../../schemas/api.ts";
import type { Principal } from "../../schemas/auth.ts";
import { cancelTask, getTask, listTasks, taskResult, toTaskStatus, type TaskContext } from "../../src/mcp/tasks.ts";
import type { ToolContext } from "../../src/mcp/tools.ts";
import { startWorkflowTask } from "../../src/mcp/workflow-tools.ts";
import { api, register, TOKEN, uniqueId } from "./helpers.ts";

/**
 * MCP tasks (src/mcp/tasks.ts): a workflow tool called as a task is its run;
 * every task request reads the run afresh, through its caller's checks.
 */

const OK_SCHEMA = { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } };

function token(name: string, roles: Principal["roles"]): Principal {
  return { kind: "token", token_id: `tok_${name}`, name, roles, workflows: null, created_by: `token:tok_${name}` };
}

function contextOf(principal: Principal, sent: unknown[] = []): ToolContext & TaskContext {
  return {
    env,
    principal,
    origin: "http://trellis.test",
    session: { id: null, elicitation: false },
    requestId: 1,
    meta: undefined,
    ask: async (message) => {
      sent.push(message);
    },
  };
}

/** An exposed workflow that asks `ok?` and answers `{ ok }`, with an output schema. */
async function registerAsker(): Promise<string> {
  const id = uniqueId("mcp-task");
  const ask = { kind: "human", implementation: { prompt_template: "ok?", input_schema: OK_SCHEMA } };
  const after = { kind: "context", implementation: { updates: [{ path: "ok", expr: "input.ok" }] } };
  const steps = [
    { ref: "ask", action: ask },
    {
      ref: "after",
      action: after,
      input_mapping: { ok: "$.state.ask.response.ok" },
      output_mapping: { "output.ok": "$.ok" },
    },
  ];
  await register({
    workflows: [
      {
        id,
        mcp: { expose: true },
        output_schema: OK_SCHEMA,
        nodes: { ask: { task: { steps }, output_mapping: { "output.ok": "$.ok" } } },
      },
    ],
  });
  return id;
}

async function until<T>(read: () => Promise<T>, holds: (value: T) => boolean, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await read();
    if (holds(value) || Date.now() > deadline) {
      return value;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function rejection(promise: Promise<unknown>): Promise<McpError> {
  try {
    await promise;
  } catch (error) {
    if (error instanceof McpError) {
      return error;
    }
    throw error;
  }
  throw new Error("expected an McpError");
}

describe("runs as tasks", () => {
  it("maps a run's status to a task's: its end, input_required at an open gate, else working", ({ expect }) => {
    const gate = { status: "open" } as RunView["gates"][number];
    expect(toTaskStatus({ status: "completed", gates: [] })).toBe("completed");
    expect(toTaskStatus({ status: "failed", gates: [] })).toBe("failed");
    expect(toTaskStatus({ status: "cancelled", gates: [] })).toBe("cancelled");
    expect(toTaskStatus({ status: "waiting", gates: [gate] })).toBe("input_required");
    for (const status of ["drafting", "queued", "running", "waiting", "paused"] as const) {
      expect(toTaskStatus({ status, gates: [] })).toBe("working");
    }
  });

  it("starts the run and answers a task named by its id; tasks/get, tasks/result follow the run", async ({
    expect,
  }) => {
    const id = await registerAsker();
    const agent = token("agent", ["runner", "reader", "approver"]);
    const created = await startWorkflowTask(contextOf(agent), id, {});
    const taskId = created?.task.taskId ?? "";
    expect(taskId).toMatch(/^run_/);
    expect(created?.task).toMatchObject({ ttl: null, pollInterval: 3_000 });
    expect(["working", "input_required"]).toContain(created?.task.status);
    const waiting = await until(
      () => getTask(contextOf(agent), taskId),
      (task: Task) => task.status === "input_required",
    );
    expect(waiting.status).toBe("input_required");
    expect(waiting.statusMessage).toContain("ok?");

    // tasks/result blocks while the gate is open, then answers the tool's result once the run ends.
    const pending = taskResult(contextOf(agent), taskId, new AbortController().signal);
    const gateId = (await api("GET", `/v1/runs/${taskId}/gates`)).json.gates[0].gate_id;
    expect((await api("POST", `/v1/runs/${taskId}/gates/${gateId}`, { response: { ok: true } })).status).toBe(200);
    const result = await pending;
    expect(result.structuredContent).toEqual({ ok: true });
    expect(result.isError).toBeUndefined();
    expect(result._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId });
    expect(await getTask(contextOf(agent), taskId)).toMatchObject({ taskId, status: "completed" });
    expect((await getTask(contextOf(agent), taskId)).pollInterval).toBeUndefined();
  });

  it("asks an open gate through elicitation on the tasks/result stream, naming the task", async ({ expect }) => {
    const id = await registerAsker();
    const agent = token("agent", ["runner", "reader", "approver"]);
    const created = await startWorkflowTask(contextOf(agent), id, {});
    const taskId = created?.task.taskId ?? "";
    const sent: Array<{ method?: string; params?: { _meta?: Record<string, unknown>; message?: string } }> = [];
    const context = { ...contextOf(agent, sent), session: { id: null, elicitation: true } };
    const aborted = new AbortController();
    const pending = taskResult(context, taskId, aborted.signal);
    await until(
      async () => sent.length,
      (count) => count > 0,
    );
    expect(sent[0]).toMatchObject({ method: "elicitation/create", params: { message: "ok?" } });
    expect(sent[0]?.params?._meta?.[RELATED_TASK_META_KEY]).toEqual({ taskId });
    await cancelTask(contextOf(agent), taskId);
    expect((await pending).isError).toBe(true);
  });

  it("cancels a task's run, refuses a run that ended, and hides runs outside the caller's checks", async ({
    expect,
  }) => {
    const id = await registerAsker();
    const agent = token("agent", ["runner", "reader"]);
    const taskId = (await startWorkflowTask(contextOf(agent), id, {}))?.task.taskId ?? "";
    const cancelled = await cancelTask(contextOf(agent), taskId);
    expect(cancelled).toMatchObject({ taskId, status: "cancelled" });
    expect((await rejection(cancelTask(contextOf(agent), taskId))).code).toBe(-32602);
    const result = await taskResult(contextOf(agent), taskId, new AbortController().signal);
    expect(result.isError).toBe(true);

    const reader = token("reader", ["reader"]);
    expect((await rejection(cancelTask(contextOf(reader), taskId))).message).toContain("auth.forbidden");
    const limited = { ...reader, workflows: ["other-*"] };
    expect((await rejection(getTask(contextOf(limited), taskId))).message).toContain("run.not_found");
    expect((await rejection(getTask(contextOf(agent), "run_nope"))).code).toBe(-32602);
  });

  it("refuses to start a task with a bad input, with the problems, and starts no run", async ({ expect }) => {
    const id = uniqueId("mcp-task-typed");
    const step = { ref: "a", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    await register({
      workflows: [
        {
          id,
          mcp: { expose: true },
          input_schema: { type: "object", required: ["n"], properties: { n: { type: "integer" } } },
          nodes: { a: { task: { steps: [step] } } },
        },
      ],
    });
    const error = await rejection(startWorkflowTask(contextOf(token("agent", ["runner"])), id, { n: "x" }));
    expect(error.code).toBe(-32602);
    expect(error.message).toContain("run.invalid_input");
    expect(error.message).toContain("input.n");
    expect(await startWorkflowTask(contextOf(token("agent", ["runner"])), "no-such-tool", {})).toBeNull();
  });

  it("lists the caller's own runs as tasks, newest first", async ({ expect }) => {
    const id = await registerAsker();
    const mine = token(uniqueId("lister"), ["runner", "reader"]);
    const first = (await startWorkflowTask(contextOf(mine), id, {}))?.task.taskId;
    const second = (await startWorkflowTask(contextOf(mine), id, {}))?.task.taskId;
    const theirs = await api("POST", `/v1/workflows/${id}/runs`, { input: {} }, TOKEN);
    const listed = await until(
      () => listTasks(contextOf(mine), undefined),
      (page) => page.tasks.length >= 2,
    );
    expect(listed.tasks.map((task) => task.taskId)).toEqual([second, first]);
    expect(listed.tasks.map((task) => task.taskId)).not.toContain(theirs.json.run_id);
    expect(listed.nextCursor).toBeUndefined();
  });
});

describe("tasks over the transport", () => {
  it("declares the tasks capability and lists workflow tools as optionally taskable", async ({ expect }) => {
    const init = await rpc(
      {
        jsonrpc: "2.0",
        id: 1,
        method: "initialize",
        params: { protocolVersion: "2025-11-25", capabilities: {}, clientInfo: { name: "t", version: "1" } },
      },
      z.object({ result: z.object({ capabilities: z.object({ tasks: z.unknown() }) }) }),
    );
    expect(init.result.capabilities.tasks).toEqual({ list: {}, cancel: {}, requests: { tools: { call: {} } } });
    const id = await registerAsker();
    const listed = await rpc(
      { jsonrpc: "2.0", id: 2, method: "tools/list", params: {} },
      z.object({
        result: z.object({ tools: z.array(z.object({ name: z.string(), execution: z.unknown().optional() })) }),
      }),
    );
    const tools = listed.result.tools;
    expect(tools.find((tool) => tool.name === id)?.execution).toEqual({ taskSupport: "optional" });
    expect(tools.find((tool) => tool.name === "trellis_get_run")?.execution).toBeUndefined();
    const refused = await rpc(
      {
        jsonrpc: "2.0",
        id: 3,
        method: "tools/call",
        params: { name: "trellis_list_runs", arguments: {}, task: {} },
      },
      z.object({ error: z.object({ code: z.number() }) }),
    );
    expect(refused.error.code).toBe(-32601);
    const created = await rpc(
      {
        jsonrpc: "2.0",
        id: 4,
        method: "tools/call",
        params: { name: id, arguments: {}, task: {} },
      },
      z.object({ result: z.object({ task: z.object({ taskId: z.string() }) }) }),
    );
    expect(created.result.task.taskId).toMatch(/^run_/);
    const got = await rpc(
      {
        jsonrpc: "2.0",
        id: 5,
        method: "tasks/get",
        params: { taskId: created.result.task.taskId },
      },
      z.object({ result: z.object({ taskId: z.string() }) }),
    );
    expect(got.result.taskId).toBe(created.result.task.taskId);
  });
});

/** One JSON-RPC request to `/v1/mcp` with the suite's token; its answer, from the event stream, parsed by `answer`. */
async function rpc<T>(message: unknown, answer: z.ZodType<T>): Promise<T> {
  const response = await exports.default.fetch("http://trellis.test/v1/mcp", {
    method: "POST",
    headers: {
      "authorization": `Bearer ${TOKEN}`,
      "content-type": "application/json",
      "accept": "application/json, text/event-stream",
      "mcp-protocol-version": "2025-11-25",
    },
    body: JSON.stringify(message),
  });
  const text = await response.text();
  const data = text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => line.slice(6))
    .at(-1);
  return answer.parse(JSON.parse(data ?? text));
}
