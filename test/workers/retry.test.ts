import { describe, it } from "vitest";
import { MAX_RETRY_AFTER_MS, resolveRetryPolicy, retryDelayMs, type ResolvedRetryPolicy } from "../../lib/retry.ts";
import { RETRY_DEFAULTS, RetryPolicy } from "../../schemas/index.ts";

function makePolicy(overrides: Partial<ResolvedRetryPolicy> = {}): ResolvedRetryPolicy {
  return {
    maxAttempts: 10,
    initialDelayMs: 1000,
    backoffCoefficient: 2,
    maxDelayMs: 5000,
    jitter: false,
    ...overrides,
  };
}

describe("retryDelayMs", () => {
  it.for([
    { attempt: 1, delay: 1000 },
    { attempt: 2, delay: 2000 },
    { attempt: 3, delay: 4000 },
    { attempt: 4, delay: 5000 },
    { attempt: 30, delay: 5000 },
  ])("without jitter waits $delay ms after attempt $attempt", ({ attempt, delay }, { expect }) => {
    expect(retryDelayMs(makePolicy(), attempt, 0.5)).toBe(delay);
  });

  it("a coefficient of 1 keeps the delay constant", ({ expect }) => {
    const policy = makePolicy({ backoffCoefficient: 1 });
    expect([1, 2, 3].map((attempt) => retryDelayMs(policy, attempt, 0))).toEqual([1000, 1000, 1000]);
  });

  it.for([
    { attempt: 1, random: 0, delay: 500 },
    { attempt: 1, random: 0.999, delay: 1000 },
    { attempt: 3, random: 0, delay: 2000 },
    { attempt: 3, random: 0.999, delay: 3998 },
    { attempt: 9, random: 0, delay: 2500 },
    { attempt: 9, random: 0.999, delay: 4998 },
  ])("with jitter and random $random, attempt $attempt waits $delay ms", ({ attempt, random, delay }, { expect }) => {
    expect(retryDelayMs(makePolicy({ jitter: true }), attempt, random)).toBe(delay);
  });

  it("with jitter every delay lies in [d/2, d] of the unjittered delay d", ({ expect }) => {
    const jittered = makePolicy({ jitter: true });
    for (const attempt of [1, 2, 3, 4, 5]) {
      const d = retryDelayMs(makePolicy(), attempt, 0);
      for (const random of [0, 0.25, 0.5, 0.75, 0.999]) {
        const delay = retryDelayMs(jittered, attempt, random);
        expect(delay).toBeGreaterThanOrEqual(d / 2);
        expect(delay).toBeLessThanOrEqual(d);
      }
    }
  });

  it.for([
    { name: "a Retry-After above the backoff", retryAfter: 3000, attempt: 1, delay: 3000 },
    { name: "a Retry-After below the backoff", retryAfter: 200, attempt: 2, delay: 2000 },
    { name: "a Retry-After above max_delay_ms", retryAfter: 20_000, attempt: 1, delay: 20_000 },
    { name: "a Retry-After of ten hours", retryAfter: 36_000_000, attempt: 1, delay: MAX_RETRY_AFTER_MS },
  ])("$name is a floor: $delay ms", ({ retryAfter, attempt, delay }, { expect }) => {
    expect(retryDelayMs(makePolicy(), attempt, 0, retryAfter)).toBe(delay);
  });

  it("a Retry-After is a floor under jitter too", ({ expect }) => {
    expect(retryDelayMs(makePolicy({ jitter: true }), 1, 0, 800)).toBe(800);
  });

  it("caps Retry-After at ten minutes", ({ expect }) => {
    expect(MAX_RETRY_AFTER_MS).toBe(600_000);
  });
});

describe("resolveRetryPolicy", () => {
  it("no policy means one attempt and the documented defaults", ({ expect }) => {
    expect(resolveRetryPolicy(undefined)).toEqual({
      maxAttempts: 1,
      initialDelayMs: 500,
      backoffCoefficient: 2,
      maxDelayMs: 60_000,
      jitter: true,
    });
    expect(RETRY_DEFAULTS).toEqual({
      max_attempts: 1,
      initial_delay_ms: 500,
      backoff_coefficient: 2,
      max_delay_ms: 60_000,
      jitter: true,
    });
  });

  it("fields given override the defaults one by one", ({ expect }) => {
    expect(resolveRetryPolicy({ max_attempts: 3, initial_delay_ms: 1000, jitter: false })).toEqual({
      maxAttempts: 3,
      initialDelayMs: 1000,
      backoffCoefficient: 2,
      maxDelayMs: 60_000,
      jitter: false,
    });
    expect(resolveRetryPolicy({ backoff_coefficient: 3, max_delay_ms: 9000 })).toMatchObject({
      backoffCoefficient: 3,
      maxDelayMs: 9000,
    });
  });

  it("an initial delay above the default maximum raises the maximum to it", ({ expect }) => {
    expect(resolveRetryPolicy({ initial_delay_ms: 120_000 }).maxDelayMs).toBe(120_000);
  });
});

describe("the RetryPolicy schema", () => {
  it.for([{ policy: { initial_delay_ms: 2000, max_delay_ms: 1000 } }, { policy: { max_delay_ms: 100 } }])(
    "rejects max_delay_ms below initial_delay_ms in $policy",
    ({ policy }, { expect }) => {
      const parsed = RetryPolicy.safeParse(policy);
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues).toEqual([
        expect.objectContaining({
          path: ["max_delay_ms"],
          message: "max_delay_ms cannot be less than initial_delay_ms",
        }),
      ]);
    },
  );

  it.for([
    { policy: {} },
    { policy: { initial_delay_ms: 2000, max_delay_ms: 2000 } },
    { policy: { initial_delay_ms: 120_000 } },
    { policy: { max_attempts: 3, initial_delay_ms: 1000, backoff_coefficient: 2, max_delay_ms: 10_000, jitter: true } },
  ])("accepts $policy", ({ policy }, { expect }) => {
    expect(RetryPolicy.safeParse(policy).success).toBe(true);
  });

  it("rejects fields it does not know", ({ expect }) => {
    expect(RetryPolicy.safeParse({ max_attempts: 3, backoff: 2 }).success).toBe(false);
  });
});
