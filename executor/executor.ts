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
  /**
   * Runs a group of tasks concurrently in this one invocation and streams
   * each result back as a line of JSON the moment it is ready. One call per
   * group keeps a wide fan-out far under the platform's cap on invocations
   * per Durable Object event, and costs one RPC round trip, not one per task.
   */
  runTasks(payloads: unknown[]): ReadableStream<Uint8Array> {
    const encoder = new TextEncoder();
    const list = Array.isArray(payloads) ? payloads : [];
    return new ReadableStream<Uint8Array>({
      start: async (controller) => {
        // Results finishing together leave as one chunk: each chunk costs a
        // trip across RPC, so a burst of 25 results should not cost 25 trips.
        let pending: string[] = [];
        let flushing: Promise<void> | null = null;
        const flush = () => {
          flushing ??= Promise.resolve().then(() => {
            controller.enqueue(encoder.encode(pending.join("")));
            pending = [];
            flushing = null;
          });
          return flushing;
        };
        await Promise.all(
          list.map(async (payload) => {
            const result = await this.runTask(payload);
            pending.push(`${JSON.stringify(result)}\n`);
            await flush();
          }),
        );
        controller.close();
      },
    });
  }

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
