import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import type { z } from "zod";
import { RUN_ID_PATTERN } from "../../lib/ids.ts";
import { StartPlanResponse, StartRunResponse } from "../../schemas/index.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import {
  api,
  httpTarget,
  journal,
  register,
  registerWorkflow,
  TOKEN,
  uniqueId,
  verified,
  waitForRun,
} from "./helpers.ts";

/** A run start that waits for its run to end (`Prefer: wait=N`, RFC 7240; `wait_ms` over RPC). */

/** A step that sets `path` to `expr` and gives it as its output's `path`. */
const contextStep = (ref: string, path: string, expr: string) => ({
  ref,
  action: { kind: "context", implementation: { updates: [{ path, expr }] } },
  output_mapping: { [`output.${path}`]: `$.${path}` },
});

/** A one-node workflow whose output is `input.n + 1`. */
async function plusOne(): Promise<string> {
  const id = uniqueId("wait");
  await registerWorkflow({
    id,
    nodes: {
      add: { task: { steps: [contextStep("s", "sum", "input.n + 1")] }, output_mapping: { "output.sum": "$.sum" } },
    },
  });
  return id;
}

/** POSTs `body` to `path` with these extra headers; the answer's status, headers and body, read with `schema`. */
async function post<T>(path: string, body: unknown, headers: Record<string, string>, schema: z.ZodType<T>) {
  const response = await exports.default.fetch(`http://trellis.test${path}`, {
    method: "POST",
    headers: { "authorization": `Bearer ${TOKEN}`, "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
  return { status: response.status, headers: response.headers, json: schema.parse(await response.json()) };
}

const startRun = (workflowId: string, body: unknown, headers: Record<string, string> = {}) =>
  post(`/v1/workflows/${workflowId}/runs`, body, headers, StartRunResponse);
const startWaiting = (workflowId: string, body: unknown, prefer: string) => startRun(workflowId, body, { prefer });

describe("a start that waits for its run", () => {
  it("answers with the ended run, its output and an attested journal", async ({ expect }) => {
    const id = await plusOne();
    const started = await startWaiting(id, { input: { n: 41 } }, "wait=10");
    expect(started.status).toBe(201);
    expect(started.headers.get("preference-applied")).toBe("wait=10");
    expect(started.json).toEqual({
      run_id: expect.stringMatching(RUN_ID_PATTERN),
      status: "completed",
      workflow: { id, version: 1 },
      output: { sum: 42 },
      error: null,
    });
    // Already attested when the answer came: nothing to wait for.
    const entries = await journal(String(started.json.run_id));
    expect(entries.at(-1)?.kind).toBe("attest");
    expect(await verified(String(started.json.run_id))).toBe(true);
    const run = (await api("GET", `/v1/runs/${String(started.json.run_id)}`)).json;
    expect({ output: run.output, error: run.error }).toEqual({ output: started.json.output, error: null });
  });

  it("answers a failed run with its error", async ({ expect }) => {
    const id = uniqueId("wait-fail");
    await registerWorkflow({
      id,
      nodes: {
        get: {
          task: {
            steps: [
              {
                ref: "call",
                action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
              },
            ],
          },
        },
      },
    });
    const started = await startWaiting(id, { input: {} }, "wait=10");
    expect(started.status).toBe(201);
    expect(started.json.status).toBe("failed");
    expect(started.json.output).toBeNull();
    expect(started.json.error).toMatchObject({ code: "http.status", node: "get", step: "call" });
  });

  it("answers when the wait runs out, with the run still going and no outcome", async ({ expect }) => {
    const id = uniqueId("wait-gate");
    await registerWorkflow({
      id,
      nodes: {
        ask: {
          task: {
            steps: [
              {
                ref: "ok",
                action: { kind: "human", implementation: { prompt_template: "ok?", input_schema: { type: "object" } } },
              },
            ],
          },
        },
      },
    });
    const sent = Date.now();
    const started = await startWaiting(id, { input: {} }, "wait=1");
    expect(Date.now() - sent).toBeGreaterThanOrEqual(1_000);
    expect(started.status).toBe(201);
    expect(started.headers.get("preference-applied")).toBe("wait=1");
    expect(started.json.status).toBe("waiting");
    expect(started.json).not.toHaveProperty("output");
    expect(started.json).not.toHaveProperty("error");
  });

  it("answers at once without a wait preference, and ignores one it cannot read", async ({ expect }) => {
    // A first node that waits 300 ms on the target: the run is still going when the start answers.
    const id = uniqueId("no-wait");
    const slow = {
      ref: "slow",
      action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/slow?ms=300` } },
    };
    await registerWorkflow({
      id,
      nodes: {
        slow: { task: { steps: [slow] } },
        add: {
          depends_on: ["slow"],
          task: { steps: [contextStep("s", "sum", "input.n + 1")] },
          input_mapping: { n: "$.input.n" },
          output_mapping: { "output.sum": "$.sum" },
        },
      },
    });
    for (const prefer of [undefined, "wait=soon", "respond-async", "wait=-1"]) {
      const started = await startRun(id, { input: { n: 1 } }, prefer ? { prefer } : {});
      expect(started.status).toBe(201);
      expect(started.headers.get("preference-applied")).toBeNull();
      expect(started.json.status).toBe("running");
      expect(started.json).not.toHaveProperty("output");
      expect(await waitForRun(String(started.json.run_id))).toMatchObject({ status: "completed", output: { sum: 2 } });
    }
  });

  it("refuses a bad start with a wait just as one without it, and claims no wait", async ({ expect }) => {
    const id = await plusOne();
    const refused = await exports.default.fetch(`http://trellis.test/v1/workflows/${id}/runs`, {
      method: "POST",
      headers: { "authorization": `Bearer ${TOKEN}`, "content-type": "application/json", "prefer": "wait=10" },
      body: "{ not json",
    });
    expect(refused.status).toBe(400);
    expect(refused.headers.get("preference-applied")).toBeNull();
  });

  it("reads wait among other preferences, and holds it to 60 s", async ({ expect }) => {
    const id = await plusOne();
    const started = await startWaiting(id, { input: { n: 2 } }, 'respond-async, wait=3600; foo="bar"');
    expect(started.headers.get("preference-applied")).toBe("wait=60");
    expect(started.json).toMatchObject({ status: "completed", output: { sum: 3 } });
  });

  it("gives the ended run again to a waiting start with the same idempotency key", async ({ expect }) => {
    const id = await plusOne();
    const body = { input: { n: 9 }, idempotency_key: uniqueId("key") };
    const first = await startWaiting(id, body, "wait=10");
    const again = await startWaiting(id, body, "wait=10");
    expect(first.status).toBe(201);
    expect(again.status).toBe(200);
    expect(again.json).toEqual(first.json);
  });

  it("runs a plan and answers with how it ended", async ({ expect }) => {
    const tool = uniqueId("json");
    await register({
      actions: [
        { id: tool, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/json?id={{id}}` } },
      ],
    });
    const plan = { plan: { steps: [{ tool, params: { id: "7" } }] }, tools: [tool] };
    const started = await post("/v1/plans", plan, { prefer: "wait=10" }, StartPlanResponse);
    expect(started.status).toBe(201);
    expect(started.json.status).toBe("completed");
    expect(started.json.error).toBeNull();
    expect(started.json.graph).toBeDefined();
    expect((await journal(String(started.json.run_id))).at(-1)?.kind).toBe("attest");
  });

  it("waits over Workers RPC with wait_ms, and refuses a wait it cannot honour", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const id = await plusOne();
    const started = await rpc.startRun(id, { input: { n: 1 } }, { wait_ms: 10_000 });
    expect(started).toMatchObject({ ok: true, value: { status: "completed", output: { sum: 2 }, created: true } });
    for (const options of [{ wait_ms: -1 }, { wait_ms: 60_001 }, { wait_ms: 1.5 }, { wait: 1 }]) {
      const refused = await rpc.startRun(id, { input: { n: 1 } }, options);
      expect(refused).toMatchObject({ ok: false, error: { code: "request.invalid_argument" } });
      expect(refused.ok ? [] : refused.error.details?.map((detail) => detail.path)).not.toEqual([]);
    }
  });
});
