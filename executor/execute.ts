import type { WorkBudget } from "../lib/expr/work-budget.ts";
import { EngineError, ensureEngineError, toTaskError } from "../lib/errors.ts";
import type { TaskPayload, TaskResult } from "../schemas/payload.ts";
import { offloadResult, resolvePayload } from "./blobs.ts";
import { SYSTEM_CLOCK } from "./invoke.ts";
import { runTask } from "./run-task.ts";

/**
 * One task, start to result: its blob references read, its steps run, its
 * large values stored as blobs. The executor runs every task this way, and a
 * coordinator runs a pure task (coordinator/pure-tasks.ts) the same way, so
 * the two give the same result for the same payload. Never throws.
 */
export async function executeTask(env: Env, payload: TaskPayload, workBudget?: WorkBudget): Promise<TaskResult> {
  let resolved: TaskPayload;
  try {
    // Steps see values: the payload's blob references are read (and checked) first (executor/blobs.ts).
    resolved = await resolvePayload(env, payload);
  } catch (thrown) {
    return blobFailure(payload.token_id, thrown);
  }
  let result: TaskResult;
  try {
    result = await runTask(resolved, {
      context: { env, fetch: (input, init) => fetch(input, init) },
      clock: SYSTEM_CLOCK,
      ...(workBudget === undefined ? {} : { workBudget }),
    });
  } catch (thrown) {
    // runTask returns its failures; reaching here is a bug, reported as data all the same.
    return taskFailure(payload.token_id, "executor.internal", ensureEngineError(thrown).message);
  }
  try {
    // Large values leave as blobs: the coordinator keeps references, never the bytes.
    return await offloadResult(env, payload, result);
  } catch (thrown) {
    return blobFailure(payload.token_id, thrown);
  }
}

/** A blob that could not be read or written: as it says, or a retryable `blob.unavailable` when R2 failed. */
function blobFailure(token: string, thrown: unknown): TaskResult {
  const error =
    thrown instanceof EngineError
      ? thrown
      : EngineError.retryable("blob.unavailable", `the blob store failed: ${ensureEngineError(thrown).message}`);
  return taskFailure(token, error.code, error.message, error.retryable);
}

/**
 * A failure the executor answers itself. Like every result it sends, it can be signed into the
 * journal as it is (its text well-formed; run-task.ts `finalizeResult` checks the others), so the
 * coordinator applies results without checking them again.
 */
export function taskFailure(token: string, type: string, message: string, retryable = false): TaskResult {
  return {
    token_id: token.toWellFormed(),
    success: false,
    error: toTaskError(new EngineError(type, message.toWellFormed(), { retryable }), null, null),
    metrics: { duration_ms: 0, steps_executed: 0, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
  };
}
