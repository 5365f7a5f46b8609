import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { describe, it, vi, type ExpectStatic } from "vitest";
import { LIVENESS_CHECK_MS } from "../../coordinator/decide.ts";
import { runIdFor } from "../../lib/ids.ts";
import {
  oneStepWorkflow,
  registerWorkflow,
  untilHits,
  api,
  uniqueId,
  waitForRun,
  httpTarget,
  llmServer,
  hits,
  type Entry,
  register,
  start,
  journal,
  verified,
  httpStep,
} from "./helpers.ts";
import { catalogStub, stubOf, storedAlarm, hold } from "./durable-helpers.ts";

/**
 * What docs/api.md, docs/definitions.md and docs/architecture.md say about
 * redriving runs whose nodes started child runs, about child starts lost with
 * a restart, and about LLM token counts, checked against the real engine. The
 * docs name these tests where they state the behaviour.
 */

interface Usage {
  input_tokens: number;
  output_tokens: number;
  cost_usd: number;
}

async function redrive(runId: string): Promise<number> {
  return (await api("POST", `/v1/runs/${runId}/redrive`)).status;
}

const childRunIds = (entries: readonly Entry[]) =>
  entries.filter((entry) => entry.kind === "child.started").map((entry) => String(entry.body.child_run_id));

const workflowStep = (ref: string, workflow: string) => ({
  ref,
  action: { kind: "workflow", implementation: { workflow } },
});
/** A workflow whose one task calls `url` (a child that fails or leaves a mark). */
const oneCall = (id: string, url: string) => oneStepWorkflow(id, "call", httpStep("call", url));

/** Registers the child `child` that calls `childUrl` and the parent `parent` of `nodes`. */
const registerFamily = (child: string, childUrl: string, parent: string, nodes: Record<string, unknown>) =>
  register({ workflows: [oneCall(child, childUrl), { id: parent, nodes }] });

describe("redriving a run whose nodes started child runs", () => {
  it("a redriven sub-workflow node whose child failed starts a new child, keyed by the redrive, and the run completes", async ({
    expect,
  }) => {
    const key = uniqueId("once");
    const child = uniqueId("fails-once");
    const parent = uniqueId("node-parent");
    await registerFamily(child, `${httpTarget()}/flaky/${key}?fail=1&status=400`, parent, { kid: { workflow: child } });
    const parentId = await start(parent);
    const failed = await waitForRun(parentId);
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("http.status");
    expect(await redrive(parentId)).toBe(200);
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    // The view counts each child the node started; the key's attempt starts over with the redrive.
    expect(run.nodes.kid.attempts).toBe(2);
    expect(childRunIds(await journal(parentId))).toEqual([
      await runIdFor(`${parentId}/0/kid/0/1/-`),
      await runIdFor(`${parentId}/1/kid/0/1/-`),
    ]);
    expect(await hits(key)).toBe(2);
    expect(await verified(parentId)).toBe(true);
  });

  it("a redriven workflow step whose child failed starts a new child, and the run completes", async ({ expect }) => {
    const key = uniqueId("once");
    const child = uniqueId("fails-once");
    const parent = uniqueId("step-parent");
    await registerFamily(child, `${httpTarget()}/flaky/${key}?fail=1&status=400`, parent, {
      main: { task: { steps: [workflowStep("call", child)] } },
    });
    const parentId = await start(parent);
    expect((await waitForRun(parentId)).status).toBe("failed");
    expect(await redrive(parentId)).toBe(200);
    expect((await waitForRun(parentId)).status).toBe("completed");
    expect(childRunIds(await journal(parentId))).toEqual([
      await runIdFor(`${parentId}/0/main/0/1/call`),
      await runIdFor(`${parentId}/1/main/0/1/call`),
    ]);
    expect(await verified(parentId)).toBe(true);
  });

  it("a redriven task runs its workflow step again: the child that had completed runs a second time", async ({
    expect,
  }) => {
    const mark = uniqueId("mark");
    const later = uniqueId("later");
    const child = uniqueId("marks");
    const parent = uniqueId("step-then-fail");
    await registerFamily(child, `${httpTarget()}/mark/${mark}`, parent, {
      main: {
        task: {
          steps: [workflowStep("call", child), httpStep("after", `${httpTarget()}/flaky/${later}?fail=1&status=400`)],
        },
      },
    });
    const parentId = await start(parent);
    expect((await waitForRun(parentId)).status).toBe("failed");
    expect(await hits(mark)).toBe(1);
    expect(await redrive(parentId)).toBe(200);
    expect((await waitForRun(parentId)).status).toBe("completed");
    const children = childRunIds(await journal(parentId));
    expect(children).toHaveLength(2);
    expect(children[0]).not.toBe(children[1]);
    expect(await hits(mark)).toBe(2);
  });

  it("a completed sub-workflow node keeps its result through a redrive: its child does not run again", async ({
    expect,
  }) => {
    const mark = uniqueId("mark");
    const later = uniqueId("later");
    const child = uniqueId("marks");
    const parent = uniqueId("node-then-fail");
    await registerFamily(child, `${httpTarget()}/mark/${mark}`, parent, {
      kid: { workflow: child },
      after: {
        depends_on: ["kid"],
        task: { steps: [httpStep("after", `${httpTarget()}/flaky/${later}?fail=1&status=400`)] },
      },
    });
    const parentId = await start(parent);
    expect((await waitForRun(parentId)).status).toBe("failed");
    expect(await redrive(parentId)).toBe(200);
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    expect(run.nodes.kid.attempts).toBe(1);
    expect(childRunIds(await journal(parentId))).toHaveLength(1);
    expect(await hits(mark)).toBe(1);
  });
});

describe("restarting lost child starts", () => {
  it("a workflow step's child start lost in a restart is asked for again by the parent's alarm alone", async ({
    expect,
  }) => {
    const mark = uniqueId("mark");
    const child = uniqueId("marks");
    const parent = uniqueId("step-parent");
    await registerFamily(child, `${httpTarget()}/mark/${mark}`, parent, {
      main: { task: { steps: [workflowStep("call", child)] } },
    });
    // Approval mode: the parent is created (the catalog resolves it) before the catalog is held.
    const runId = await start(parent, { input: {}, mode: "approval" });
    const catalog = hold(catalogStub());
    expect((await api("POST", `/v1/runs/${runId}/approve`)).status).toBe(200);
    // The task suspends at its workflow step; a wake then asks the (held) catalog for the child.
    await waitForRun(runId, (run) => run.nodes.main.status === "waiting", 10_000);
    await new Promise((resolve) => setTimeout(resolve, 300));

    const alarm = await storedAlarm(runId);
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    catalog.release();
    await runDurableObjectAlarm(stubOf(runId));
    await untilHits(mark, 1);

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(childRunIds(await journal(runId))).toEqual([await runIdFor(`${runId}/0/main/0/1/call`)]);
    expect(await hits(mark)).toBe(1);
    expect(await verified(runId)).toBe(true);
  });

  it("a paused run keeps no liveness alarm for a lost child start, and asks for it again at the liveness check after resume", async ({
    expect,
  }) => {
    const mark = uniqueId("mark");
    const child = uniqueId("marks");
    const parent = uniqueId("node-parent");
    await registerFamily(child, `${httpTarget()}/mark/${mark}`, parent, { sub: { workflow: child } });
    const runId = await start(parent, { input: {}, mode: "approval" });
    const catalog = hold(catalogStub());
    expect((await api("POST", `/v1/runs/${runId}/approve`)).json.nodes.sub.status).toBe("waiting");
    expect((await api("POST", `/v1/runs/${runId}/pause`)).json.status).toBe("paused");
    // Nothing in flight but the child start: a paused run sets no liveness check for it (the only alarm it
    // keeps is the run index's backstop while its new status is written, released once written).
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });
    await abortAllDurableObjects();
    catalog.release();

    // Read (which loads a fresh instance) and wait: the paused run asks for no child.
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("paused");
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await hits(mark)).toBe(0);
    expect(childRunIds(await journal(runId))).toEqual([]);

    // Resuming asks again, not at once (the start was requested before), but at the liveness check it sets.
    const resumedAt = Date.now();
    expect((await api("POST", `/v1/runs/${runId}/resume`)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect(await hits(mark)).toBe(0);
    await untilHits(mark, 1, { interval: 50 });
    expect(Date.now() - resumedAt).toBeGreaterThanOrEqual(LIVENESS_CHECK_MS - 500);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(childRunIds(await journal(runId))).toEqual([await runIdFor(`${runId}/0/sub/0/1/-`)]);
    expect(await hits(mark)).toBe(1);
  });
});

describe("child starts of a paused run", () => {
  it("a workflow step reached while the run is paused starts no child until resume, which starts it at once", async ({
    expect,
  }) => {
    const slow = uniqueId("slow");
    const mark = uniqueId("mark");
    const child = uniqueId("marks");
    const parent = uniqueId("paused-step");
    await registerFamily(child, `${httpTarget()}/mark/${mark}`, parent, {
      main: {
        task: { steps: [httpStep("wait", `${httpTarget()}/slow/${slow}?ms=600`), workflowStep("call", child)] },
      },
    });
    const runId = await start(parent);
    await untilHits(slow, 1);
    expect((await api("POST", `/v1/runs/${runId}/pause`)).json.status).toBe("paused");
    // The task finishes its first step and stops at the workflow step; the paused run asks for no child.
    await waitForRun(runId, (run) => run.nodes.main.status === "waiting", 10_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    expect(await hits(mark)).toBe(0);
    const resumedAt = Date.now();
    expect((await api("POST", `/v1/runs/${runId}/resume`)).status).toBe(200);
    await untilHits(mark, 1, { interval: 20 });
    expect(Date.now() - resumedAt).toBeLessThan(LIVENESS_CHECK_MS);
    expect((await waitForRun(runId)).status).toBe("completed");
  });
});

/**
 * An llm step against the local server: input tokens are the words of the
 * prompt ("Hello there": 2), output tokens those of the answer ("Echo: Hello
 * there": 3), so at 3 and 15 USD per million tokens one call costs 0.000051.
 */
const llmStep = (ref: string, key = "none") => ({
  ref,
  action: {
    kind: "llm",
    implementation: {
      prompt: { messages: [{ role: "user", template: `Hello there [[key:${key}]]` }] },
      model: {
        id: "local",
        provider: "openai-compatible",
        model_id: "local-echo",
        base_url: `${llmServer()}/v1`,
        api_key: "$env:LLM_API_KEY",
        pricing: { input_per_mtok: 3, output_per_mtok: 15 },
      },
    },
  },
});
const ONE_CALL: Usage = { input_tokens: 2, output_tokens: 3, cost_usd: 0.000051 };
const times = (usage: Usage, n: number) => ({
  input_tokens: usage.input_tokens * n,
  output_tokens: usage.output_tokens * n,
  cost_usd: usage.cost_usd * n,
});

function expectUsage(expect: (value: unknown) => any, actual: Usage, expected: Usage): void {
  expect(actual.input_tokens).toBe(expected.input_tokens);
  expect(actual.output_tokens).toBe(expected.output_tokens);
  expect(actual.cost_usd).toBeCloseTo(expected.cost_usd, 12);
}

describe("LLM token counts on the run", () => {
  it("adds the tokens of a task that failed after its llm step, and of each attempt a node retry re-runs", async ({
    expect,
  }) => {
    const later = uniqueId("later");
    const id = uniqueId("llm-retry");
    await registerWorkflow({
      id,
      nodes: {
        main: {
          task: {
            steps: [
              llmStep("ask"),
              httpStep("after", `${httpTarget()}/flaky/${later}?fail=1&status=400`, { on_failure: "retry" }),
            ],
          },
          retry: { max_attempts: 2, initial_delay_ms: 10 },
        },
      },
    });
    const run = await waitForRun(await start(id));
    expect(run.status).toBe("completed");
    expect(run.nodes.main.attempts).toBe(2);
    expectUsage(expect, run.usage, times(ONE_CALL, 2));
  });

  it("keeps the usage through a redrive and adds the redriven attempts to it", async ({ expect }) => {
    const later = uniqueId("later");
    const id = uniqueId("llm-redrive");
    await registerWorkflow({
      id,
      nodes: {
        main: {
          task: { steps: [llmStep("ask"), httpStep("after", `${httpTarget()}/flaky/${later}?fail=1&status=400`)] },
        },
      },
    });
    const runId = await start(id);
    const failed = await waitForRun(runId);
    expect(failed.status).toBe("failed");
    expectUsage(expect, failed.usage, ONE_CALL);
    expect(await redrive(runId)).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expectUsage(expect, run.usage, times(ONE_CALL, 2));
  });

  it("adds nothing for a result the coordinator ignores: a task still in flight when fail_fast ended the run", async ({
    expect,
  }) => {
    const key = uniqueId("paid");
    const id = uniqueId("llm-late");
    await registerWorkflow({
      id,
      nodes: {
        late: {
          task: { steps: [llmStep("ask", key), httpStep("wait", `${httpTarget()}/slow?ms=1500`)] },
        },
        boom: { depends_on: [], task: { steps: [httpStep("fail", `${httpTarget()}/status/400`)] } },
      },
    });
    const runId = await start(id);
    expect((await waitForRun(runId)).status).toBe("failed");
    // The model answered (and was paid for), but the task's result came after the run had ended.
    await vi.waitUntil(
      async () => ((await (await fetch(`${llmServer()}/hits/${key}`)).json()) as { count: number }).count >= 1,
      { timeout: 10_000 },
    );
    await new Promise((resolve) => setTimeout(resolve, 2_500));
    const run = (await api("GET", `/v1/runs/${runId}`)).json;
    expect(run.nodes.late.status).toBe("cancelled");
    expect(run.usage).toEqual({ input_tokens: 0, output_tokens: 0, cost_usd: 0 });
  });

  it("counts a child run's tokens in the child's usage only, not in its parent's", async ({ expect }) => {
    const child = uniqueId("llm-child");
    const parent = uniqueId("llm-parent");
    await register({
      workflows: [
        { id: child, nodes: { main: { task: { steps: [llmStep("ask")] } } } },
        {
          id: parent,
          nodes: {
            kid: { workflow: child },
            step: { depends_on: [], task: { steps: [workflowStep("call", child)] } },
          },
        },
      ],
    });
    const parentId = await start(parent);
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    expect(run.usage).toEqual({ input_tokens: 0, output_tokens: 0, cost_usd: 0 });
    const children = childRunIds(await journal(parentId));
    expect(children).toHaveLength(2);
    for (const childId of children) {
      expectUsage(expect, (await api("GET", `/v1/runs/${childId}`)).json.usage, ONE_CALL);
    }
  });
});

/** A child workflow whose output is `{ n: input.n + 1 }`. */
const incrementing = (id: string) => ({
  id,
  nodes: {
    inc: {
      task: {
        steps: [
          {
            ref: "inc",
            action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } },
            output_mapping: { "output.n": "$.n" },
          },
        ],
      },
      output_mapping: { "output.n": "$.n" },
    },
  },
});
const REPEAT_TWICE = {
  repeat: { until: "state.loop.n >= 2", max_iterations: 5 },
  input_mapping: { n: { expr: "has(state.loop) ? state.loop.n : 0" } },
};

describe("repeat on a node that starts a child run", () => {
  // Each iteration gets a child of its own: the child key carries the iteration from the
  // second one on (coordinator/waits.ts waitKey), so iteration 2 does not find iteration 1's
  // child, which had ended and reported already.
  async function expectTwoIterations(expect: ExpectStatic, parentId: string, firstKey: string): Promise<void> {
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    // One node.repeat and then completion: iteration 2's child answered n = 2, so `until` held.
    const entries = await journal(parentId);
    expect(entries.filter((entry) => entry.kind === "node.repeat")).toHaveLength(1);
    expect(childRunIds(entries)).toEqual([await runIdFor(firstKey), await runIdFor(`${firstKey}/2`)]);
    expect(entries.filter((entry) => entry.kind === "child.finished")).toHaveLength(2);
  }

  it("a repeated sub-workflow node starts one child per iteration and completes", async ({ expect }) => {
    const child = uniqueId("inc");
    const parent = uniqueId("repeat-node");
    await register({
      workflows: [
        incrementing(child),
        { id: parent, timeout_ms: 20_000, nodes: { loop: { workflow: child, ...REPEAT_TWICE } } },
      ],
    });
    const parentId = await start(parent);
    await expectTwoIterations(expect, parentId, `${parentId}/0/loop/0/1/-`);
  });

  it("a repeated task's workflow step does the same", async ({ expect }) => {
    const child = uniqueId("inc");
    const parent = uniqueId("repeat-step");
    await register({
      workflows: [
        incrementing(child),
        {
          id: parent,
          timeout_ms: 20_000,
          nodes: {
            loop: {
              task: { steps: [{ ...workflowStep("call", child), output_mapping: { "output.n": "$.n" } }] },
              ...REPEAT_TWICE,
            },
          },
        },
      ],
    });
    const parentId = await start(parent);
    await expectTwoIterations(expect, parentId, `${parentId}/0/loop/0/1/call`);
  });
});
