import { z } from "zod";

/**
 * The one failure vocabulary. Every failure the engine reports has one shape,
 * {@link ErrorInfo}: a dotted `code` (`http.status`, `task.timeout`,
 * `run.not_found`) that callers branch on, a human `message`, whether trying
 * again may help (`retryable`, with the delay a server asked for), and where
 * it happened (`node`, `step`). Each boundary keeps the fields it needs, picked
 * from that shape, and converts with the one pair of functions below (and
 * `lib/errors.ts` between thrown errors and data):
 *
 * - executor → task result: `EngineError` → {@link TaskError} (`toTaskError`, lib/errors.ts);
 * - executor → step record: `EngineError` → a call's or a step's error (`toCallError`, lib/errors.ts);
 * - task result → run record: {@link TaskError} → {@link Failure} (`attemptErrorOf` in payload.ts, then `toFailure`);
 * - run record → API: {@link Failure} as the run view shows it (`toFailureView`);
 * - any call → RPC / HTTP: `EngineError` ⇄ {@link ErrorData} (`toData` / `fromData`, lib/errors.ts).
 */

/** One problem in a rejected input: where (`path`, dotted from the body's root) and what. */
export const ErrorDetail = z.strictObject({ path: z.string(), message: z.string(), code: z.string().optional() });
export type ErrorDetail = z.infer<typeof ErrorDetail>;

/** The one error shape; every other is a pick of it. */
export const ErrorInfo = z.strictObject({
  /** A dotted name, e.g. `http.status`, `step.timeout`, `action.invalid_input`. */
  code: z.string(),
  message: z.string(),
  /** Whether trying again may help (infrastructure, a timeout, a rate limit). */
  retryable: z.boolean(),
  /** The least delay before a retry that the failing service asked for. */
  retry_after_ms: z.number().int().min(0).optional(),
  /** The node it failed in. */
  node: z.string().optional(),
  /** The ref of the step it failed in. */
  step: z.string().optional(),
  /** The problems of a rejected input, one per place. */
  details: z.array(ErrorDetail).optional(),
});
export type ErrorInfo = z.infer<typeof ErrorInfo>;

/** What a failure says in a few words: a child run's error to its parent, a step's error to the task. */
export const ErrorSummary = ErrorInfo.pick({ code: true, message: true });
export type ErrorSummary = z.infer<typeof ErrorSummary>;

/** An error as data: what crosses RPC, and what the HTTP layer maps to a status. */
export const ErrorData = ErrorInfo.pick({
  code: true,
  message: true,
  retryable: true,
  retry_after_ms: true,
  details: true,
});
export type ErrorData = z.infer<typeof ErrorData>;

/**
 * A failure as stored on a run, a node or an invocation, and as journaled and
 * shown. `retryable` is absent where the failure was not an attempt's (a node
 * that could not start, an output that could not be written) and on runs
 * stored before it was recorded.
 */
export const Failure = ErrorInfo.pick({ code: true, message: true, node: true, step: true }).extend({
  retryable: z.boolean().optional(),
});
export type Failure = z.infer<typeof Failure>;

/** The failure of an attempt, as the coordinator takes it from a task result (or a deadline). */
export const AttemptError = ErrorInfo.pick({
  code: true,
  message: true,
  retryable: true,
  retry_after_ms: true,
  step: true,
});
export type AttemptError = z.infer<typeof AttemptError>;

/** Task result → run record: an attempt's failure, recorded on the node it failed in. */
export function toFailure(error: Omit<Failure, "node">, node: string): Failure {
  return {
    code: error.code,
    message: error.message,
    node,
    ...(error.retryable === undefined ? {} : { retryable: error.retryable }),
    ...(error.step === undefined ? {} : { step: error.step }),
  };
}

/** What a failure says in a few words: its code and message, nothing of where. */
export function toErrorSummary(error: ErrorSummary): ErrorSummary {
  return { code: error.code, message: error.message };
}

/** Run record → API: the failure as the run view shows it (the stored fields, in a copy the view owns). */
export function toFailureView(failure: Failure): Failure {
  return { ...toErrorSummary(failure), ...failure };
}
