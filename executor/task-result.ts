import { EngineError, toTaskError as engineErrorToTaskError } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import type { Json } from "../schemas/common.ts";
import type { TaskContext, TaskPayload, TaskResult } from "../schemas/payload.ts";
import type { LoopEnd, StepTally } from "./step-loop.ts";
import type { TaskFailure } from "./step-outcome.ts";

/**
 * The largest failure snapshot (a task context) kept with an error, in characters
 * of JSON: a larger one is left out of the report. (A task's output has no limit of
 * its own here: its large values leave as blobs, up to MAX_VALUE_BYTES, blobs/offload.ts.)
 */
export const MAX_SNAPSHOT_CHARS = 1_000_000;

type Metrics = TaskResult["metrics"];

/** The result's metrics: how long the task took, how many steps ran, what its models used. */
export function metricsOf(tally: StepTally, started: number, now: number): Metrics {
  return { duration_ms: now - started, steps_executed: tally.stepsExecuted, llm_tokens: { ...tally.usage } };
}

/** The task's output checked against its `output_schema`: null when it matches. */
export function outputProblem(payload: TaskPayload, output: TaskContext["output"]): EngineError | null {
  const problems = validateJson(payload.task.output_schema, output, "output");
  if (problems.length === 0) {
    return null;
  }
  return EngineError.terminal(
    "task.invalid_output",
    `the output of task ${payload.task.id} does not match its output_schema`,
    problems,
  );
}

/** A task that succeeded (its large values leave as blobs afterwards: executor/blobs.ts). */
export function successResult(payload: TaskPayload, output: Json, metrics: Metrics): TaskResult {
  return { token_id: payload.token_id, success: true, output, metrics };
}

/** A task that failed, in the step and with the context its failure names. */
export function failureResult(payload: TaskPayload, failure: TaskFailure, metrics: Metrics): TaskResult {
  const error = toTaskError(failure.error, failure.stepRef, failure.context);
  return { token_id: payload.token_id, success: false, error, metrics };
}

/** A task that waits in a step (a gate, an approval, a child run), with what it needs to continue. */
export function suspendedResult(
  payload: TaskPayload,
  end: Extract<LoopEnd, { end: "suspend" }>,
  metrics: Metrics,
): TaskResult {
  return {
    token_id: payload.token_id,
    success: false,
    suspended: { step_ref: end.stepRef, step_index: end.stepIndex, context: end.context, wait: end.wait },
    metrics,
  };
}

/**
 * The one place an executor failure becomes the result's error: its code,
 * the step it failed in, its message (with any details), whether a retry may
 * help, and the task context it failed with.
 */
export function toTaskError(
  error: EngineError,
  stepRef: string | null,
  context: TaskContext | null,
): NonNullable<TaskResult["error"]> {
  // A snapshot too large to travel and store is left out rather than failing the report.
  const snapshot = context !== null && JSON.stringify(context).length <= MAX_SNAPSHOT_CHARS ? context : null;
  return engineErrorToTaskError(error, stepRef, snapshot);
}
