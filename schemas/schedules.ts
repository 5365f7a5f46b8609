import { z } from "zod";
import { DefinitionId, Description, JsonValue, Reference } from "./common.ts";

/**
 * Schedules (docs/definitions.md, "Schedules"): a definition kind that starts
 * runs of a workflow at the times of a cron expression, and the bodies of its
 * controls (`/v1/schedules/{id}/…`, docs/api.md).
 */

const IsoTime = z.iso.datetime({ offset: true });

/** What a slot does when the schedule's previous run has not ended yet. */
export const OVERLAP_POLICIES = ["skip", "buffer_one", "allow_all", "cancel_other"] as const;
export const OverlapPolicy = z.enum(OVERLAP_POLICIES);
export type OverlapPolicy = z.infer<typeof OverlapPolicy>;

/** @default "skip" */
export const DEFAULT_OVERLAP: OverlapPolicy = "skip";
/** How late a slot may still start, by default: one minute. */
export const DEFAULT_CATCHUP_WINDOW_MS = 60_000;
/** The longest catch-up window and jitter: one day. */
export const MAX_SCHEDULE_DELAY_MS = 86_400_000;

/** A schedule definition. */
export const Schedule = z
  .strictObject({
    id: DefinitionId,
    description: Description,
    /** The workflow each slot starts: `"id"` (the latest version when the slot starts) or `"id@n"`. */
    workflow: Reference,
    /** Five fields (minute hour day-of-month month day-of-week), read in `timezone`. */
    cron: z.string().min(1).max(200),
    /** @default "UTC" */
    timezone: z.string().min(1).max(64).optional(),
    /** The run's input: JSON whose `{ "expr": … }` (or other source) leaves read `schedule`. */
    input: JsonValue.optional(),
    overlap: OverlapPolicy.optional(),
    /** @default 60000 */
    catchup_window_ms: z.number().int().min(0).max(MAX_SCHEDULE_DELAY_MS).optional(),
    /** Each slot starts up to this much later (a delay fixed per slot). @default 0 */
    jitter_ms: z.number().int().min(0).max(MAX_SCHEDULE_DELAY_MS).optional(),
    /** No slot before this time. */
    start_at: IsoTime.optional(),
    /** No slot after this time. */
    end_at: IsoTime.optional(),
  })
  .check((ctx) => {
    const { start_at, end_at } = ctx.value;
    if (start_at !== undefined && end_at !== undefined && Date.parse(end_at) <= Date.parse(start_at)) {
      ctx.issues.push({ code: "custom", input: end_at, path: ["end_at"], message: "must be after start_at" });
    }
  });
export type Schedule = z.infer<typeof Schedule>;

/** How a slot came to be offered: its time came, `/trigger`, `/backfill`, or a buffered slot whose turn came. */
export const SLOT_SOURCES = ["cron", "trigger", "backfill", "buffer"] as const;
export const SlotSource = z.enum(SLOT_SOURCES);
export type SlotSource = z.infer<typeof SlotSource>;

/**
 * What became of one slot, in `recent`: a run's status (`queued`, `running`, …
 * `completed`), or `skipped` / `buffered` / `start_failed` with a `reason`.
 */
export const SlotRecord = z.strictObject({
  scheduled_at: IsoTime,
  run_id: z.string().nullable(),
  status: z.string(),
  reason: z.string().optional(),
  source: SlotSource,
});
export type SlotRecord = z.infer<typeof SlotRecord>;

/** `GET /v1/schedules/{id}/status`. */
export const ScheduleStatus = z.strictObject({
  id: z.string(),
  version: z.number().int(),
  paused: z.boolean(),
  /** The next 5 slots (ISO times), after what the schedule has already considered. */
  next: z.array(IsoTime),
  /** What became of the latest slots, newest first. */
  recent: z.array(SlotRecord),
});
export type ScheduleStatus = z.infer<typeof ScheduleStatus>;

/** `POST /v1/schedules/{id}/backfill`: one run per slot from `from` to `to` (both inclusive). */
export const BackfillBody = z.strictObject({
  from: IsoTime,
  to: IsoTime,
  /** The overlap policy for these slots; the schedule's own by default. */
  overlap: OverlapPolicy.optional(),
});
export type BackfillBody = z.infer<typeof BackfillBody>;

/** `POST /v1/schedules/{id}/backfill` → 202: how many slots were queued, and the first and last. */
export const BackfillAnswer = z.strictObject({
  slots: z.number().int(),
  first: IsoTime.nullable(),
  last: IsoTime.nullable(),
});
export type BackfillAnswer = z.infer<typeof BackfillAnswer>;

/** A backfill in progress, as the schedule's object keeps it: slots after `after`, up to `to` (ms). */
export const BackfillProgress = z.strictObject({
  after: z.number(),
  to: z.number(),
  overlap: OverlapPolicy,
});
export type BackfillProgress = z.infer<typeof BackfillProgress>;

/** One schedule object's stored state (schedules/hub.ts). */
export const ScheduleState = z.strictObject({
  version: z.number().int().min(1),
  definition: Schedule,
  paused: z.boolean(),
  /** The latest cron slot considered (ms): the next is after it. */
  cursor: z.number(),
  /** A slot whose start was begun and not yet recorded, finished first after a restart. */
  inflight: z.strictObject({ scheduled_at: z.number(), source: SlotSource }).nullable(),
  /** The one slot `buffer_one` keeps until the previous run ends. */
  buffered: z.number().nullable(),
  /** The run the latest slot started. */
  last_run: z.string().nullable(),
  backfill: BackfillProgress.nullable(),
  recent: z.array(SlotRecord),
});
export type ScheduleState = z.infer<typeof ScheduleState>;
