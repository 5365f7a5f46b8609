import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { TEST_SECRETS } from "../secrets.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import {
  api,
  gateOpenOrSettled,
  httpStep,
  httpTarget,
  journal,
  registerWorkflow,
  runWorkflow,
  start,
  stepsOf,
  TOKEN,
  uniqueId,
  verifyRun,
  waitForRun,
} from "./helpers.ts";
import type { NodeView } from "../../schemas/index.ts";

/**
 * The journal sees inside every task: `task.completed`, `task.failed` and
 * `task.suspended` carry the dispatch's step records, each call of each step
 * with its outcome and its wait (docs/journal.md, "Step records").
 */

const RETRY = { execution: { retry_policy: { max_attempts: 4, initial_delay_ms: 10, max_delay_ms: 50 } } };

describe("step records in the journal", () => {
  it("an endpoint that answers 503, 503, 200 shows three attempts, two failed with their waits", async ({ expect }) => {
    const key = uniqueId("flaky");
    const step = httpStep("call", `${httpTarget()}/flaky/${key}?fail=2`);
    const run = await runWorkflow({
      id: uniqueId("records"),
      nodes: { main: { task: { steps: [{ ...step, action: { ...step.action, ...RETRY } }] } } },
    });
    expect(run.status).toBe("completed");
    const completed = (await journal(run.run_id)).find((entry) => entry.kind === "task.completed");
    const [record] = stepsOf(completed);
    expect(record).toMatchObject({ step: "call", status: "completed" });
    expect(record?.action).toMatch(/^http .+@\d+$/);
    expect(record?.attempts.map((attempt) => attempt.error?.code ?? "ok")).toEqual([
      "http.status",
      "http.status",
      "ok",
    ]);
    expect(record?.attempts.slice(0, 2).map((attempt) => attempt.retry_reason)).toEqual(["backoff", "backoff"]);
    expect(record?.attempts.slice(0, 2).every((attempt) => (attempt.retry_in_ms ?? -1) >= 0)).toBe(true);
    // What each call did: method, URL (no query, no credentials), status.
    const url = `${httpTarget()}/flaky/${key}`;
    expect(record?.attempts.map((attempt) => attempt.call)).toEqual([
      { method: "GET", url, status: 503 },
      { method: "GET", url, status: 503 },
      { method: "GET", url, status: 200 },
    ]);
    expect((await verifyRun(run.run_id)).ok).toBe(true);

    // GET /v1/runs/{id}/nodes/{node}: the node in full, its invocation's dispatch with the same records.
    const detail = await api("GET", `/v1/runs/${run.run_id}/nodes/main`);
    expect(detail.status).toBe(200);
    expect(detail.json).toMatchObject({ node: "main", status: "completed", iterations: 1 });
    expect(detail.json.invocations).toHaveLength(1);
    expect(detail.json.invocations[0].dispatches).toEqual([
      { seq: completed?.seq, kind: "task.completed", attempt: 1, steps: [record] },
    ]);

    // The event stream carries the same entry, step records and all.
    const events = await (
      await exports.default.fetch(`http://trellis.test/v1/runs/${run.run_id}/events`, {
        headers: { authorization: `Bearer ${TOKEN}` },
      })
    ).text();
    const streamed = events
      .split("\n\n")
      .find((block) => /^event: task\.completed$/m.test(block))
      ?.split("\n")
      .find((line) => line.startsWith("data: "));
    expect(stepsOf(JSON.parse(streamed?.slice("data: ".length) ?? "null"))).toEqual([record]);

    // The run view has the same step at a glance: three calls, how long it took.
    expect(run.nodes.main.invocations).toEqual([
      {
        index: 0,
        status: "completed",
        attempts: 1,
        steps: [{ step: "call", status: "completed", attempts: 3, duration_ms: record?.duration_ms }],
      },
    ]);
    const missing = await api("GET", `/v1/runs/${run.run_id}/nodes/nope`);
    expect([missing.status, missing.json.error.code]).toEqual([404, "node.not_found"]);

    // A changed byte inside a step record is caught, and the entry named.
    const entries = structuredClone(await journal(run.run_id));
    const index = entries.findIndex((entry) => entry.kind === "task.completed");
    const tampered = entries[index];
    if (tampered === undefined) {
      throw new Error("no task.completed entry");
    }
    tampered.body.steps[0].attempts[2].duration_ms += 1;
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect(await verifyJournal(entries, jwks)).toMatchObject({
      ok: false,
      reason: "bad_hash",
      seq: tampered.seq,
      index,
    });
  });

  it("a skipped step and a continued failure are on record in the failed task's entry", async ({ expect }) => {
    const run = await runWorkflow({
      id: uniqueId("records"),
      nodes: {
        main: {
          task: {
            steps: [
              { ...httpStep("never", `${httpTarget()}/json`), condition: { if: "false" } },
              { ...httpStep("soft", `${httpTarget()}/status/404`), on_failure: "continue" },
              httpStep("hard", `${httpTarget()}/status/400`),
            ],
          },
        },
      },
    });
    expect(run.status).toBe("failed");
    const failed = (await journal(run.run_id)).find((entry) => entry.kind === "task.failed");
    expect(stepsOf(failed).map((step) => [step.step, step.status, step.error?.code ?? null])).toEqual([
      ["never", "skipped", null],
      ["soft", "continued", "http.status"],
      ["hard", "failed", "http.status"],
    ]);
  });

  it("no secret value appears in any entry of a run whose steps send and echo one", async ({ expect }) => {
    const step = {
      ref: "echo",
      action: {
        kind: "http",
        implementation: {
          method: "GET",
          url_template: `${httpTarget()}/echo`,
          headers: { authorization: "$env:LLM_API_KEY" },
        },
      },
    };
    const run = await runWorkflow({ id: uniqueId("records"), nodes: { main: { task: { steps: [step] } } } });
    expect(run.status).toBe("completed");
    const text = JSON.stringify(await journal(run.run_id));
    expect(text).toContain('"steps"');
    for (const secret of Object.values(TEST_SECRETS)) {
      expect(text).not.toContain(secret);
    }
    // The run view too (the event stream serves these same entries).
    expect(JSON.stringify((await api("GET", `/v1/runs/${run.run_id}`)).json)).not.toContain(TEST_SECRETS.LLM_API_KEY);
  });

  it("the run view shows each step of a task that waited at a gate, before and after the answer", async ({
    expect,
  }) => {
    const set = { ref: "set", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    const ask = {
      ref: "ask",
      action: {
        kind: "human",
        implementation: {
          prompt_template: "Go on?",
          input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
        },
      },
    };
    const skipped = { ...set, ref: "never", condition: { if: "false" } };
    const id = uniqueId("gated");
    await registerWorkflow({ id, nodes: { main: { task: { steps: [set, ask, skipped, { ...set, ref: "after" }] } } } });
    const runId = await start(id);
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    const statuses = (view: { nodes: Record<string, NodeView> }) =>
      view.nodes.main?.invocations[0]?.steps.map((step) => [step.step, step.status]);
    expect(statuses(waiting)).toEqual([
      ["set", "completed"],
      ["ask", "suspended"],
    ]);
    await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, { response: { ok: true } });
    const done = await waitForRun(runId);
    expect(done.status).toBe("completed");
    // The continuation replaced the waiting step with how it ended, and kept the step before it.
    expect(statuses(done)).toEqual([
      ["set", "completed"],
      ["ask", "completed"],
      ["never", "skipped"],
      ["after", "completed"],
    ]);
  });
});

describe("runs linked to their children and parents", () => {
  it("a child run's view names its parent run, node and step; the parent's node lists its children", async ({
    expect,
  }) => {
    const child = uniqueId("child");
    const parent = uniqueId("parent");
    const setStep = {
      ref: "set",
      action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } },
    };
    const callStep = { ref: "call", action: { kind: "workflow", implementation: { workflow: child } } };
    await registerWorkflow({ id: child, nodes: { only: { task: { steps: [setStep] } } } });
    const run = await runWorkflow({
      id: parent,
      nodes: { sub: { workflow: child }, steps: { task: { steps: [callStep] } } },
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.parent).toBeNull();
    for (const [node, step] of [
      ["sub", null],
      ["steps", "call"],
    ] as const) {
      const detail = (await api("GET", `/v1/runs/${run.run_id}/nodes/${node}`)).json;
      expect(detail.children).toEqual([
        { run_id: expect.stringMatching(/^run_/), item: null, step, workflow: `${child}@1`, status: "completed" },
      ]);
      const childView = (await api("GET", `/v1/runs/${detail.children[0].run_id}`)).json;
      expect(childView.parent).toEqual({ run_id: run.run_id, node, step });
    }
    // The parent's run view lists both children, where each was started and how it ended.
    const link = { run_id: expect.stringMatching(/^run_/), item: null, workflow: `${child}@1`, status: "completed" };
    expect(run.children).toEqual([
      { ...link, node: "steps", step: "call" },
      { ...link, node: "sub", step: null },
    ]);
  });
});
