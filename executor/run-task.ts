import { MAX_TASK_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { canonicalProblem, MAX_CANONICAL_DEPTH } from "../lib/journal/canonical.ts";
import { scrubbedSecretValues, scrubSecrets } from "../lib/secrets.ts";
import { ACTION_TRAITS } from "../schemas/actions.ts";
import { toUnsignableResult, type TaskPayload, type TaskResult } from "../schemas/payload.ts";
import type { ActionContext } from "./actions/index.ts";
import { runSteps, type StepTally } from "./step-loop.ts";
import { stepRunVariables } from "./run-variables.ts";
import { SYSTEM_CLOCK, type Clock } from "./invoke.ts";
import { failureResult, metricsOf, outputProblem, successResult, suspendedResult } from "./task-result.ts";
import { startOf } from "./task-start.ts";

export { MAX_SNAPSHOT_CHARS } from "./task-result.ts";

/** Levels a result adds around the values it carries (`error.context_snapshot.state.<ref>`, mapped target paths). */
const RESULT_WRAPPING_DEPTH = 16;

export interface RunTaskDeps {
  context: Omit<ActionContext, "signal" | "payload">;
  /**
   * Time, waiting and the task's deadline; tests pass a fake one.
   * @default SYSTEM_CLOCK
   */
  clock?: Clock;
  /**
   * The budget every expression of the task draws from; a caller that counts
   * what tasks spend passes its own.
   * @default a fresh budget of MAX_TASK_WORK_UNITS
   */
  workBudget?: WorkBudget;
}

/**
 * Runs a task's steps strictly in order over its context `{ input, state,
 * output }` and returns a {@link TaskResult}. Never throws: every failure is
 * returned as data with a code and a `retryable` flag.
 */
export async function runTask(payload: TaskPayload, deps: RunTaskDeps): Promise<TaskResult> {
  // Every expression of the task (its steps' conditions and mappings, its actions' CEL and templates) draws from one budget.
  const budget = deps.workBudget ?? new WorkBudget(MAX_TASK_WORK_UNITS, "task");
  const result = await withWorkBudget(budget, () => runToResult(payload, deps));
  return finalizeResult(result, scrubbedSecretValues(deps.context.env));
}

/** The task in three parts: where it starts, its step loop, and its result, which carries its step records. */
async function runToResult(payload: TaskPayload, deps: RunTaskDeps): Promise<TaskResult> {
  const tally: StepTally = { stepsExecuted: 0, usage: { input: 0, output: 0, cost_usd: 0 }, steps: [] };
  const result = await runWithTally(payload, deps, tally);
  return tally.steps.length === 0 ? result : { ...result, steps: tally.steps };
}

async function runWithTally(payload: TaskPayload, deps: RunTaskDeps, tally: StepTally): Promise<TaskResult> {
  const clock = deps.clock ?? SYSTEM_CLOCK;
  const started = clock.now();
  // A task of pure computation (only `context` steps) runs to its end without waiting
  // on anything: no timer could interrupt it, so it sets none (its work budget bounds it).
  const waits = payload.task.steps.some((step) => ACTION_TRAITS[step.action.kind].waitsOnIo);
  const signal = waits ? clock.timeout(payload.timeout_ms) : new AbortController().signal;
  const metrics = () => metricsOf(tally, started, clock.now());
  const run = stepRunVariables(payload);
  const start = startOf(payload, signal, run);
  if (start.resumed !== undefined) {
    tally.steps.push(start.resumed);
  }
  if (!start.ok) {
    return failureResult(payload, start, metrics());
  }
  const end = await runSteps(payload, start, { context: deps.context, clock, signal, run }, tally);
  switch (end.end) {
    case "fail":
      return failureResult(payload, end, metrics());
    case "suspend":
      return suspendedResult(payload, end, metrics());
    case "done": {
      const problem = outputProblem(payload, end.context.output);
      return problem === null
        ? successResult(payload, end.context.output, metrics())
        : failureResult(payload, { error: problem, stepRef: null, context: end.context }, metrics());
    }
  }
}

/**
 * The last net before a result leaves the executor: every secret value is
 * scrubbed from all of it (outputs, error messages, the context snapshot, a
 * gate's prompt), messages are made well-formed text, and a result that still
 * could not be signed into the journal becomes a failure that says so (not
 * retryable: the same work would produce the same value).
 */
export function finalizeResult(result: TaskResult, secrets: readonly string[]): TaskResult {
  const scrubbed = scrubSecrets(result, secrets);
  const error = scrubbed.error;
  const wellFormed =
    error === undefined || error.message.isWellFormed()
      ? scrubbed
      : { ...scrubbed, error: { ...error, message: error.message.toWellFormed() } };
  // Outputs were checked against MAX_CANONICAL_DEPTH as each action returned; the result wraps them a few levels deeper.
  const problem = canonicalProblem(wellFormed, MAX_CANONICAL_DEPTH + RESULT_WRAPPING_DEPTH);
  return problem === null ? wellFormed : toUnsignableResult(result, problem.path, problem.message);
}
