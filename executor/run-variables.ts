import { idempotencyKey, type StepRunVariables, withRunVariables } from "../lib/expr/run-scope.ts";
import type { TaskPayload } from "../schemas/payload.ts";

/**
 * The `run` variable of each step of the task, by step index (lib/expr/run-scope.ts).
 * Everything in it comes from the payload, so an attempt, a retry and a re-dispatch
 * after a lost call see the same values but `attempt`.
 */
export function stepRunVariables(payload: TaskPayload): StepRunVariables[] {
  const base = {
    id: payload.workflow_run_id,
    workflow: { id: payload.workflow_id, version: payload.workflow_version },
    node: payload.node_id,
    item: payload.item_index,
    iteration: payload.iteration,
    attempt: payload.retry_attempt + 1,
  };
  return payload.task.steps.map((step) => ({
    ...base,
    step: step.ref,
    idempotency_key: idempotencyKey({ ...base, task: payload.task_id, step: step.ref }),
  }));
}

/** Runs `work` with `run` bound to a step's variables (every step has them; a missing one binds nothing). */
export function inRunScope<T>(run: StepRunVariables | undefined, work: () => T): T {
  return run === undefined ? work() : withRunVariables(run, work);
}
