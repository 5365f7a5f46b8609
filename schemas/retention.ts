import { z } from "zod";
import { ErasureView, RunErasure, RunStatus } from "./run.ts";

/**
 * What a run's object keeps once it deleted the run (coordinator/retention.ts,
 * docs/architecture.md "Retention"): enough to answer 410 `run.deleted` on
 * every route of the run, to refuse a new run under the same id, and to say
 * whether the journal was archived. A few dozen bytes, in place of the run.
 */
export const RunTombstone = z.strictObject({
  run_id: z.string(),
  workflow_id: z.string(),
  /** The status the run ended with, before it was deleted. */
  ended: RunStatus,
  /** Milliseconds since the epoch. */
  deleted_at: z.number().int(),
  /** Why: its workflow's (or the deployment's) retention, or an operator's `DELETE /v1/runs/{id}`. */
  reason: z.enum(["retention", "operator"]),
  /** The journal was written to R2 first (`archive/<run_id>/journal.json`). */
  archived: z.boolean(),
  /** The archived journal's values were erased (`POST /v1/runs/{id}/erase` after the deletion). */
  erased: RunErasure.optional(),
});
export type RunTombstone = z.infer<typeof RunTombstone>;

/** `DELETE /v1/runs/{run_id}` (docs/api.md): the run as it is now, deleted. */
export const DeletedRun = z.strictObject({
  run_id: z.string(),
  status: z.literal("deleted"),
  /** The status the run ended with. */
  ended: RunStatus,
  deleted_at: z.string(),
  reason: z.enum(["retention", "operator"]),
  archived: z.boolean(),
  /** Present once its archived journal was erased: as a run view's `erased`. */
  erased: ErasureView.optional(),
});
export type DeletedRun = z.infer<typeof DeletedRun>;

/** The R2 key of a run's archived journal: `{ entries }` as `GET /v1/runs/{id}/journal` answered it. */
export function archiveKeyOf(runId: string): string {
  return `archive/${runId}/journal.json`;
}
