import { EngineError, toCallError } from "../lib/errors.ts";
import { applyOutputMapping, setTargetPath } from "../lib/expr/mapping.ts";
import type { Json } from "../schemas/common.ts";
import type { CallAttempt, StepRecord, StepUndo, TaskContext, TaskSuspension } from "../schemas/payload.ts";
import type { ResolvedStep } from "../schemas/resolved.ts";

/**
 * Failures that the same task input always reproduces: a step's
 * `on_failure: "retry"` does not make them retryable, since a retry would
 * spend the same budget, or meet the same unsignable value, again.
 */
const DETERMINISTIC_FAILURES: ReadonlySet<string> = new Set([
  "expr.budget_exceeded",
  "template.budget_exceeded",
  "template.too_deep",
  "action.unsignable_output",
]);

/**
 * How a task fails: the error, the ref of the step it failed in (null: before
 * or after its steps) and its context then (null: none worth reporting). Where
 * it starts and where its step loop ends both fail this way.
 */
export interface TaskFailure {
  error: EngineError;
  stepRef: string | null;
  context: TaskContext | null;
}

/** How a failed step ends: the task goes on (`on_failure: "continue"`) or fails. */
export type FailedStepOutcome = (
  | { next: "continue"; context: TaskContext; ran: boolean; failure?: EngineError }
  | { next: "fail"; error: EngineError; ran: boolean }
) & { usage?: Json };

/** How a step ended, and what the task does next (`undo`: what a completed call enqueued). */
export type StepOutcome =
  | (FailedStepOutcome & { undo?: StepUndo })
  | ((
      | { next: "succeed"; context: TaskContext; ran: boolean }
      | { next: "suspend"; wait: TaskSuspension["wait"]; ran: boolean }
    ) & { usage?: Json });

/** A step's output goes where its output mapping says, or to `state.<ref>`. */
export function writeStepOutput(step: ResolvedStep, output: Json, context: TaskContext): TaskContext {
  const target = { state: context.state, output: context.output };
  const next = step.output_mapping
    ? applyOutputMapping(step.output_mapping, output, target)
    : setTargetPath(target, `state.${step.ref}`, output);
  return { ...context, state: next.state, output: next.output };
}

/**
 * What a step's failure does, by its `on_failure`, once the action's own
 * retries are spent. The task running out of time overrides it: the task
 * fails with `task.timeout` (retryable) whatever the step says.
 */
export function onStepFailure(
  step: ResolvedStep,
  error: EngineError,
  context: TaskContext,
  signal: AbortSignal,
): FailedStepOutcome {
  if (signal.aborted) {
    return {
      next: "fail",
      error: EngineError.retryable("task.timeout", `the task ran out of time in step ${step.ref}: ${error.message}`),
      ran: true,
    };
  }
  switch (step.on_failure ?? "abort") {
    case "continue": {
      const errors = Array.isArray(context.state._errors) ? context.state._errors : [];
      const entry = { step: step.ref, error: { code: error.code, message: error.message } };
      return {
        next: "continue",
        context: { ...context, state: { ...context.state, _errors: [...errors, entry] } },
        ran: true,
        failure: error,
      };
    }
    case "retry":
      // A spent budget or a value that cannot be signed comes back the same on every attempt: never worth a retry.
      return {
        next: "fail",
        error: new EngineError(error.code, error.message, {
          retryable: !DETERMINISTIC_FAILURES.has(error.code),
          retryAfterMs: error.retryAfterMs,
          details: error.details,
        }),
        ran: true,
      };
    case "abort":
      return {
        next: "fail",
        error: new EngineError(error.code, error.message, { retryable: false, details: error.details }),
        ran: true,
      };
  }
}

/** How a step went, for the journal: its status, its calls, and its error when it failed. */
export function stepRecord(
  step: ResolvedStep,
  outcome: StepOutcome,
  attempts: CallAttempt[],
  durationMs: number,
): StepRecord {
  const { kind, id, version } = step.action;
  const base = { step: step.ref, action: `${kind} ${id}@${version}`, duration_ms: durationMs, attempts };
  switch (outcome.next) {
    case "suspend":
      return { ...base, status: "suspended" };
    case "fail":
      return { ...base, status: "failed", error: toCallError(outcome.error), ...undoOf(outcome) };
    case "succeed":
      return { ...base, status: "skipped", else: "succeed" };
    case "continue":
      if (!outcome.ran) {
        return { ...base, status: "skipped", else: "skip" };
      }
      return outcome.failure === undefined
        ? { ...base, status: "completed", ...undoOf(outcome) }
        : { ...base, status: "continued", error: toCallError(outcome.failure), ...undoOf(outcome) };
  }
}

/** The undo a step's call enqueued, for its record: a call that completed may still fail its step (its output mapping). */
function undoOf(outcome: { undo?: StepUndo }): { undo?: StepUndo } {
  return outcome.undo === undefined ? {} : { undo: outcome.undo };
}
