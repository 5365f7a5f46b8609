import { z } from "zod";
import { CelSource, DefinitionId, Description, Reference } from "./common.ts";

/**
 * Flow control across runs (docs/definitions.md, "Limits"): a `limits`
 * definition bounds how many calls (or runs) hold a slot at once, how many
 * start per window, and how many model tokens are spent per window. Workflows,
 * actions and models name limits with an optional CEL key; each (limit, key)
 * is one limit object (limits/keeper.ts) that grants, queues and reclaims.
 */

/** The longest window a rate or token budget counts over: one day. */
export const MAX_LIMIT_PERIOD_MS = 86_400_000;
/** The most limits one workflow, action or model names. */
export const MAX_LIMIT_USES = 4;
/** A key, as evaluated, at most this many characters (longer keys are refused with `limit.key_too_long`). */
export const MAX_LIMIT_KEY_CHARS = 256;
/** Run priorities: 0 (lowest) to 9 (highest). */
export const MIN_PRIORITY = 0;
export const MAX_PRIORITY = 9;
/** @default 5 */
export const DEFAULT_PRIORITY = 5;
/** How long a step's slot stays held without a renewal, unless `LIMIT_LEASE_MS` says otherwise. */
export const DEFAULT_LIMIT_LEASE_MS = 30_000;

export const Priority = z.number().int().min(MIN_PRIORITY).max(MAX_PRIORITY);

/** A budget per sliding window: at most `limit` (calls, or tokens) in any `period_ms`. */
export const LimitWindow = z.strictObject({
  limit: z.number().int().min(1).max(1_000_000_000_000),
  period_ms: z.number().int().min(1).max(MAX_LIMIT_PERIOD_MS),
});
export type LimitWindow = z.infer<typeof LimitWindow>;

const limitFields = {
  /** Holders at once. */
  concurrency: z.number().int().min(1).max(100_000).optional(),
  /** Grants per window. */
  rate: LimitWindow.optional(),
  /** Tokens (input + output, as `llm` steps report them) per window. */
  tokens: LimitWindow.optional(),
};

function atLeastOneBudget(
  ctx: z.core.ParsePayload<{ concurrency?: number; rate?: LimitWindow; tokens?: LimitWindow }>,
) {
  const { concurrency, rate, tokens } = ctx.value;
  if (concurrency === undefined && rate === undefined && tokens === undefined) {
    ctx.issues.push({
      code: "custom",
      input: ctx.value,
      path: [],
      message: "a limit needs at least one of concurrency, rate, tokens",
    });
  }
}

/** A `limits` definition. */
export const Limit = z
  .strictObject({ id: DefinitionId, description: Description, ...limitFields })
  .check(atLeastOneBudget);
export type Limit = z.infer<typeof Limit>;

/** What a limit object is told of its limit with every call: the definition as the run resolved it. */
export const LimitConfig = z
  .strictObject({ id: z.string().min(1), version: z.number().int().min(0), ...limitFields })
  .check(atLeastOneBudget);
export type LimitConfig = z.infer<typeof LimitConfig>;

/** Where a limit applies: `{ limit: "<ref>", key?: "<CEL>" }` on a workflow, an action or a model. */
export const LimitUse = z.strictObject({
  limit: Reference,
  /** CEL over `input` (the run's input on a workflow, the step's input on an action or model); each value has its own budget. */
  key: CelSource.max(2000).optional(),
});
export type LimitUse = z.infer<typeof LimitUse>;

export const LimitUses = z
  .array(LimitUse)
  .min(1)
  .max(MAX_LIMIT_USES, `at most ${MAX_LIMIT_USES} limits`)
  .check((ctx) => {
    const seen = new Set<string>();
    ctx.value.forEach((use, index) => {
      const id = use.limit.split("@")[0] ?? use.limit;
      if (seen.has(id)) {
        ctx.issues.push({ code: "custom", input: use.limit, path: [index, "limit"], message: "names a limit twice" });
      }
      seen.add(id);
    });
  });

/** A limit use as a run holds it: the definition frozen at run start. */
export const ResolvedLimitUse = z.strictObject({ limit: LimitConfig, key: LimitUse.shape.key });
export type ResolvedLimitUse = z.infer<typeof ResolvedLimitUse>;
export const ResolvedLimitUses = z.array(ResolvedLimitUse).min(1).max(MAX_LIMIT_USES);

// ─── The limit object's calls (limits/keeper.ts) ───────────────────────────────

export const LimitKey = z.string().max(MAX_LIMIT_KEY_CHARS);

/** Who holds or waits for a slot: a run (workflow limits) or one call of a step. */
export const LimitHolder = z.strictObject({
  /** Stable across restarts and re-sends: acquiring twice with one id holds one slot. */
  id: z.string().min(1).max(1024),
  /** The run to tell when a queued holder is granted (`limitGranted`), and whose cancel withdraws it. */
  run_id: z.string().min(1),
  priority: Priority,
});
export type LimitHolder = z.infer<typeof LimitHolder>;

export const AcquireRequest = z.strictObject({
  config: LimitConfig,
  key: LimitKey,
  holder: LimitHolder,
  /** A step's call holds its slot this long unless renewed; null for a run (held until released). */
  lease_ms: z.number().int().min(1).nullable(),
  /** false: grant now or answer no, recording nothing (and never ahead of a waiter); true: queue when not granted. */
  queue: z.boolean(),
});
export type AcquireRequest = z.infer<typeof AcquireRequest>;

export const AcquireAnswer = z.discriminatedUnion("granted", [
  z.strictObject({ granted: z.literal(true), lease_until: z.number().nullable() }),
  z.strictObject({
    granted: z.literal(false),
    /** 1-based place among the waiters (0 when not queued). */
    position: z.number().int().min(0),
    /** When a window or a pause next lets a grant through, if that is what stops it. */
    retry_at: z.number().nullable(),
  }),
]);
export type AcquireAnswer = z.infer<typeof AcquireAnswer>;

export const ReleaseRequest = z.strictObject({
  holder_id: LimitHolder.shape.id,
  /** Tokens the call spent (counted against `tokens`). */
  tokens: z.number().int().min(0).optional(),
  /** The peer answered 429 with `Retry-After`: no grant for anyone until then. */
  retry_after_ms: z.number().int().min(0).max(MAX_LIMIT_PERIOD_MS).optional(),
});
export type ReleaseRequest = z.infer<typeof ReleaseRequest>;

export const RenewRequest = z.strictObject({
  holder_ids: z.array(LimitHolder.shape.id).min(1).max(64),
  lease_ms: z.number().int().min(1),
});
export type RenewRequest = z.infer<typeof RenewRequest>;

/**
 * A run gives up its slots and its places in the queue here: every one (it
 * ended or was cancelled), or only `holder_ids` (a wait closed while the run goes on).
 */
export const WithdrawRequest = z.strictObject({
  run_id: z.string().min(1),
  holder_ids: z.array(LimitHolder.shape.id).min(1).max(64).optional(),
});
export type WithdrawRequest = z.infer<typeof WithdrawRequest>;

/** Limit object → run coordinator: a queued holder was granted. */
export const LimitGrant = z.strictObject({
  limit: z.string().min(1),
  key: LimitKey,
  holder_id: LimitHolder.shape.id,
  lease_until: z.number().nullable(),
});
export type LimitGrant = z.infer<typeof LimitGrant>;
/** The run took the grant, or it no longer wants it (the keeper then frees the slot). */
export const LimitGrantAnswer = z.strictObject({ accepted: z.boolean() });
export type LimitGrantAnswer = z.infer<typeof LimitGrantAnswer>;

const WindowStatus = z.strictObject({ used: z.number().int().min(0), resets_at: z.string().nullable() });

/** ▣ `GET /v1/limits/{id}/status?key=`. */
export const LimitStatus = z.strictObject({
  limit: z.string(),
  key: z.string(),
  in_use: z.number().int().min(0),
  waiting: z.number().int().min(0),
  /** The `tokens` window when the limit has one, else the `rate` window (used 0, resets_at null with neither). */
  window: WindowStatus,
  /** The `rate` window too, when the limit has both `rate` and `tokens`. */
  rate_window: WindowStatus.optional(),
  /** No grant before this time: a call was answered 429 with `Retry-After`. */
  paused_until: z.string().nullable(),
});
export type LimitStatus = z.infer<typeof LimitStatus>;
