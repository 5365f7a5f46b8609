import { describe, it } from "vitest";
import { z } from "zod";
import {
  api,
  hits,
  httpTarget,
  journal,
  llmServer,
  register,
  singleTaskWorkflow,
  start,
  uniqueId,
  waitForRun,
} from "./helpers.ts";

/**
 * Limits across runs, end to end in workerd: real coordinators, the real
 * limit objects and the local HTTP target, whose `/slow?stamp=1` says when
 * each call began and ended on its own clock. What the limits promise is read
 * there, at the target, never from the engine's own account.
 */

const Stamped = z.object({ started_at: z.number(), finished_at: z.number() });
type Stamped = z.infer<typeof Stamped>;

/** Registers limit `limit`, an action GETting the target's `/slow/<key>` under it (keyed by `key` when given), and a workflow of one step of it. */
async function registerLimited(
  limit: Record<string, unknown>,
  options: { ms: number; key?: string } = { ms: 100 },
): Promise<{ workflow: string; limit: string; target: string }> {
  const limitId = uniqueId("lim");
  const actionId = uniqueId("call");
  const workflow = uniqueId("limited");
  const target = uniqueId("target");
  await register({
    limits: [{ id: limitId, ...limit }],
    actions: [
      {
        id: actionId,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/slow/${target}?ms=${options.ms}&stamp=1` },
        limits: [{ limit: limitId, ...(options.key === undefined ? {} : { key: options.key }) }],
      },
    ],
    workflows: [
      singleTaskWorkflow(workflow, [{ ref: "call", action: actionId, output_mapping: { "output.call": "$.body" } }]),
    ],
  });
  return { workflow, limit: limitId, target };
}

/** Starts `count` runs of `workflow` (inputs from `inputOf`) and waits for each to end; returns the runs. */
async function runMany(workflow: string, count: number, inputOf: (index: number) => unknown = () => ({})) {
  const ids = await Promise.all(
    Array.from({ length: count }, (_, index) => start(workflow, { input: inputOf(index) })),
  );
  return Promise.all(ids.map((id) => waitForRun(id, undefined, 60_000)));
}

/** Each run's call, as the target stamped it. */
function callsOf(runs: { output: { result?: { call?: unknown } } | null }[]): Stamped[] {
  return runs.map((run) => Stamped.parse(run.output?.result?.call));
}

/** The most calls in flight at once at the target. */
function maxInFlight(calls: readonly Stamped[]): number {
  const moments = calls.flatMap((call) => [
    { at: call.started_at, delta: 1 },
    { at: call.finished_at, delta: -1 },
  ]);
  // Ends before starts at the same millisecond: a call that ended as another began did not overlap it.
  moments.sort((a, b) => a.at - b.at || a.delta - b.delta);
  let current = 0;
  let max = 0;
  for (const moment of moments) {
    current += moment.delta;
    max = Math.max(max, current);
  }
  return max;
}

/** A limit of one run at a time, and a workflow under it whose one step waits for a person (so a run holds its slot until cancelled). */
async function registerGated(): Promise<{ workflow: string; limit: string }> {
  const limit = uniqueId("lim");
  const workflow = uniqueId("gated");
  const ask = { kind: "human", implementation: { prompt_template: "go?", input_schema: { type: "object" } } };
  await register({
    limits: [{ id: limit, concurrency: 1 }],
    workflows: [singleTaskWorkflow(workflow, [{ ref: "wait", action: ask }], { limits: [{ limit }] })],
  });
  return { workflow, limit };
}

/** The one of `ids` that leaves the queue next (its gate opens: `waiting`), polled until one does. */
async function nextStarted(ids: readonly string[], timeoutMs = 5_000): Promise<string> {
  const deadline = Date.now() + timeoutMs;
  while (Date.now() < deadline) {
    for (const id of ids) {
      if ((await api("GET", `/v1/runs/${id}`)).json.status === "waiting") {
        return id;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
  throw new Error(`none of ${ids.join(", ")} started`);
}

describe("limits across runs", () => {
  it("50 runs against concurrency 3 never have more than 3 calls in flight at the target, and all complete", async ({
    expect,
  }) => {
    const { workflow, target } = await registerLimited({ concurrency: 3 }, { ms: 120 });
    const runs = await runMany(workflow, 50);
    expect(runs.map((run) => run.status)).toEqual(Array(50).fill("completed"));
    const calls = callsOf(runs);
    expect(maxInFlight(calls)).toBeLessThanOrEqual(3);
    expect(maxInFlight(calls)).toBeGreaterThanOrEqual(2); // the slots were used, not one at a time
    expect(await hits(target)).toBe(50); // each call made once: no slot given twice, no call lost
  });

  it("rate 10 per second spaces the calls: no 11 of them start within one second at the target", async ({ expect }) => {
    const { workflow } = await registerLimited({ rate: { limit: 10, period_ms: 1000 } }, { ms: 1 });
    // One call first, out of the window before the others start: the first calls of an isolate are slower to leave it.
    await runMany(workflow, 1);
    await new Promise((resolve) => setTimeout(resolve, 1100));
    const runs = await runMany(workflow, 25);
    expect(runs.map((run) => run.status)).toEqual(Array(25).fill("completed"));
    const starts = callsOf(runs)
      .map((call) => call.started_at)
      .sort((a, b) => a - b);
    // Spaced where the executor acquires each call; the target sees each call later, by the time its
    // request takes to leave a thread that is also starting the other runs. The first ten calls are
    // granted as they ask (the window starts empty), so their spread here is that delay, measured.
    const slack = (starts[9] ?? 0) - (starts[0] ?? 0) + 100;
    // Eleven calls in one window would arrive far closer than this leaves room for.
    expect(slack).toBeLessThan(500);
    for (let index = 10; index < starts.length; index += 1) {
      expect((starts[index] ?? 0) - (starts[index - 10] ?? 0)).toBeGreaterThanOrEqual(1000 - slack);
    }
    // 25 calls at 10 per second take at least two windows.
    expect((starts.at(-1) ?? 0) - (starts[0] ?? 0)).toBeGreaterThanOrEqual(2000 - slack);
  });

  it("keys give separate budgets: one key's queue never holds up another's", async ({ expect }) => {
    const { workflow } = await registerLimited({ concurrency: 1 }, { ms: 300, key: "input.customer" });
    const runs = await runMany(workflow, 4, (index) => ({ customer: index < 2 ? "acme" : "globex" }));
    const calls = callsOf(runs);
    // Within a key, one at a time; across keys, at the same time.
    expect(maxInFlight(calls.slice(0, 2))).toBe(1);
    expect(maxInFlight(calls.slice(2))).toBe(1);
    expect(maxInFlight(calls)).toBe(2);
  });

  it("a step waiting for a limit holds no invocation: the run is waiting, its node shows waiting_for limit, the status route counts it", async ({
    expect,
  }) => {
    const { workflow, limit } = await registerLimited({ concurrency: 1 }, { ms: 1500 });
    const first = await start(workflow, { input: {} });
    await waitForRun(first, (run) => run.nodes.main?.status === "running");
    const second = await start(workflow, { input: {} });
    const waiting = await waitForRun(second, (run) => run.status === "waiting");
    expect(waiting.waiting_for).toEqual([
      expect.objectContaining({ kind: "limit", limit, key: "", node: "main", step: "call" }),
    ]);
    const status = await api("GET", `/v1/limits/${limit}/status`);
    expect(status.status).toBe(200);
    expect(status.json).toMatchObject({ in_use: 1, waiting: 1 });
    await Promise.all([waitForRun(first), waitForRun(second)]);
    expect((await api("GET", `/v1/limits/${limit}/status`)).json).toMatchObject({ in_use: 0, waiting: 0 });
  });

  it("cancel frees a slot at once: the run queued behind a cancelled one starts without waiting for its call", async ({
    expect,
  }) => {
    const { workflow: gated, limit: limitId } = await registerGated();
    const holder = await start(gated, { input: {} });
    await waitForRun(holder, (run) => run.status === "waiting");
    const queued = await start(gated, { input: {} });
    const before = await waitForRun(queued, (run) => run.limits?.[0]?.status === "waiting");
    expect(before.status).toBe("queued");
    const cancelledAt = Date.now();
    expect((await api("POST", `/v1/runs/${holder}/cancel`, {})).status).toBe(200);
    const started = await waitForRun(queued, (run) => run.status === "waiting", 5_000);
    expect(started.limits).toEqual([expect.objectContaining({ limit: limitId, status: "held" })]);
    expect(Date.now() - cancelledAt).toBeLessThan(3_000);
    await api("POST", `/v1/runs/${queued}/cancel`, {});
  });

  it("priority: a freed slot goes to the highest priority waiting, oldest first", async ({ expect }) => {
    const { workflow: gated } = await registerGated();
    const holder = await start(gated, { input: {} });
    await waitForRun(holder, (run) => run.status === "waiting");
    const order: [string, number][] = [];
    for (const priority of [2, 9, 5, 9]) {
      const id = await start(gated, { input: {}, priority });
      await waitForRun(id, (run) => run.limits?.[0]?.status === "waiting");
      order.push([id, priority]);
    }
    const served: string[] = [];
    let current = holder;
    for (let turn = 0; turn < order.length; turn += 1) {
      expect((await api("POST", `/v1/runs/${current}/cancel`, {})).status).toBe(200);
      const next = await nextStarted(order.map(([id]) => id).filter((id) => !served.includes(id)));
      served.push(next);
      current = next;
    }
    // 9 (first), 9 (second), 5, 2.
    expect(served).toEqual([order[1]?.[0], order[3]?.[0], order[2]?.[0], order[0]?.[0]]);
    await api("POST", `/v1/runs/${current}/cancel`, {});
  });

  it("a tokens budget counts what the model reports: once spent, the next call waits for the window to move on", async ({
    expect,
  }) => {
    const limit = uniqueId("tok");
    const model = uniqueId("model");
    const workflow = uniqueId("summarize");
    const prompt = { messages: [{ role: "user", template: "Summarise {{topic}} please" }] };
    await register({
      limits: [{ id: limit, tokens: { limit: 5, period_ms: 3000 } }],
      models: [
        {
          id: model,
          provider: "openai-compatible",
          model_id: "local-echo",
          base_url: `${llmServer()}/v1`,
          api_key: "$env:LLM_API_KEY",
          limits: [{ limit }],
        },
      ],
      workflows: [
        singleTaskWorkflow(workflow, [
          {
            ref: "answer",
            action: { kind: "llm", implementation: { prompt, model } },
            input_mapping: { topic: "$.input.topic" },
          },
        ]),
      ],
    });
    const first = await waitForRun(await start(workflow, { input: { topic: "the tides" } }));
    expect(first.status).toBe("completed");
    expect(first.usage.input_tokens + first.usage.output_tokens).toBeGreaterThanOrEqual(5);
    const second = await waitForRun(await start(workflow, { input: { topic: "the moon" } }), undefined, 15_000);
    expect(second.status).toBe("completed");
    const entries = await journal(second.run_id);
    const granted = entries.find((entry) => entry.kind === "limit.granted");
    expect(entries.some((entry) => entry.kind === "limit.waiting")).toBe(true);
    // The first call's tokens leave the window 3 s after they were counted.
    expect(granted?.body.waited_ms).toBeGreaterThan(1000);
    const status = await api("GET", `/v1/limits/${limit}/status`);
    expect(status.json.window.used).toBeGreaterThanOrEqual(1);
  });

  it("a 429 with Retry-After pauses the limit for every run using it, not only the caller", async ({ expect }) => {
    const limit = uniqueId("lim");
    const [throttled, calm] = [uniqueId("throttled"), uniqueId("calm")];
    const target = uniqueId("after-pause");
    const step = (url: string) => ({
      ref: "call",
      action: {
        kind: "http",
        implementation: { method: "GET", url_template: url },
        limits: [{ limit }],
        execution: { retry_policy: { max_attempts: 1 } },
      },
      on_failure: "continue",
      output_mapping: { "output.call": "$.body" },
    });
    await register({
      limits: [{ id: limit, concurrency: 10 }],
      workflows: [
        singleTaskWorkflow(throttled, [step(`${httpTarget()}/status/429?retry_after=2`)]),
        singleTaskWorkflow(calm, [step(`${httpTarget()}/slow/${target}?ms=1&stamp=1`)]),
      ],
    });
    const answered429At = Date.now();
    await waitForRun(await start(throttled, { input: {} }));
    const paused = (await api("GET", `/v1/limits/${limit}/status`)).json;
    expect(paused.paused_until).not.toBeNull();
    // Another run, another action, the same limit: its call waits until the pause ends.
    const run = await waitForRun(await start(calm, { input: {} }), undefined, 15_000);
    expect(run.status).toBe("completed");
    expect(Stamped.parse(run.output.result.call).started_at).toBeGreaterThanOrEqual(answered429At + 2000 - 100);
    expect((await journal(run.run_id)).some((entry) => entry.kind === "limit.waiting")).toBe(true);
  });
});
