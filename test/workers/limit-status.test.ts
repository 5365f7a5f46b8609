import { env, exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { parse } from "yaml";
import summarizeUnderBudget from "../../examples/summarize-under-budget.yaml?raw";
import { limitObject } from "../../limits/route.ts";
import { unwrap } from "../../lib/result.ts";
import { MAX_LIMIT_KEY_CHARS } from "../../schemas/limits.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { api, register, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * `GET /v1/limits/{id}/status?key=`: the state of one limit object (the
 * binding `LIMITS`, limits/keeper.ts), as a run's queue and slots leave it.
 */

/** A workflow whose runs each hold a slot of `limit` for their tenant, and wait at a gate until answered. */
const gatedWorkflow = (id: string, limit: string) => ({
  id,
  limits: [{ limit, key: "input.tenant" }],
  nodes: {
    main: {
      task: {
        steps: [
          {
            ref: "ask",
            action: { kind: "human", implementation: { prompt_template: "Go?", input_schema: { type: "object" } } },
          },
        ],
      },
    },
  },
});

describe("GET /v1/limits/{id}/status", () => {
  it("answers 404 limit.not_found for a limit that is not registered, over HTTP and RPC", async ({ expect }) => {
    const missing = uniqueId("nope");
    const response = await api("GET", `/v1/limits/${missing}/status?key=a`);
    expect(response.status).toBe(404);
    expect(response.json.error.code).toBe("limit.not_found");
    expect(response.json.error.message).toContain(missing);
    expect((await api("GET", "/v1/limits/Not%20An%20Id/status")).json.error.code).toBe("limit.not_found");
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const answer = await rpc.limitStatus(missing);
    expect(answer.ok ? null : answer.error.code).toBe("limit.not_found");
  });

  it("answers 400 with the path for a key longer than a limit key can be", async ({ expect }) => {
    const id = uniqueId("lim");
    await register({ limits: [{ id, concurrency: 1 }] });
    const key = "k".repeat(MAX_LIMIT_KEY_CHARS + 1);
    const response = await api("GET", `/v1/limits/${id}/status?key=${key}`);
    expect(response.status).toBe(400);
    expect(response.json.error.code).toBe("request.invalid_query");
    expect(response.json.error.details).toEqual([
      { path: "key", message: expect.stringContaining(String(MAX_LIMIT_KEY_CHARS)), code: "limit.key_too_long" },
    ]);
  });

  it("shows a key's slots in use and its waiting runs, and nothing for another key or no key", async ({ expect }) => {
    const [limit, wf] = [uniqueId("lim"), uniqueId("wf")];
    await register({ limits: [{ id: limit, concurrency: 1 }], workflows: [gatedWorkflow(wf, limit)] });
    const holder = await start(wf, { input: { tenant: "acme" } });
    await waitForRun(holder, (run) => run.status === "waiting");
    const queued = await start(wf, { input: { tenant: "acme" }, priority: 7 });
    const behind = await waitForRun(queued, (run) => run.limits?.[0]?.status === "waiting");
    expect(behind.status).toBe("queued");
    expect(behind.priority).toBe(7);

    const status = await api("GET", `/v1/limits/${limit}/status?key=acme`);
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ limit, key: "acme", in_use: 1, waiting: 1, paused_until: null });
    expect(status.json.window).toEqual({ used: 0, resets_at: null });
    // The route answers what the limit object of (limit, key) says.
    expect(status.json).toEqual(unwrap(await limitObject(env, limit, "acme").status(limit, "acme")));

    for (const path of [`/v1/limits/${limit}/status?key=other`, `/v1/limits/${limit}/status`]) {
      const other = await api("GET", path);
      expect(other.status, path).toBe(200);
      expect(other.json, path).toMatchObject({ in_use: 0, waiting: 0 });
    }
    expect((await api("GET", `/v1/limits/${limit}/status?key=`)).json.key).toBe("");
    for (const runId of [holder, queued]) {
      await api("POST", `/v1/runs/${runId}/cancel`);
    }
  });

  it("counts the tokens llm calls report against their model's tokens budget, for their key only", async ({
    expect,
  }) => {
    await register(parse(summarizeUnderBudget));
    const tenant = uniqueId("tenant");
    const documents = ["one report", "two invoices", "three tickets", "four emails"];
    const run = await waitForRun(await start("summarize-under-budget", { input: { tenant, documents } }));
    expect(run.status).toBe("completed");

    const status = await api("GET", `/v1/limits/summarizer-budget/status?key=${tenant}`);
    expect(status.json).toMatchObject({ key: tenant, in_use: 0, waiting: 0, paused_until: null });
    expect(status.json.window.used).toBe(run.usage.input_tokens + run.usage.output_tokens);
    expect(status.json.window.resets_at).toEqual(expect.any(String));
    const other = await api("GET", `/v1/limits/summarizer-budget/status?key=${uniqueId("tenant")}`);
    expect(other.json.window).toEqual({ used: 0, resets_at: null });
  });
});
