import type { AttemptError, ErrorData, ErrorDetail } from "../schemas/errors.ts";
import type { TaskContext, TaskError } from "../schemas/payload.ts";

/**
 * The one error type of the engine. `code` is a dotted name (`run.not_found`,
 * `step.timeout`, `action.invalid_input`) that the HTTP layer maps to a status
 * and that callers branch on; `retryable` says whether trying again may help.
 *
 * Errors never cross RPC as thrown objects (only `message` and `name` survive
 * a call): they travel as {@link ErrorData} and are rebuilt with
 * {@link EngineError.fromData}.
 */
export class EngineError extends Error {
  override readonly name = "EngineError";
  readonly code: string;
  readonly retryable: boolean;
  readonly retryAfterMs: number | undefined;
  readonly details: readonly ErrorDetail[] | undefined;
  /**
   * What the failed call consumed, in the shape an action's `_meta` reports it
   * (`{ tokens: { input, output }, cost_usd }`): a model that answered, but not
   * what was asked, was still paid for. Stays in the executor (not in `toData`).
   */
  readonly meta: Record<string, unknown> | undefined;
  /**
   * The peer answered 429: it is overloaded for every caller, not only this
   * call (`retryAfterMs` is its `Retry-After`, when it sent one). A limit the
   * call held pauses its grants that long (executor/limits.ts). Stays in the
   * executor (not in `toData`).
   */
  readonly throttled: boolean;

  constructor(
    code: string,
    message: string,
    options: {
      retryable?: boolean;
      retryAfterMs?: number;
      details?: readonly ErrorDetail[];
      cause?: unknown;
      meta?: Record<string, unknown>;
      throttled?: boolean;
    } = {},
  ) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.code = code;
    this.retryable = options.retryable ?? false;
    this.retryAfterMs = options.retryAfterMs;
    this.details = options.details;
    this.meta = options.meta;
    this.throttled = options.throttled ?? false;
  }

  /** The same error, carrying what the failed call consumed. */
  withMeta(meta: Record<string, unknown>): EngineError {
    return new EngineError(this.code, this.message, {
      retryable: this.retryable,
      retryAfterMs: this.retryAfterMs,
      details: this.details,
      cause: this.cause,
      meta,
      throttled: this.throttled,
    });
  }

  /** A failure that will happen again however often it is tried. */
  static terminal(code: string, message: string, details?: readonly ErrorDetail[]): EngineError {
    return new EngineError(code, message, { retryable: false, details });
  }

  /** A failure of infrastructure (network, timeout, rate limit, 5xx) that may pass. */
  static retryable(code: string, message: string, retryAfterMs?: number): EngineError {
    return new EngineError(code, message, { retryable: true, retryAfterMs });
  }

  /** A peer answered 429 (`throttled`): retryable, after its `Retry-After` when it sent one. */
  static throttled(code: string, message: string, retryAfterMs?: number): EngineError {
    return new EngineError(code, message, { retryable: true, retryAfterMs, throttled: true });
  }

  toData(): ErrorData {
    return {
      code: this.code,
      message: this.message,
      retryable: this.retryable,
      ...(this.retryAfterMs === undefined ? {} : { retry_after_ms: this.retryAfterMs }),
      ...(this.details === undefined ? {} : { details: [...this.details] }),
    };
  }

  static fromData(data: ErrorData): EngineError {
    return new EngineError(data.code, data.message, {
      retryable: data.retryable,
      retryAfterMs: data.retry_after_ms,
      details: data.details,
    });
  }
}

export type { ErrorData, ErrorDetail } from "../schemas/errors.ts";

/**
 * Executor → task result: the error a failed step reports, as its task result
 * carries it. A rejected input's details go into the message (the coordinator
 * records code and message); `contextSnapshot` is what the caller chose to keep
 * of the task context.
 */
export function toTaskError(error: EngineError, step: string | null, contextSnapshot: TaskContext | null): TaskError {
  const details = error.details?.length
    ? ` (${error.details.map((detail) => `${detail.path}: ${detail.message}`).join("; ")})`
    : "";
  return {
    code: error.code,
    message: `${error.message}${details}`,
    retryable: error.retryable,
    ...(error.retryAfterMs === undefined ? {} : { retry_after_ms: error.retryAfterMs }),
    ...(step === null ? {} : { step }),
    context_snapshot: contextSnapshot,
  };
}

/**
 * Executor → step record: a failed call's error (each attempt's) or a failed step's, as the
 * step's record in the journal carries it: code, message, whether a retry may help.
 */
export function toCallError(error: EngineError): Omit<AttemptError, "step"> {
  return {
    code: error.code,
    message: error.message,
    retryable: error.retryable,
    ...(error.retryAfterMs === undefined ? {} : { retry_after_ms: error.retryAfterMs }),
  };
}

/** Normalises anything thrown into an {@link EngineError}; unknown throws become `internal.error`. */
export function ensureEngineError(thrown: unknown, fallbackCode = "internal.error"): EngineError {
  if (thrown instanceof EngineError) {
    return thrown;
  }
  if (thrown instanceof Error) {
    return new EngineError(fallbackCode, thrown.message, { cause: thrown });
  }
  return new EngineError(fallbackCode, String(thrown));
}
