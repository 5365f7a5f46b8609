import { EngineError, ensureEngineError } from "../lib/errors.ts";
import type { Json } from "../lib/expr/mapping.ts";
import { validateJson } from "../lib/json-schema.ts";
import { resolveRetryPolicy, retryDelayMs } from "../lib/retry.ts";
import type { ResolvedAction } from "../schemas/index.ts";
import { ACTION_HANDLERS, type ActionContext, type ActionHandler } from "./actions/index.ts";

/** An action call's bound when the action sets no `execution.timeout_ms`: 30 seconds. */
export const DEFAULT_ACTION_TIMEOUT_MS = 30_000;

/** Time and waiting, injected so retries are testable without real sleeps. */
export interface Clock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
}

export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener("abort", () => {
        clearTimeout(timer);
        reject(signal.reason);
      }, { once: true });
    }),
  random: () => Math.random(),
};

export interface InvokeOptions {
  context: Omit<ActionContext, "signal">;
  /** The task's own signal: aborted when the task attempt runs out of time. */
  taskSignal: AbortSignal;
  clock: Clock;
}

/** What one action call did: its output, and how many attempts it took. */
export interface Invocation {
  output: Json;
  attempts: number;
}

/**
 * Runs one action: checks its input against `requires`, calls its handler
 * with a timeout signal, retries infrastructure failures (retryable errors)
 * by `execution.retry_policy` with backoff and `Retry-After`, and checks the
 * output against `produces`.
 */
export async function invokeAction(action: ResolvedAction, input: Json, options: InvokeOptions): Promise<Invocation> {
  const problems = validateJson(action.requires, input, "input");
  if (problems.length > 0) {
    throw EngineError.terminal("action.invalid_input", `the input of action ${action.id} does not match its "requires" schema`, problems);
  }
  const policy = resolveRetryPolicy(action.execution?.retry_policy);
  for (let attempt = 1; ; attempt += 1) {
    try {
      const output = await callOnce(action, input, options);
      const outputProblems = validateJson(action.produces, output, "output");
      if (outputProblems.length > 0) {
        throw EngineError.terminal("action.invalid_output", `the output of action ${action.id} does not match its "produces" schema`, outputProblems);
      }
      return { output, attempts: attempt };
    } catch (thrown) {
      const error = ensureEngineError(thrown, "action.failed");
      if (!error.retryable || attempt >= policy.maxAttempts || options.taskSignal.aborted) {
        throw error;
      }
      await options.clock.sleep(retryDelayMs(policy, attempt, options.clock.random(), error.retryAfterMs), options.taskSignal);
    }
  }
}

async function callOnce(action: ResolvedAction, input: Json, options: InvokeOptions): Promise<Json> {
  const timeoutMs = action.execution?.timeout_ms ?? DEFAULT_ACTION_TIMEOUT_MS;
  const signal = AbortSignal.any([options.taskSignal, AbortSignal.timeout(timeoutMs)]);
  const handler = ACTION_HANDLERS[action.kind] as ActionHandler<typeof action.kind>;
  try {
    return await raceAbort(handler.run(action as never, input, { ...options.context, signal }), signal);
  } catch (thrown) {
    if (signal.aborted && !(thrown instanceof EngineError)) {
      throw EngineError.retryable("action.timeout", `action ${action.id} did not finish within ${timeoutMs} ms`);
    }
    throw thrown;
  }
}

/** Handlers should honour the signal; this makes sure a handler that does not still ends on time. */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  if (signal.aborted) {
    return Promise.reject(signal.reason);
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason);
    signal.addEventListener("abort", onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener("abort", onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener("abort", onAbort);
        reject(error);
      },
    );
  });
}
