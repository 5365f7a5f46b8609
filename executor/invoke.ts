import { EngineError, ensureEngineError, toCallError } from "../lib/errors.ts";
import { canonicalProblem } from "../lib/journal/canonical.ts";
import { scrubbedSecretValues, scrubSecrets } from "../lib/secrets.ts";
import { validateJson } from "../lib/json-schema.ts";
import { resolveRetryPolicy, retryDelayMs } from "../lib/retry.ts";
import { ACTION_TRAITS, type ActionKind } from "../schemas/actions.ts";
import type { Json, JsonObject } from "../schemas/common.ts";
import type { CallAttempt } from "../schemas/payload.ts";
import type { ResolvedAction } from "../schemas/resolved.ts";
import { ACTION_HANDLERS, type ActionContext, type ResolvedActionOf } from "./actions/index.ts";
import type { CallChain, FollowReason, LlmChainState } from "./actions/types.ts";
import { callLimitsOf, LimitNoRoom, limitPortOf, type CallPlace, type LimitDeps } from "./limits.ts";

/** An action call's bound when the action sets no `execution.timeout_ms`: 30 seconds. */
export const DEFAULT_ACTION_TIMEOUT_MS = 30_000;

/**
 * Time and waiting, injected so retries, action timeouts and a task's
 * deadline are testable without real sleeps.
 */
export interface Clock {
  now(): number;
  sleep(ms: number, signal: AbortSignal): Promise<void>;
  random(): number;
  /** A signal that aborts `ms` from now, as `AbortSignal.timeout` does. */
  timeout(ms: number): AbortSignal;
}

export const SYSTEM_CLOCK: Clock = {
  now: () => Date.now(),
  sleep: (ms, signal) =>
    new Promise((resolve, reject) => {
      const timer = setTimeout(resolve, ms);
      signal.addEventListener(
        "abort",
        () => {
          clearTimeout(timer);
          reject(signal.reason);
        },
        { once: true },
      );
    }),
  random: () => Math.random(),
  timeout: (ms) => AbortSignal.timeout(ms),
};

export interface InvokeOptions {
  context: Omit<ActionContext, "signal">;
  /** The step the call belongs to, for the holder ids of its limits (executor/limits.ts). */
  place: CallPlace;
  /** The task's own signal: aborted when the task attempt runs out of time. */
  taskSignal: AbortSignal;
  clock: Clock;
  /** Each call's record is appended here as it ends (the step's journal record). */
  attempts?: CallAttempt[];
}

/**
 * Checks an action's output against its `produces` (`action.invalid_output`
 * with each problem's path). A kind that reports `_meta` beside its answer
 * (`llm`, ACTION_TRAITS) is checked without it: `produces` describes the
 * answer, so the prompt's schema, `additionalProperties: false` included, can
 * be the action's too.
 */
export function checkProduces(action: Pick<ResolvedAction, "id" | "kind" | "produces">, output: Json): void {
  const answer = ACTION_TRAITS[action.kind].reportsMeta ? withoutMeta(output) : output;
  const problems = validateJson(action.produces, answer, "output");
  if (problems.length > 0) {
    throw EngineError.terminal(
      "action.invalid_output",
      `the output of action ${action.id} does not match its "produces" schema`,
      problems,
    );
  }
}

/** Checks an action's input against its `requires` (`action.invalid_input` with each problem's path). */
export function checkRequires(action: Pick<ResolvedAction, "id" | "requires">, input: Json): void {
  const problems = validateJson(action.requires, input, "input");
  if (problems.length > 0) {
    throw EngineError.terminal(
      "action.invalid_input",
      `the input of action ${action.id} does not match its "requires" schema`,
      problems,
    );
  }
}

function withoutMeta(output: Json): Json {
  if (output === null || typeof output !== "object" || Array.isArray(output) || !Object.hasOwn(output, "_meta")) {
    return output;
  }
  const { _meta: _reported, ...answer } = output;
  return answer;
}

/**
 * Runs one action and returns its output: checks its input against
 * `requires`, calls its handler with a timeout signal, retries infrastructure
 * failures (retryable errors) by `execution.retry_policy` with backoff and
 * `Retry-After`, and checks the output against `produces`; each call's record
 * goes to `options.attempts`. A handler may chain calls (an llm's fallback
 * models and repairs, `ActionContext.chain`): a call it asks to follow at once
 * is made with no wait (`retry_in_ms: 0`, `retry_reason` `fallback` or
 * `repair`) and does not count as an attempt of the retry policy. Each call of
 * an action or model that names `limits` holds them while it runs
 * (executor/limits.ts); one without room ends the step with a `limit` wait
 * ({@link LimitNoRoom} `suspends`), skips to the next fallback model, or fails
 * the call retryably. What comes back is scrubbed of secrets (an
 * output, an error message) before anything else sees it, and an output that
 * could not be signed into the journal fails the call at once.
 */
export async function invokeAction(action: ResolvedAction, input: Json, options: InvokeOptions): Promise<Json> {
  const secrets = scrubbedSecretValues(options.context.env);
  try {
    return await invokeChecked(action, input, options, secrets);
  } catch (thrown) {
    if (thrown instanceof LimitNoRoom && thrown.suspends) {
      // The step waits for the limit (executor/limits.ts): not a failure to rewrite.
      throw thrown;
    }
    throw scrubError(ensureEngineError(thrown, "action.failed"), secrets);
  }
}

async function invokeChecked(
  action: ResolvedAction,
  input: Json,
  options: InvokeOptions,
  secrets: readonly string[],
): Promise<Json> {
  checkRequires(action, input);
  const policy = resolveRetryPolicy(action.execution?.retry_policy);
  const limits = callLimitsOf(action, input, () => limitDepsOf(options));
  let carried: LlmChainState | undefined;
  // `attempt` numbers the calls; `tries` counts the retry policy's attempts (a call that
  // follows at once, a fallback or a repair, is part of the same try).
  for (let attempt = 1, tries = 1; ; attempt += 1) {
    const started = options.clock.now();
    const link = chainLink(carried);
    const notes = callNotes(secrets);
    try {
      const call = () => callOnce(action, input, options, { note: notes.note, chain: link.chain });
      const output = await (limits === null ? call() : limits.hold(attempt, carried?.model ?? 0, call, notes.tokens));
      const checked = scrubSecrets(signable(action, output), secrets);
      if (options.context.agent === undefined) {
        // An agent's turn may answer with tool calls, not an output: its loop checks the final answer.
        checkProduces(action, checked);
      }
      options.attempts?.push({ attempt, duration_ms: options.clock.now() - started, ...notes.noted() });
      return checked;
    } catch (thrown) {
      const error = scrubError(ensureEngineError(thrown, "action.failed"), secrets);
      const record: CallAttempt = {
        attempt,
        duration_ms: options.clock.now() - started,
        error: toCallError(error),
        ...notes.noted(),
      };
      options.attempts?.push(record);
      // A limit without room: the next model, the retry policy, or (thrown from here) the step waits.
      const next =
        limits !== null && thrown instanceof LimitNoRoom ? limits.afterRefusal(thrown, carried) : link.next();
      carried = next?.state;
      if (options.taskSignal.aborted) {
        throw error;
      }
      if (next?.now === "repair" || (next?.now === "fallback" && error.retryable)) {
        record.retry_in_ms = 0;
        record.retry_reason = next.now;
        continue;
      }
      if (!error.retryable || tries >= policy.maxAttempts) {
        throw error;
      }
      const delay = retryDelayMs(policy, tries, options.clock.random(), error.retryAfterMs);
      tries += 1;
      record.retry_in_ms = delay;
      record.retry_reason = error.retryAfterMs !== undefined && delay <= error.retryAfterMs ? "retry_after" : "backoff";
      await options.clock.sleep(delay, options.taskSignal);
    }
  }
}

/** What a call notes of itself (`ActionContext.note`): for its attempt's record, and its tokens for its limits. */
function callNotes(secrets: readonly string[]): {
  note(detail: JsonObject): void;
  noted(): { call?: JsonObject };
  tokens(): number;
} {
  let call: JsonObject | undefined;
  return {
    note: (detail) => {
      call = { ...call, ...detail };
    },
    noted: () => (call === undefined ? {} : { call: scrubSecrets(call, secrets) }),
    tokens: () => {
      const tokens = call?.tokens;
      if (tokens === null || typeof tokens !== "object" || Array.isArray(tokens)) {
        return 0;
      }
      const count = (value: Json | undefined) => (typeof value === "number" && value > 0 ? Math.round(value) : 0);
      return count(tokens.input) + count(tokens.output);
    },
  };
}

function limitDepsOf(options: InvokeOptions): LimitDeps {
  const { env, payload, limits } = options.context;
  return { port: limits ?? limitPortOf(env), payload, place: options.place, clock: options.clock, env };
}

/** One call's end of the chain: what the previous call left, and what this one leaves (the last `follow`). */
function chainLink(state: LlmChainState | undefined): {
  chain: CallChain;
  next(): { state: LlmChainState; now?: FollowReason } | undefined;
} {
  let planned: { state: LlmChainState; now?: FollowReason } | undefined;
  return {
    chain: {
      state,
      follow: (next, now) => {
        planned = now === undefined ? { state: next } : { state: next, now };
      },
    },
    next: () => planned,
  };
}

/**
 * An output that cannot be canonicalized (a lone surrogate a peer sent as
 * `"\\ud800"`, nesting past the limit) could never be journaled: the step
 * fails now, not retryable, rather than the task's result being lost later.
 */
function signable(action: ResolvedAction, output: Json): Json {
  const problem = canonicalProblem(output);
  if (problem !== null) {
    throw EngineError.terminal(
      "action.unsignable_output",
      `the output of action ${action.id} cannot be journaled: at ${clip(problem.path.replace(/^\$/, "output"))}, ${problem.message}`,
    );
  }
  return output;
}

function clip(text: string): string {
  return text.length > 200 ? `${text.slice(0, 200)}…` : text;
}

/** The error with every secret value taken out of its message and details. */
function scrubError(error: EngineError, secrets: readonly string[]): EngineError {
  const message = scrubSecrets(error.message, secrets);
  const details = scrubSecrets(error.details, secrets);
  if (message === error.message && details === error.details) {
    return error;
  }
  return new EngineError(error.code, message, {
    retryable: error.retryable,
    retryAfterMs: error.retryAfterMs,
    details,
    cause: error.cause,
    meta: error.meta,
    throttled: error.throttled,
  });
}

async function callOnce(
  action: ResolvedAction,
  input: Json,
  options: InvokeOptions,
  links: Pick<ActionContext, "note" | "chain">,
): Promise<Json> {
  if (!ACTION_TRAITS[action.kind].waitsOnIo) {
    // Pure computation (a `context` step) runs to its end in this turn: no timer could
    // interrupt it, and its work budget bounds it. The task's signal is all it needs.
    return runHandler(action.kind, action, input, {
      ...options.context,
      signal: options.taskSignal,
      ...links,
    });
  }
  const timeoutMs = action.execution?.timeout_ms ?? DEFAULT_ACTION_TIMEOUT_MS;
  const signal = AbortSignal.any([options.taskSignal, options.clock.timeout(timeoutMs)]);
  const context = { ...options.context, signal, ...links };
  try {
    return await raceAbort(runHandler(action.kind, action, input, context), signal);
  } catch (thrown) {
    if (signal.aborted && !(thrown instanceof EngineError)) {
      throw EngineError.retryable("action.timeout", `action ${action.id} did not finish within ${timeoutMs} ms`);
    }
    throw thrown;
  }
}

/** The registry's handler for `kind`: typed by the kind, so the action reaches it without a cast. */
function runHandler<K extends ActionKind>(
  kind: K,
  action: ResolvedActionOf<K>,
  input: Json,
  context: ActionContext,
): Promise<Json> {
  return ACTION_HANDLERS[kind].run(action, input, context);
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
