import {
  blobThreshold,
  blobWriter,
  MAX_RESOLVED_BLOB_BYTES,
  offloadMembers,
  offloadValue,
  resolveRefs,
  type BlobWriter,
} from "../blobs/offload.ts";
import { hasBlobRef } from "../blobs/ref.ts";
import { EngineError } from "../lib/errors.ts";
import type { Json } from "../schemas/common.ts";
import type { TaskContext, TaskPayload, TaskResult, TaskResume, TaskSuspension } from "../schemas/payload.ts";

/**
 * The executor's side of blobs (docs/architecture.md, "Blobs"): a payload's blob
 * references are resolved before its steps run (each blob read once, checked against
 * its digest), so that steps, mappings and templates see values; and a result's large
 * values are stored as blobs before it leaves, so that the coordinator never holds
 * them inline. A payload without references is not copied; a result within the
 * threshold is measured once (its JSON text) and left as it is.
 */

/** The payload with its input and its resume state as the values their references stand for. */
export async function resolvePayload(env: Env, payload: TaskPayload): Promise<TaskPayload> {
  const { resume } = payload;
  if (!hasBlobRef(payload.input) && (resume === undefined || !hasBlobRef(resume))) {
    return payload;
  }
  const shared = { budget: { left: MAX_RESOLVED_BLOB_BYTES }, cache: new Map<string, Json>() };
  const input = await resolveRefs(env, payload.input, shared.budget, shared.cache);
  const resumed =
    resume === undefined
      ? {}
      : { resume: (await resolveRefs(env, resume as Json, shared.budget, shared.cache)) as TaskResume };
  return { ...payload, input, ...resumed };
}

/** The result with its large values (output, a suspended context, a child's or an event's input, undo inputs) as blobs. */
export async function offloadResult(env: Env, payload: TaskPayload, result: TaskResult): Promise<TaskResult> {
  const threshold = blobThreshold(env);
  const write = blobWriter(env, { runId: payload.workflow_run_id, workflowId: payload.workflow_id });
  const offload = (value: Json) => offloadValue(value, threshold, write);
  const kept = result.output === undefined ? undefined : await offloadOutput(result.output, offload);
  const undoInputs = result.steps?.some((step) => step.undo !== undefined && "input" in step.undo) === true;
  if (kept === result.output && result.suspended === undefined && result.error === undefined && !undoInputs) {
    // A success within the threshold (the common case): measured once, answered as it is.
    return result;
  }
  const output = kept === undefined ? {} : { output: kept };
  const suspended =
    result.suspended === undefined ? {} : { suspended: await offloadSuspension(result.suspended, threshold, write) };
  const steps =
    result.steps === undefined || !undoInputs
      ? {}
      : {
          steps: await Promise.all(
            result.steps.map(async (step) =>
              step.undo === undefined || !("input" in step.undo)
                ? step
                : { ...step, undo: { ...step.undo, input: await offload(step.undo.input) } },
            ),
          ),
        };
  const error =
    result.error?.context_snapshot === undefined || result.error.context_snapshot === null
      ? {}
      : {
          error: {
            ...result.error,
            context_snapshot: await offloadContext(result.error.context_snapshot, threshold, write),
          },
        };
  return { ...result, ...output, ...suspended, ...steps, ...error };
}

/** A task's output offloaded; one over the largest value fails the task (`task.output_too_large`). */
async function offloadOutput(output: Json, offload: (value: Json) => Promise<Json>): Promise<Json> {
  try {
    return await offload(output);
  } catch (thrown) {
    if (thrown instanceof EngineError && thrown.code === "blob.too_large") {
      throw EngineError.terminal("task.output_too_large", `the task output is too large: ${thrown.message}`);
    }
    throw thrown;
  }
}

async function offloadContext(context: TaskContext, threshold: number, write: BlobWriter): Promise<TaskContext> {
  return {
    input: await offloadValue(context.input, threshold, write),
    state: await offloadMembers(context.state, threshold, write),
    output: await offloadMembers(context.output, threshold, write),
  };
}

async function offloadSuspension(
  suspended: TaskSuspension,
  threshold: number,
  write: BlobWriter,
): Promise<TaskSuspension> {
  const context = await offloadContext(suspended.context, threshold, write);
  const { wait } = suspended;
  if (wait.kind === "child" || wait.kind === "event") {
    return { ...suspended, context, wait: { ...wait, input: await offloadValue(wait.input, threshold, write) } };
  }
  return { ...suspended, context };
}
