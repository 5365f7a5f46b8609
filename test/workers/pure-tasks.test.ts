import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import { decide, type Command, type Decision, type RunState } from "../../coordinator/decide.ts";
import { toLiveWork } from "../../coordinator/live.ts";
import {
  isPureTask,
  MAX_PURE_TASKS_PER_EVENT,
  PURE_TASK_WORK_UNITS,
  PureTaskBudget,
  runPureTasks,
  type PureTaskDeps,
} from "../../coordinator/pure-tasks.ts";
import { executeTask } from "../../executor/execute.ts";
import { MAX_EVENT_WORK_UNITS } from "../../lib/expr/work-budget.ts";
import { RunSnapshot, type TaskPayload, type TaskResult } from "../../schemas/index.ts";
import { runWorkflow, uniqueId } from "./helpers.ts";
import { apiStartRequest } from "./run-request.ts";
import { stubOf } from "./durable-helpers.ts";

/**
 * The coordinator's pure tasks, on plain objects: a real `decide` and the
 * executor's own `executeTask`, with the loop of pure-tasks.ts between them.
 */

const NOW = 1_700_000_000_000;

const contextAction = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  version: 0,
  kind: "context",
  implementation: { updates: [{ path: "n", expr: "has(input.n) ? input.n + 1 : 1" }] },
  ...extra,
});
const httpAction = (id: string) => ({
  id,
  version: 0,
  kind: "http",
  implementation: { method: "GET", url_template: "http://127.0.0.1:9/never" },
});

/** A chain of nodes, each given its predecessor's `n`; `actions` says each node's one step. */
function chainSnapshot(actions: Record<string, unknown>[]): RunSnapshot {
  const nodes: Record<string, unknown> = {};
  const tasks: Record<string, unknown> = {};
  actions.forEach((action, i) => {
    const id = `n${i}`;
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "n", expr: "1" }] } } };
    nodes[id] = {
      task: { steps: [step] },
      ...(i > 0 ? { depends_on: [`n${i - 1}`], input_mapping: { n: `$.state.n${i - 1}.n` } } : {}),
    };
    tasks[id] = { id: `wf/${id}`, version: 0, steps: [{ ref: "s", action, output_mapping: { "output.n": "$.n" } }] };
  });
  return RunSnapshot.parse({
    workflow: { id: "wf", version: 1, definition: { id: "wf", nodes } },
    tasks,
    workflows: {},
  });
}

function started(snapshot: RunSnapshot): Decision {
  const state = newRunState(apiStartRequest("run_pure", snapshot), NOW);
  const wake = { type: "wake", live: toLiveWork({}) } as const;
  return decide(state, { type: "start" }, { snapshot, now: NOW, random: () => 0 }, wake);
}

/** Deps over the real executor code and `decide`; `ran` collects the tokens run. */
function realDeps(snapshot: RunSnapshot, budget = new PureTaskBudget()): PureTaskDeps & { ran: string[] } {
  const ran: string[] = [];
  return {
    budget,
    ran,
    run: async (payload: TaskPayload): Promise<TaskResult> => {
      ran.push(payload.token_id);
      return executeTask(env, payload);
    },
    decide: async (state: RunState, results: TaskResult[], pending: readonly Command[]) => {
      const tokens = pending.flatMap((command) => (command.kind === "dispatch" ? [command.payload.token_id] : []));
      const wake = { type: "wake", live: toLiveWork({ tokens }) } as const;
      return decide(state, { type: "task_results", results }, { snapshot, now: NOW, random: () => 0 }, wake);
    },
  };
}

const journalKinds = (commands: readonly Command[]) =>
  commands.flatMap((command) => (command.kind === "journal" ? [command.entryKind] : []));

describe("pure tasks", () => {
  it("run a chain of pure tasks to the run's end in one decision, each dispatch and result journaled in order", async ({
    expect,
  }) => {
    const snapshot = chainSnapshot([contextAction("a"), contextAction("b"), contextAction("c")]);
    const deps = realDeps(snapshot);
    const decided = await runPureTasks(started(snapshot), deps);
    expect(deps.ran).toEqual(["run_pure.1", "run_pure.2", "run_pure.3"]);
    expect(decided.state.record.status).toBe("completed");
    expect(decided.state.nodes.n2?.invocations[0]?.output).toEqual({ n: 3 });
    expect(decided.commands.some((command) => command.kind === "dispatch")).toBe(false);
    const kinds = journalKinds(decided.commands).filter((kind) => kind.startsWith("task."));
    expect(kinds).toEqual([1, 2, 3].flatMap(() => ["task.dispatched", "task.completed"]));
    expect(journalKinds(decided.commands).at(-1)).toBe("attest");
    expect(decided.changedNodes).toEqual(new Set(["n0", "n1", "n2"]));
  });

  it("leave a task that does I/O to the executor, dispatched with its token", async ({ expect }) => {
    const snapshot = chainSnapshot([contextAction("a"), httpAction("b")]);
    const deps = realDeps(snapshot);
    const decided = await runPureTasks(started(snapshot), deps);
    expect(deps.ran).toEqual(["run_pure.1"]);
    const dispatches = decided.commands.filter((command) => command.kind === "dispatch");
    expect(dispatches.map((command) => command.kind === "dispatch" && command.payload.node_id)).toEqual(["n1"]);
    expect(decided.state.nodes.n1?.invocations[0]?.status).toBe("running");
    expect(deps.budget.taken).toBe(1);
  });

  it("run nothing while a command other than a journal entry or a dispatch is pending", async ({ expect }) => {
    const snapshot = chainSnapshot([contextAction("a")]);
    const first = started(snapshot);
    const withCleanup: Decision = { ...first, commands: [...first.commands, { kind: "cancel_children", keys: ["k"] }] };
    const deps = realDeps(snapshot);
    const decided = await runPureTasks(withCleanup, deps);
    expect(deps.ran).toEqual([]);
    expect(decided.commands).toEqual(withCleanup.commands);
  });

  it("stop at the event's budget: its count of tasks, or work left that covers each one's whole allowance", async ({
    expect,
  }) => {
    const byCount = new PureTaskBudget();
    // Nothing spent: the event's work covers 100 allowances at once.
    expect(byCount.take(MAX_PURE_TASKS_PER_EVENT)).toBe(MAX_EVENT_WORK_UNITS / PURE_TASK_WORK_UNITS);
    let taken = byCount.taken;
    while (byCount.take(100) > 0) {
      taken = byCount.taken;
    }
    expect(taken).toBe(MAX_PURE_TASKS_PER_EVENT);
    const byWork = new PureTaskBudget();
    byWork.spend(MAX_EVENT_WORK_UNITS - 2 * PURE_TASK_WORK_UNITS + 1);
    expect(byWork.take(5)).toBe(1);
    byWork.spend(PURE_TASK_WORK_UNITS);
    expect(byWork.take(5)).toBe(0);
    // A spent budget leaves the chain's first dispatch to the executor.
    const snapshot = chainSnapshot([contextAction("a")]);
    const deps = realDeps(snapshot, byWork);
    const decided = await runPureTasks(started(snapshot), deps);
    expect(deps.ran).toEqual([]);
    expect(decided.commands.filter((command) => command.kind === "dispatch")).toHaveLength(1);
  });

  it("that pass their allowance run in the executor instead, with the whole task budget, to the same result", async ({
    expect,
  }) => {
    // 200 × 200 sums: about 160,000 work units, over the coordinator's allowance, under one evaluation's and a task's budgets.
    const list = `[${Array.from({ length: 200 }, () => "1").join(",")}]`;
    const heavy = `${list}.map(x, ${list}.map(y, x + y)).size()`;
    const step = {
      ref: "s",
      action: { kind: "context", implementation: { updates: [{ path: "n", expr: heavy }] } },
      output_mapping: { "output.n": "$.n" },
    };
    const light = { ...step, action: { kind: "context", implementation: { updates: [{ path: "n", expr: "1" }] } } };
    const run = await runWorkflow({
      id: uniqueId("pure-heavy"),
      nodes: {
        heavy: { task: { steps: [step] }, output_mapping: { "output.heavy": "$.n" } },
        light: { task: { steps: [light] }, output_mapping: { "output.light": "$.n" } },
      },
    });
    expect(run.error).toBeNull();
    expect(run.output).toEqual({ heavy: 200, light: 1 });
    expect(await stubOf(run.run_id).getStats()).toMatchObject({ pureTasks: 1, dispatches: 1 });
  });

  it("are only tasks of context steps that hold no limit, ask no approval, retry nothing and resume nothing", ({
    expect,
  }) => {
    const payloadOf = (snapshot: RunSnapshot) => {
      const dispatch = started(snapshot).commands.find((command) => command.kind === "dispatch");
      if (dispatch?.kind !== "dispatch") {
        throw new Error("no dispatch");
      }
      return dispatch.payload;
    };
    expect(isPureTask(payloadOf(chainSnapshot([contextAction("a")])))).toBe(true);
    expect(isPureTask(payloadOf(chainSnapshot([httpAction("a")])))).toBe(false);
    expect(isPureTask(payloadOf(chainSnapshot([contextAction("a", { risk: "high" })])))).toBe(false);
    const retrying = contextAction("a", { execution: { retry_policy: { max_attempts: 2 } } });
    expect(isPureTask(payloadOf(chainSnapshot([retrying])))).toBe(false);
    const limited = contextAction("a", { limits: [{ limit: { id: "l", version: 1, concurrency: 1 } }] });
    expect(isPureTask(payloadOf(chainSnapshot([limited])))).toBe(false);
    const payload = payloadOf(chainSnapshot([contextAction("a")]));
    expect(isPureTask({ ...payload, resume: { mode: "after", step_index: 0, context: {} } } as TaskPayload)).toBe(
      false,
    );
  });
});
