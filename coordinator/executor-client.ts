import { EngineError, ensureEngineError, toTaskError } from "../lib/errors.ts";
import { ACTION_TRAITS } from "../schemas/actions.ts";
import { TaskResult, toTaskGroup, type TaskPayload } from "../schemas/payload.ts";
import { fastTaskResult } from "../schemas/payload-fast.ts";
import type { LiveSet } from "./live.ts";

/**
 * Sends a group of tasks to the executor in one call, marked live while they
 * run, and hands each result to `apply` (an event of its own) as it streams
 * back. The call is not awaited by the event that made it: a pending
 * service-binding call keeps the Durable Object alive (compatibility date ≥
 * 2026-10-01). A result that cannot be applied is logged; its dispatch is then
 * not live, and the next wake finds it lost and sends it again.
 */
export function dispatchGroup(
  executor: ExecutorBinding,
  live: LiveSet,
  payloads: readonly TaskPayload[],
  apply: (result: TaskResult) => Promise<void>,
): Promise<void> {
  for (const payload of payloads) {
    live.tokens.add(payload.token_id);
  }
  return sendTaskGroup(executor, payloads, (result) => {
    live.tokens.delete(result.token_id);
    return apply(result).catch((thrown: unknown) => {
      const error = ensureEngineError(thrown).message;
      console.error(JSON.stringify({ msg: "applying a task result failed", token: result.token_id, error }));
    });
  });
}

/**
 * The coordinator's side of the executor call: a group of tasks goes out in
 * one call, and their results stream back as newline-delimited JSON, each
 * delivered the moment it arrives. A task whose result never comes (the
 * stream broke, the executor crashed) is delivered as a retryable
 * `executor.unavailable` failure, so nothing is lost.
 */
export async function sendTaskGroup(
  executor: ExecutorBinding,
  payloads: readonly TaskPayload[],
  deliver: (result: TaskResult) => Promise<void>,
): Promise<void> {
  const waiting = new Set(payloads.map((payload) => payload.token_id));
  const delivered: Promise<void>[] = [];
  let failure: unknown = new Error("the executor closed the stream before every result");
  const receive = (answer: unknown) => {
    // Most results take the exact fast path; the rest are parsed with the schema.
    const fast = fastTaskResult(answer);
    const parsed = fast === null ? TaskResult.safeParse(answer) : { success: true as const, data: fast };
    if (parsed.success && waiting.delete(parsed.data.token_id)) {
      delivered.push(deliver(parsed.data));
    }
  };
  try {
    if (payloads.length === 1 || !payloads.some(waitsOnIo)) {
      // One task (a chain's next node), or pure computation that ends as it starts: nothing to
      // stream, and a plain call costs less than setting up a stream.
      (await executor.runTaskList(toTaskGroup(payloads))).forEach(receive);
    } else {
      for await (const line of ndjsonLines(await executor.runTasks(toTaskGroup(payloads)))) {
        receive(JSON.parse(line));
      }
    }
  } catch (thrown) {
    failure = thrown;
  }
  for (const token of waiting) {
    delivered.push(deliver(executorFailure(token, failure)));
  }
  await Promise.all(delivered);
}

/**
 * Whether a task may wait on something outside the executor (a step whose
 * kind's `waitsOnIo` trait is set: all but a pure `context` computation).
 */
export function waitsOnIo(payload: TaskPayload): boolean {
  return payload.task.steps.some((step) => ACTION_TRAITS[step.action.kind].waitsOnIo);
}

export function chunk<T>(items: readonly T[], size: number): T[][] {
  const groups: T[][] = [];
  for (let start = 0; start < items.length; start += size) {
    groups.push(items.slice(start, start + size));
  }
  return groups;
}

/** The lines of a stream of newline-delimited JSON. */
async function* ndjsonLines(stream: ReadableStream<Uint8Array>): AsyncGenerator<string> {
  const decoder = new TextDecoder();
  let buffered = "";
  for await (const bytes of stream) {
    buffered += decoder.decode(bytes, { stream: true });
    let newline = buffered.indexOf("\n");
    while (newline >= 0) {
      const line = buffered.slice(0, newline);
      buffered = buffered.slice(newline + 1);
      if (line.trim() !== "") {
        yield line;
      }
      newline = buffered.indexOf("\n");
    }
  }
  if (buffered.trim() !== "") {
    yield buffered;
  }
}

/** The executor could not be reached or crashed: a retryable infrastructure failure. */
export function executorFailure(token: string, thrown: unknown): TaskResult {
  // Well-formed text, as the journal needs: every result is signed as it comes (executor/executor.ts).
  const message = (thrown instanceof Error ? thrown.message : String(thrown)).toWellFormed();
  return {
    token_id: token,
    success: false,
    error: toTaskError(
      EngineError.retryable("executor.unavailable", `the executor call failed: ${message}`),
      null,
      null,
    ),
    metrics: { duration_ms: 0, steps_executed: 0, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
  };
}
