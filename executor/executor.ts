import { WorkerEntrypoint } from "cloudflare:workers";
import { ensureEngineError } from "../lib/errors.ts";
import { issuesToDetails, summarize } from "../lib/validation.ts";
import { TaskPayload, type TaskResult } from "../schemas/index.ts";
import { SYSTEM_CLOCK } from "./invoke.ts";
import { runTask } from "./run-task.ts";

/**
 * The stateless executor: `TaskPayload → TaskResult` over RPC. It keeps
 * nothing between calls; everything a task needs travels in its payload.
 */
export class Executor extends WorkerEntrypoint<Env> {
  async runTask(payload: unknown): Promise<TaskResult> {
    const parsed = TaskPayload.safeParse(payload);
    if (!parsed.success) {
      const details = issuesToDetails(parsed.error.issues);
      return failure(tokenOf(payload), "executor.invalid_payload", `the task payload is invalid: ${summarize(details)}`);
    }
    try {
      return await runTask(parsed.data, {
        context: { env: this.env, fetch: (input, init) => fetch(input, init) },
        clock: SYSTEM_CLOCK,
      });
    } catch (thrown) {
      // runTask returns its failures; reaching here is a bug, reported as data all the same.
      return failure(parsed.data.token_id, "executor.internal", ensureEngineError(thrown).message);
    }
  }
}

function tokenOf(payload: unknown): string {
  const token = typeof payload === "object" && payload !== null ? (payload as Record<string, unknown>).token_id : undefined;
  return typeof token === "string" && token.length > 0 ? token : "unknown";
}

function failure(token: string, type: string, message: string): TaskResult {
  return {
    token_id: token,
    success: false,
    error: { type, step_ref: null, message, retryable: false, context_snapshot: null },
    metrics: { duration_ms: 0, steps_executed: 0, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
  };
}
