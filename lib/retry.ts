import { RETRY_DEFAULTS, type RetryPolicy } from "../schemas/common.ts";

/** The longest `Retry-After` honoured: 10 minutes. */
export const MAX_RETRY_AFTER_MS = 600_000;

/** A retry policy with its defaults applied. */
export interface ResolvedRetryPolicy {
  maxAttempts: number;
  initialDelayMs: number;
  backoffCoefficient: number;
  maxDelayMs: number;
  jitter: boolean;
}

export function resolveRetryPolicy(policy: RetryPolicy | undefined): ResolvedRetryPolicy {
  const initialDelayMs = policy?.initial_delay_ms ?? RETRY_DEFAULTS.initial_delay_ms;
  return {
    maxAttempts: policy?.max_attempts ?? RETRY_DEFAULTS.max_attempts,
    initialDelayMs,
    backoffCoefficient: policy?.backoff_coefficient ?? RETRY_DEFAULTS.backoff_coefficient,
    maxDelayMs: policy?.max_delay_ms ?? Math.max(initialDelayMs, RETRY_DEFAULTS.max_delay_ms),
    jitter: policy?.jitter ?? RETRY_DEFAULTS.jitter,
  };
}

/**
 * The wait before the retry that follows attempt `attempt` (1-based):
 * `initial × coefficient^(attempt-1)`, capped at `max`. With jitter the wait
 * is drawn uniformly from [wait/2, wait] ("equal jitter"), so retries of many
 * failed calls spread out but never come sooner than half the backoff.
 * A server's `Retry-After` (`retryAfterMs`) is honoured as a floor, above
 * `max` too (retrying sooner would only be refused again), up to
 * {@link MAX_RETRY_AFTER_MS}.
 * `random` is a number in [0, 1), injected so tests are exact.
 */
export function retryDelayMs(
  policy: ResolvedRetryPolicy,
  attempt: number,
  random: number,
  retryAfterMs?: number,
): number {
  const exponential = policy.initialDelayMs * policy.backoffCoefficient ** Math.max(0, attempt - 1);
  const capped = Math.min(exponential, policy.maxDelayMs);
  const jittered = policy.jitter ? capped / 2 + (capped / 2) * random : capped;
  const floor = retryAfterMs === undefined ? 0 : Math.min(retryAfterMs, MAX_RETRY_AFTER_MS);
  return Math.round(Math.max(jittered, floor));
}

/** `Retry-After` as milliseconds: delta-seconds or an HTTP date. */
export function retryAfterMs(header: string | null, now = Date.now()): number | undefined {
  if (header === null) {
    return undefined;
  }
  const seconds = Number(header.trim());
  if (Number.isFinite(seconds) && seconds >= 0) {
    return Math.round(seconds * 1000);
  }
  const date = Date.parse(header);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}
