import { WorkerEntrypoint } from "cloudflare:workers";
import { summarize } from "../lib/validation.ts";
import { fromTaskGroup, type TaskResult } from "../schemas/payload.ts";
import { checkTaskGroup } from "./task-check.ts";
import { executeTask, taskFailure } from "./execute.ts";

/**
 * The stateless executor: `TaskPayload → TaskResult` over RPC. It keeps
 * nothing between calls; everything a task needs travels in its payload.
 */
export class Executor extends WorkerEntrypoint<Env> {
  /**
   * Runs a group of tasks (a {@link TaskGroup}) concurrently in this one
   * invocation and streams each result back as a line of JSON the moment it
   * is ready. One call per group keeps a wide fan-out far under the
   * platform's cap on invocations per Durable Object event, and costs one RPC
   * round trip, not one per task. A group that fails its schema answers every
   * payload it names with `executor.invalid_payload`.
   */
  runTasks(group: unknown): ReadableStream<Uint8Array> {
    const encoder = new TextEncoder();
    return new ReadableStream<Uint8Array>({
      start: async (controller) => {
        // Results finishing together leave as one chunk: each chunk costs a
        // trip across RPC, so a burst of results should not cost a trip each.
        let pending: string[] = [];
        let flushing: Promise<void> | null = null;
        await this.runGroup(group, (result) => {
          pending.push(`${JSON.stringify(result)}\n`);
          flushing ??= Promise.resolve().then(() => {
            controller.enqueue(encoder.encode(pending.join("")));
            pending = [];
            flushing = null;
          });
          return flushing;
        });
        controller.close();
      },
    });
  }

  /**
   * Runs a group of tasks and answers every result at once: a group of one (a
   * chain's next node), or tasks that wait on nothing (only `context` steps:
   * pure computation, over as soon as it starts). Streaming them would send one
   * chunk all the same, after setting up a stream across RPC and a line of JSON
   * per result.
   */
  async runTaskList(group: unknown): Promise<TaskResult[]> {
    const results: TaskResult[] = [];
    await this.runGroup(group, (result) => {
      results.push(result);
    });
    return results;
  }

  /** Runs a group's tasks concurrently, handing each result to `send` as it is ready. */
  private async runGroup(group: unknown, send: (result: TaskResult) => Promise<void> | void): Promise<void> {
    const parsed = checkTaskGroup(group);
    if ("details" in parsed) {
      const { details } = parsed;
      for (const token of tokensOf(group)) {
        await send(taskFailure(token, "executor.invalid_payload", `the task group is invalid: ${summarize(details)}`));
      }
      return;
    }
    await Promise.all(
      fromTaskGroup(parsed.group).map(async (payload) =>
        send(
          "missing" in payload
            ? taskFailure(payload.missing, "executor.invalid_payload", "the task group names a task it does not carry")
            : await executeTask(this.env, payload),
        ),
      ),
    );
  }
}

/** The tokens a malformed group names, so each can be answered. */
function tokensOf(group: unknown): string[] {
  const payloads: unknown =
    typeof group === "object" && group !== null ? (group as Record<string, unknown>).payloads : undefined;
  return Array.isArray(payloads) ? payloads.map(tokenOf) : [];
}

function tokenOf(payload: unknown): string {
  const token =
    typeof payload === "object" && payload !== null ? (payload as Record<string, unknown>).token_id : undefined;
  return typeof token === "string" && token.length > 0 ? token : "unknown";
}
