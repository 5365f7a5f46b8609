import { MAX_EVENT_WORK_UNITS } from "../lib/expr/work-budget.ts";
import type { TaskPayload, TaskResult } from "../schemas/payload.ts";
import type { Decision } from "./decide.ts";
import type { Command } from "./draft.ts";

/**
 * Pure tasks run by the coordinator itself, not sent to the executor
 * (docs/architecture.md, "Pure tasks"). A task made only of `context` steps
 * computes values from its input with CEL and nothing else: no I/O, no clock,
 * no secret, nothing that could suspend it. Sending it to the executor costs a
 * Worker invocation and a durable commit before the call may leave; running
 * it here costs neither. It is still dispatched and completed as every task
 * is: `decide` dispatches it (a `task.dispatched` entry, a token), the
 * coordinator runs it as the executor would (executor/execute.ts) and
 * `decide` applies its result (`task.completed`), and the commit that follows
 * holds both. Nothing leaves before that commit, and a crash before it loses
 * nothing that a rerun would not compute again.
 *
 * Each pure task runs here with an allowance of {@link PURE_TASK_WORK_UNITS}
 * of expression work; one that passes it is sent to the executor instead,
 * where its full task budget applies (so where a task runs never changes its
 * result). One event grants pure tasks only as long as its work left covers
 * each one's whole allowance, stops once they and the decisions on their
 * results have spent {@link MAX_EVENT_WORK_UNITS}, and runs at most
 * {@link MAX_PURE_TASKS_PER_EVENT}; the dispatches left go to the executor, as
 * all dispatches did before.
 */

/** Pure tasks one Durable Object event runs at most. */
export const MAX_PURE_TASKS_PER_EVENT = 1_000;
/** The expression work a pure task may spend in the coordinator (about 25 ms at worst); past it, the executor runs it. */
export const PURE_TASK_WORK_UNITS = 100_000;

/** Whether a dispatch is a pure task the coordinator may run: only `context` steps, none holding a limit, asking an approval or retrying. */
export function isPureTask(payload: TaskPayload): boolean {
  return (
    payload.resume === undefined &&
    payload.task.steps.every(
      ({ action }) =>
        action.kind === "context" &&
        action.limits === undefined &&
        action.risk !== "high" &&
        action.execution?.retry_policy === undefined,
    )
  );
}

/** What one event has spent on pure tasks: tasks run, and expression work (theirs and the decisions on their results). */
export class PureTaskBudget {
  private tasks = 0;
  private workUnits = 0;

  /** Pure tasks the event has run. */
  get taken(): number {
    return this.tasks;
  }

  /**
   * How many of `wanted` pure tasks the event may still run, each of whose whole
   * allowance its work left covers; they count as run.
   */
  take(wanted: number): number {
    const byWork = Math.floor((MAX_EVENT_WORK_UNITS - this.workUnits) / PURE_TASK_WORK_UNITS);
    const granted = Math.max(0, Math.min(wanted, byWork, MAX_PURE_TASKS_PER_EVENT - this.tasks));
    this.tasks += granted;
    return granted;
  }

  spend(workUnits: number): void {
    this.workUnits += workUnits;
  }
}

export interface PureTaskDeps {
  budget: PureTaskBudget;
  /**
   * Runs one task as the executor would, within {@link PURE_TASK_WORK_UNITS}; adds its work
   * units to the budget. Null when it passed that allowance: the executor runs it.
   */
  run: (payload: TaskPayload) => Promise<TaskResult | null>;
  /**
   * Decides `results` on `state`, then the wake they make due, which counts
   * the dispatches `pending` will send as in flight.
   */
  decide: (state: Decision["state"], results: TaskResult[], pending: readonly Command[]) => Promise<Decision>;
}

/**
 * Runs the pure tasks `first` dispatched and decides their results, round
 * after round (a chain's next node is dispatched by the decision on its
 * predecessor's result), and returns the decisions merged into one. A round
 * runs only while every command it would leave pending is a journal entry or
 * a dispatch: a wake then knows what is in flight from the dispatches alone.
 */
export async function runPureTasks(first: Decision, deps: PureTaskDeps): Promise<Decision> {
  let decided: Decision = { ...first, changedNodes: new Set(first.changedNodes) };
  deps.budget.spend(first.workUnits);
  for (;;) {
    if (!decided.commands.every((command) => command.kind === "journal" || command.kind === "dispatch")) {
      return decided;
    }
    const pure = decided.commands.filter(isPureDispatch);
    const picked = pure.slice(0, deps.budget.take(pure.length));
    if (picked.length === 0) {
      return decided;
    }
    const outcomes = await Promise.all(
      picked.map(async (command) => ({ command, result: await deps.run(command.payload) })),
    );
    const ran = outcomes.flatMap(({ command, result }) => (result === null ? [] : [{ command, result }]));
    if (ran.length === 0) {
      return decided;
    }
    const done = new Set<Command>(ran.map(({ command }) => command));
    const pending = decided.commands.filter((command) => !done.has(command));
    const next = await deps.decide(
      decided.state,
      ran.map(({ result }) => result),
      pending,
    );
    deps.budget.spend(next.workUnits);
    decided = merge(decided, pending, next);
  }
}

function isPureDispatch(command: Command): command is Extract<Command, { kind: "dispatch" }> {
  return command.kind === "dispatch" && isPureTask(command.payload);
}

/** A decision followed by the next: the later state and wake, the commands of both in order, every node either changed. */
function merge(earlier: Decision, pending: readonly Command[], next: Decision): Decision {
  return {
    state: next.state,
    commands: [...pending, ...next.commands],
    wakeAt: next.wakeAt,
    changedNodes: new Set([...earlier.changedNodes, ...next.changedNodes]),
    workUnits: earlier.workUnits + next.workUnits,
  };
}
