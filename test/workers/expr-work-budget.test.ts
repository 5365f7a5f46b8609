import { describe, it } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import { decide, type Decision, type RunState } from "../../coordinator/decide.ts";
import { MAX_FOREACH_ITEMS } from "../../coordinator/nodes.ts";
import { NOTHING_LIVE } from "../../coordinator/live.ts";
import { EngineError } from "../../lib/errors.ts";
import { evalCel, evalCelBool } from "../../lib/expr/cel.ts";
import { MAX_JSONPATH_STEPS, selectJsonPath } from "../../lib/expr/jsonpath.ts";
import { applyOutputMapping, buildInput } from "../../lib/expr/mapping.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import {
  COMPILE_BASE_WORK_UNITS,
  EVALUATION_BASE_WORK_UNITS,
  MAX_EVENT_WORK_UNITS,
  MAX_TASK_WORK_UNITS,
  WorkBudget,
  currentWorkBudget,
  withWorkBudget,
} from "../../lib/expr/work-budget.ts";
import { RunSnapshot, type Node, type Json } from "../../schemas/index.ts";
import { uniqueId, runWorkflow, verifyRun } from "./helpers.ts";
import { apiStartRequest } from "./run-request.ts";

/**
 * One work budget per scope (a coordinator event, a task) shared by every CEL, JSONPath
 * and template evaluation in it (lib/expr/work-budget.ts). Times are printed, never
 * asserted: workerd's clock advances only across I/O, so each measurement ends with a
 * timer.
 */

function errorOf(fn: () => unknown): EngineError | undefined {
  try {
    fn();
  } catch (error) {
    if (error instanceof EngineError) {
      return error;
    }
    throw error;
  }
  return undefined;
}

/** Milliseconds `work` took, read across a timer (the clock stands still while code runs). */
async function timed<T>(work: () => T): Promise<{ value: T; ms: number }> {
  await new Promise((resolve) => setTimeout(resolve, 0));
  const started = Date.now();
  const value = work();
  await new Promise((resolve) => setTimeout(resolve, 0));
  return { value, ms: Date.now() - started };
}

const range = (length: number): number[] => Array.from({ length }, (_, i) => i);

/**
 * A condition that spends nearly a whole per-evaluation CEL budget (about 950,000 of
 * 1,000,000 units: checked below) whatever the item: 250 × 250 inner iterations.
 */
const HEAVY_WHEN = "size(input.l.map(x, input.l.map(y, x + y))) >= 0";
const HEAVY_LIST = range(250);

describe("a work budget scope", () => {
  it("charges CEL, JSONPath and template evaluations to one budget, then fails every later one with expr.budget_exceeded", ({
    expect,
  }) => {
    const budget = new WorkBudget(5_000, "test scope");
    const doc = { input: { items: range(10), name: "x" }, state: {}, output: {} };
    withWorkBudget(budget, () => {
      expect(evalCel("size(input.items) + 1", doc)).toBe(11);
      const afterCel = budget.spent;
      expect(afterCel).toBeGreaterThan(COMPILE_BASE_WORK_UNITS + EVALUATION_BASE_WORK_UNITS);
      expect(selectJsonPath("$.input.items[*]", doc)).toEqual({ found: true, value: range(10) });
      const afterPath = budget.spent;
      expect(afterPath).toBeGreaterThan(afterCel);
      expect(renderTemplate("{{#each input.items}}{{this}}{{/each}}", doc)).toBe("0123456789");
      expect(budget.spent).toBeGreaterThan(afterPath);
      // Each kind stops where the scope ends, with the scope's reason.
      const cel = errorOf(() =>
        evalCel("input.items.map(x, input.items.map(y, x * y))", { input: { items: range(100) } }),
      );
      expect(cel).toMatchObject({ code: "expr.budget_exceeded", retryable: false });
      expect(cel?.message).toContain("exceeded the work budget of this test scope (5000 units");
      expect(budget.remaining).toBe(0);
      for (const later of [
        () => evalCel("1 + 1", {}),
        () => selectJsonPath("$", doc),
        () => renderTemplate("x", doc),
      ]) {
        expect(errorOf(later)).toMatchObject({
          code: "expr.budget_exceeded",
          message: expect.stringContaining("work budget of this test scope"),
        });
      }
    });
  });

  it("stops a JSONPath selection or a template rendering at what the scope has left, with expr.budget_exceeded", ({
    expect,
  }) => {
    const doc = { a: range(2_000) };
    const path = errorOf(() =>
      withWorkBudget(new WorkBudget(3_000, "test scope"), () => selectJsonPath("$.a[?@ >= 0]", doc)),
    );
    expect(path).toMatchObject({ code: "expr.budget_exceeded" });
    expect(path?.message).toMatch(
      /JSONPath selection exceeded the work budget of this test scope .* \(in "\$\.a\[\?@ >= 0\]"\)/,
    );
    const template = errorOf(() =>
      withWorkBudget(new WorkBudget(3_000, "test scope"), () => renderTemplate("{{#each a}}{{this}}{{/each}}", doc)),
    );
    expect(template).toMatchObject({
      code: "expr.budget_exceeded",
      message: expect.stringContaining("template rendering exceeded the work budget of this test scope"),
    });
    // Outside any scope only the evaluations' own limits apply.
    expect(selectJsonPath("$.a[?@ >= 0]", doc)).toEqual({ found: true, value: doc.a });
    expect(renderTemplate("{{#each a}}{{this}}{{/each}}", doc)).toHaveLength(6_890);
  });

  it("charges the same whether or not the isolate had compiled the source, and compiles it once per scope", ({
    expect,
  }) => {
    const source = `input.n * 2 + ${uniqueId("n").length}`;
    const spend = () => {
      const budget = new WorkBudget(MAX_EVENT_WORK_UNITS, "test scope");
      withWorkBudget(budget, () => evalCel(source, { input: { n: 1 } }));
      return budget.spent;
    };
    const cold = spend();
    const warm = spend();
    expect(warm).toBe(cold);
    // A second evaluation in one scope pays only for evaluating.
    const budget = new WorkBudget(MAX_EVENT_WORK_UNITS, "test scope");
    withWorkBudget(budget, () => {
      evalCel(source, { input: { n: 1 } });
      const first = budget.spent;
      evalCel(source, { input: { n: 2 } });
      expect(budget.spent - first).toBeLessThan(first - COMPILE_BASE_WORK_UNITS);
    });
  });

  it("follows its own async work across awaits, never another scope's", async ({ expect }) => {
    const a = new WorkBudget(MAX_TASK_WORK_UNITS, "task a");
    const b = new WorkBudget(MAX_TASK_WORK_UNITS, "task b");
    const work = async (budget: WorkBudget, rounds: number) =>
      withWorkBudget(budget, async () => {
        for (let round = 0; round < rounds; round += 1) {
          await new Promise((resolve) => setTimeout(resolve, 1));
          expect(currentWorkBudget()).toBe(budget);
          evalCel("[1, 2, 3].map(x, x * 2)", {});
        }
      });
    await Promise.all([work(a, 5), work(b, 1)]);
    expect(currentWorkBudget()).toBeUndefined();
    expect(a.spent).toBeGreaterThan(b.spent);
    const once = b.spent;
    const alone = new WorkBudget(MAX_TASK_WORK_UNITS, "alone");
    await work(alone, 1);
    expect(alone.spent).toBe(once);
  });
});

describe("the evaluations a scope multiplies stay bounded one by one", () => {
  it("stops a JSONPath query nested in a filter (N² node visits) with expr.budget_exceeded", async ({ expect }) => {
    // 10,000 numbers × `$..*` for each: 10^8 visits, 37 s in workerd before nodes were counted.
    const doc = { a: range(10_000) };
    const { value: error, ms } = await timed(() => errorOf(() => selectJsonPath("$.a[?count($..*) > 0]", doc)));
    console.log(`$.a[?count($..*) > 0] over 10,000 numbers: stopped in ${ms} ms`);
    expect(error).toMatchObject({
      code: "expr.budget_exceeded",
      message: expect.stringContaining(`its budget of ${MAX_JSONPATH_STEPS} steps`),
    });
    // A wide selection over 100,000 nodes fits: nodes cost ten steps each.
    const big = { l: range(100_000).map((n) => ({ n })) };
    expect((selectJsonPath("$.l[?@.n >= 0].n", big) as { value: unknown[] }).value).toHaveLength(100_000);
  });

  it("charges CEL matches() compiling each pattern by its program, once per pattern in an evaluation", async ({
    expect,
  }) => {
    // `[\p{L}\p{N}]{500}` compiles in about 0.6 ms: 1,000 distinct ones took 0.6 s in one evaluation
    // unseen by the meter (the cache keeps 100), and a 1 MiB input holds 50,000 of them.
    const patterns = range(1_000).map((i) => `${i}[\\p{L}\\p{N}]{500}`);
    const { value: error, ms } = await timed(() =>
      errorOf(() => evalCel("p.filter(x, 'abc'.matches(x))", { p: patterns })),
    );
    console.log(`1,000 distinct heavy matches() patterns: stopped in ${ms} ms`);
    expect(error).toMatchObject({ code: "expr.budget_exceeded" });
    // One pattern over many strings compiles once.
    expect(evalCel("l.filter(s, s.matches('^[a-z]+$')).size()", { l: range(5_000).map(() => "abc") })).toBe(5_000);
  });

  it("charges JSONPath match() compiling each pattern from data, once per pattern in a selection", async ({
    expect,
  }) => {
    // `[a-z]{1000}` (RE2's largest repeat) compiles in about 3 ms: 2,000 distinct ones would take
    // seconds in one selection at no charge (the cache keeps 100), and a 1 MiB input holds 80,000 of them.
    const items = range(2_000).map((i) => ({ s: "a", re: `${i}[a-z]{1000}` }));
    const { value: error, ms } = await timed(() =>
      errorOf(() => selectJsonPath("$.items[?match(@.s, @.re)]", { items })),
    );
    console.log(`2,000 distinct [a-z]{1000} patterns from data: stopped in ${ms} ms`);
    expect(error).toMatchObject({
      code: "expr.budget_exceeded",
      message: expect.stringContaining("exceeded its budget"),
    });
    const same = range(5_000).map(() => ({ s: "abc", re: "[a-z]+" }));
    expect((selectJsonPath("$.items[?match(@.s, @.re)]", { items: same }) as { value: unknown[] }).value).toHaveLength(
      5_000,
    );
  });
});

// ─── The coordinator: one budget per decide ──────────────────────────────────

const NOW = 1_700_000_000_000;

function makeState(nodes: Record<string, Partial<Node>>, input: Json): { state: RunState; snapshot: RunSnapshot } {
  const task = {
    steps: [{ ref: "set", action: { kind: "context", implementation: { updates: [{ path: "done", expr: "true" }] } } }],
  };
  // Plain objects: the snapshot schema parses them.
  const definitions: Record<string, unknown> = {};
  const tasks: Record<string, unknown> = {};
  for (const [nodeId, node] of Object.entries(nodes)) {
    definitions[nodeId] = { task, ...node };
    tasks[nodeId] = {
      id: `wf/${nodeId}`,
      version: 0,
      steps: [{ ref: "set", action: { id: `wf/${nodeId}/set`, version: 0, ...task.steps[0]?.action } }],
    };
  }
  const snapshot = RunSnapshot.parse({
    workflow: { id: "wf", version: 1, definition: { id: "wf", nodes: definitions } },
    tasks,
    workflows: {},
  });
  return {
    state: newRunState(apiStartRequest("run_budget", snapshot, input), NOW),
    snapshot,
  };
}

/** The state after `start`, and the wake that starts the nodes (decided by `decideWake`). */
function startedRun(
  nodes: Record<string, Partial<Node>>,
  input: Json,
): { state: RunState; decideWake: () => Decision } {
  const { state, snapshot } = makeState(nodes, input);
  const started = decide(state, { type: "start" }, { snapshot, now: NOW, random: () => 0 });
  return {
    state: started.state,
    decideWake: () =>
      decide(started.state, { type: "wake", live: NOTHING_LIVE }, { snapshot, now: NOW, random: () => 0 }),
  };
}

describe("the coordinator's event budget", () => {
  it("lets one evaluation of the heavy condition spend nearly its whole own budget", ({ expect }) => {
    const budget = new WorkBudget(MAX_EVENT_WORK_UNITS, "test scope");
    withWorkBudget(budget, () => evalCelBool(HEAVY_WHEN, { input: { l: HEAVY_LIST }, item: 0, index: 0 }));
    expect(budget.spent).toBeGreaterThan(900_000);
    expect(budget.spent).toBeLessThan(1_000_000 + COMPILE_BASE_WORK_UNITS + 1_000);
  });

  it(`fails a ${MAX_FOREACH_ITEMS}-item foreach whose when spends nearly a full evaluation budget per item with expr.budget_exceeded, in one bounded event, and decides the same way again`, async ({
    expect,
  }) => {
    const run = startedRun(
      { each: { foreach: { items: "$.input.items" }, when: HEAVY_WHEN } },
      { items: range(MAX_FOREACH_ITEMS), l: HEAVY_LIST },
    );
    const { value: decision, ms } = await timed(run.decideWake);
    console.log(
      `decide (wake) of a ${MAX_FOREACH_ITEMS}-item foreach with a ~950,000-unit when: ${ms} ms (without the event budget: ~${MAX_FOREACH_ITEMS} × 0.2 s)`,
    );
    const node = decision.state.nodes.each;
    expect(node?.status).toBe("failed");
    expect(node?.error).toMatchObject({ code: "expr.budget_exceeded", node: "each" });
    expect(node?.error?.message).toContain(
      `exceeded the work budget of this coordinator event (${MAX_EVENT_WORK_UNITS} units`,
    );
    expect(decision.state.record.status).toBe("failed");
    expect(decision.commands.some((command) => command.kind === "dispatch")).toBe(false);
    // The same event on the same state: the same decision (the budget counts work, not time).
    expect(run.decideWake()).toEqual(decision);
  }, 120_000);

  it(`starts a ${MAX_FOREACH_ITEMS}-item foreach with a simple when and mappings in one event, far within the budget`, async ({
    expect,
  }) => {
    const node = {
      foreach: { items: "$.input.items" },
      when: "item % 2 == 0 || index >= 0",
      input_mapping: { n: "$.item", at: "$.index" },
      output_mapping: { "output.sq": "$.sq" },
    };
    const input = { items: range(MAX_FOREACH_ITEMS) };
    const { value: decision, ms } = await timed(startedRun({ each: node }, input).decideWake);
    console.log(`decide (wake) of a ${MAX_FOREACH_ITEMS}-item foreach with a simple when and input mapping: ${ms} ms`);
    expect(decision.state.nodes.each?.status).toBe("running");
    expect(decision.state.nodes.each?.invocations).toHaveLength(MAX_FOREACH_ITEMS);
    // What the node's evaluations spend in a scope of their own: the start (when and input
    // mapping per item) and the completion (output mapping per item), each one event.
    const start = new WorkBudget(MAX_EVENT_WORK_UNITS, "test scope");
    withWorkBudget(start, () => {
      for (const [index, item] of input.items.entries()) {
        const vars = { input, state: {}, output: {}, item, index };
        evalCelBool(node.when, vars);
        buildInput(node.input_mapping, vars);
      }
    });
    const complete = new WorkBudget(MAX_EVENT_WORK_UNITS, "test scope");
    withWorkBudget(complete, () => {
      for (const item of input.items) {
        applyOutputMapping({ "state.v": "$.sq" }, { sq: item * item }, { state: {}, output: {} });
      }
    });
    console.log(`work units: start ${start.spent}, completion ${complete.spent} of ${MAX_EVENT_WORK_UNITS} each`);
    expect(start.spent).toBeLessThan(MAX_EVENT_WORK_UNITS / 10);
    expect(complete.spent).toBeLessThan(MAX_EVENT_WORK_UNITS / 10);
  }, 120_000);
});

// ─── End to end: real Durable Objects and the executor ──────────────────────

const run = (workflow: Record<string, unknown>, input: unknown, timeoutMs: number): Promise<any> =>
  runWorkflow(workflow, input, {}, timeoutMs);

const square = {
  steps: [
    {
      ref: "sq",
      action: { kind: "context", implementation: { updates: [{ path: "sq", expr: "input.n * input.n" }] } },
      input_mapping: { n: "$.input.n" },
      output_mapping: { "output.sq": "$.sq" },
    },
  ],
};

describe("runs under the work budgets", () => {
  it(`fails a run whose ${MAX_FOREACH_ITEMS}-item foreach spends nearly a full evaluation per item on its when, and its journal verifies`, async ({
    expect,
  }) => {
    const started = Date.now();
    const result = await run(
      {
        id: uniqueId("heavywhen"),
        nodes: {
          each: { foreach: { items: "$.input.items" }, when: HEAVY_WHEN, input_mapping: { n: "$.item" }, task: square },
        },
      },
      { items: range(MAX_FOREACH_ITEMS), l: HEAVY_LIST },
      120_000,
    );
    console.log(`run with a ${MAX_FOREACH_ITEMS}-item heavy when: ${result.status} after ${Date.now() - started} ms`);
    expect(result.status).toBe("failed");
    expect(result.error).toMatchObject({ code: "expr.budget_exceeded", node: "each" });
    expect(result.nodes.each.status).toBe("failed");
    expect(await verifyRun(result.run_id)).toMatchObject({ ok: true });
  }, 180_000);

  it(`completes a ${MAX_FOREACH_ITEMS}-item foreach with a simple when and mappings`, async ({ expect }) => {
    const items = range(MAX_FOREACH_ITEMS);
    const started = Date.now();
    const result = await run(
      {
        id: uniqueId("wide"),
        max_parallel: 200,
        nodes: {
          each: {
            foreach: { items: "$.input.items" },
            when: "item % 2 == 0 || index >= 0",
            input_mapping: { n: "$.item" },
            task: square,
            output_mapping: { "output.sq": "$.sq" },
          },
        },
      },
      { items },
      600_000,
    );
    console.log(`run with a ${MAX_FOREACH_ITEMS}-item foreach: ${result.status} after ${Date.now() - started} ms`);
    expect(result.status, JSON.stringify(result.error)).toBe("completed");
    expect(result.output.sq).toEqual(items.map((n) => n * n));
  }, 660_000);

  it("fails a task whose steps together spend more than the task's work budget, though each step is within its own and the task's timeout never fires", async ({
    expect,
  }) => {
    const step = (i: number) => ({
      ref: `s${i}`,
      action: {
        kind: "context",
        implementation: { updates: [{ path: "v", expr: "size(input.l.map(x, input.l.map(y, x + y)))" }] },
      },
      input_mapping: { l: "$.input.l" },
    });
    const started = Date.now();
    const result = await run(
      {
        id: uniqueId("heavytask"),
        nodes: { main: { input_mapping: { l: "$.input.l" }, timeout_ms: 1_000, task: { steps: range(40).map(step) } } },
      },
      { l: HEAVY_LIST },
      120_000,
    );
    console.log(`task of 40 steps of ~950,000 units each: ${result.status} after ${Date.now() - started} ms`);
    expect(result.status).toBe("failed");
    expect(result.error).toMatchObject({ code: "expr.budget_exceeded", node: "main" });
    expect(result.error.message).toContain(`exceeded the work budget of this task (${MAX_TASK_WORK_UNITS} units`);
    expect(await verifyRun(result.run_id)).toMatchObject({ ok: true });
  }, 180_000);
});
