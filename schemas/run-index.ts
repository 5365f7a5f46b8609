import { z } from "zod";
import { Reference } from "./common.ts";
import { RUN_STATUSES, RunMode, TRIGGER_KINDS } from "./run.ts";

/**
 * A run's status as the run index lists it: one of the run's own, or
 * `deleted` once its object deleted it (docs/architecture.md, "Retention").
 */
export const IndexedRunStatus = z.enum([...RUN_STATUSES, "deleted"]);
export type IndexedRunStatus = z.infer<typeof IndexedRunStatus>;

/**
 * One row of the run index (the D1 table `runs`, migrations/0001_runs.sql):
 * what `GET /v1/runs` lists and filters on. Times are milliseconds since the
 * epoch; `seq` is the run's journal seq when the row was taken, so a row
 * only ever replaces an older one.
 */
export const RunIndexRow = z.strictObject({
  run_id: z.string(),
  workflow_id: z.string(),
  workflow_version: z.number().int(),
  status: IndexedRunStatus,
  mode: RunMode,
  parent_run_id: z.string().nullable(),
  /** Who started the run, as the run record has it (`token:<keyed digest>`, `rpc`, `run:<parent>`): never a token. */
  created_by: z.string(),
  created_at: z.number().int(),
  updated_at: z.number().int(),
  finished_at: z.number().int().nullable(),
  error_code: z.string().nullable(),
  error_message: z.string().nullable(),
  seq: z.number().int().min(0),
  /** How many of the run's gates are open (0 in a row staged before the column existed). */
  open_gates: z.number().int().min(0).default(0),
  /** How the run was started: its trigger's kind (`api` in a row staged before the column existed). */
  trigger_kind: z.enum(TRIGGER_KINDS).default("api"),
  /** When the run was deleted (status `deleted`), else null (and in a row staged before the column existed). */
  deleted_at: z.number().int().nullable().default(null),
});
export type RunIndexRow = z.infer<typeof RunIndexRow>;

/** The most runs one page lists. */
export const MAX_RUNS_PAGE = 100;

const IsoTime = z.iso.datetime({ offset: true, message: "must be an ISO-8601 date-time, e.g. 2026-11-24T08:00:00Z" });

/**
 * The query of `GET /v1/runs` (docs/api.md). `status` may list several
 * statuses, comma-separated; `workflow` is an id or `id@version`. Unknown
 * parameters are refused, so a misspelt filter is a 400, not a silently
 * wider listing.
 */
export const ListRunsQuery = z.strictObject({
  workflow: Reference.optional(),
  status: z
    .string()
    .transform((value) => value.split(",").map((part) => part.trim()))
    .pipe(z.array(IndexedRunStatus).min(1))
    .optional(),
  parent: z.string().min(1).max(200).optional(),
  /** How the runs were started: a trigger kind (`api`, `plan`, `parent`, `schedule`, `event`, `webhook`). */
  trigger: z.enum(TRIGGER_KINDS).optional(),
  created_after: IsoTime.optional(),
  created_before: IsoTime.optional(),
  limit: z
    .string()
    .regex(/^[0-9]{1,4}$/, `must be a whole number from 1 to ${MAX_RUNS_PAGE}`)
    .transform(Number)
    .pipe(z.number().int().min(1).max(MAX_RUNS_PAGE))
    .optional(),
  cursor: z.string().min(1).max(400).optional(),
});
export type ListRunsQuery = z.infer<typeof ListRunsQuery>;

/** What an opaque `cursor` holds once decoded: the (created_at, run_id) of the last run of the page before. */
export const RunCursor = z.tuple([z.number().int().min(0), z.string().min(1).max(200)]);
export type RunCursor = z.infer<typeof RunCursor>;

/** The most runs one page of `GET /v1/gates` reads the open gates of. */
export const MAX_GATE_RUNS_PAGE = 50;

/**
 * The query of `GET /v1/gates` (docs/api.md): `status` is `open` (the only
 * listing there is, and the default); a page covers at most `limit` runs
 * that have open gates. Unknown parameters are refused.
 */
export const ListGatesQuery = z.strictObject({
  status: z.literal("open").optional(),
  limit: z
    .string()
    .regex(/^[0-9]{1,4}$/, `must be a whole number from 1 to ${MAX_GATE_RUNS_PAGE}`)
    .transform(Number)
    .pipe(z.number().int().min(1).max(MAX_GATE_RUNS_PAGE))
    .optional(),
  cursor: z.string().min(1).max(400).optional(),
});
export type ListGatesQuery = z.infer<typeof ListGatesQuery>;
