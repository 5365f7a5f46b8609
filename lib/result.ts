import { EngineError, ensureEngineError, type ErrorData } from "./errors.ts";

/**
 * What crosses RPC between our own components: a value or an error as data.
 * Thrown errors lose their `code` and `retryable` across RPC, so methods that
 * other components call return a Result instead of throwing.
 */
export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorData };

/** Runs `fn`, turning anything it throws into an error Result. */
export async function toResult<T>(fn: () => T | Promise<T>): Promise<Result<T>> {
  try {
    return { ok: true, value: await fn() };
  } catch (thrown) {
    return { ok: false, error: ensureEngineError(thrown).toData() };
  }
}

/** The value, or the error rebuilt as an {@link EngineError} and thrown. */
export function unwrap<T>(result: Result<T>): T {
  if (result.ok) {
    return result.value;
  }
  throw EngineError.fromData(result.error);
}
