import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { MAX_RETENTION_DAYS, type Retention } from "../schemas/definitions.ts";
import { JournalResponse, type JournalEntry } from "../schemas/journal.ts";
import { archiveKeyOf, type RunTombstone } from "../schemas/retention.ts";
import type { RunRecord, RunStatus } from "../schemas/run.ts";
import { hasPendingCleanup } from "./cleanup.ts";
import { isTerminal } from "./lifecycle.ts";
import { markIndexDeleted, toIndexRow } from "./run-index.ts";

/**
 * Retention (docs/architecture.md, "Retention"): how long a run's object
 * keeps a run once it ended, and the deletion itself. The deadline is not
 * stored: it follows from the run's record (when it ended, and when its
 * compensation finished) and the policy, so a redrive (the run is no longer
 * terminal) suspends it and the run's next end starts it again, and so does
 * a compensation opened after the attestation. The run's one alarm
 * (wakes.ts) is held at the deadline; the alarm that finds it due deletes.
 */

export const DAY_MS = 86_400_000;

/** The deployment's defaults (wrangler.toml `[vars]`): unset, empty or not a number of days means keep. */
export interface RetentionVars {
  RETENTION_COMPLETED_DAYS?: string;
  RETENTION_FAILED_DAYS?: string;
  RETENTION_CANCELLED_DAYS?: string;
  /** `true`: archive the journal of the runs whose workflow does not say. */
  RETENTION_ARCHIVE?: string;
}

type EndStatus = "completed" | "failed" | "cancelled";

/** A run's retention, resolved: the days per terminal status (null: keep) and whether to archive first. */
export interface RetentionPolicy {
  days: Record<EndStatus, number | null>;
  archive: boolean;
}

/** The workflow's retention, each field it leaves out taken from the deployment's vars. */
export function retentionOf(declared: Retention | undefined, vars: RetentionVars): RetentionPolicy {
  return {
    days: {
      completed: declared?.completed_days ?? daysOf(vars.RETENTION_COMPLETED_DAYS),
      failed: declared?.failed_days ?? daysOf(vars.RETENTION_FAILED_DAYS),
      cancelled: declared?.cancelled_days ?? daysOf(vars.RETENTION_CANCELLED_DAYS),
    },
    archive: declared?.archive ?? vars.RETENTION_ARCHIVE?.trim() === "true",
  };
}

/** A var's days, or null (keep) when it is unset or is not a positive number of days up to MAX_RETENTION_DAYS. */
export function daysOf(value: string | undefined): number | null {
  const text = value?.trim() ?? "";
  const days = text === "" ? Number.NaN : Number(text);
  return Number.isFinite(days) && days > 0 && days <= MAX_RETENTION_DAYS ? days : null;
}

/**
 * Whether the run may be deleted now: it ended, no compensation is running,
 * and it owes no cancel or release (cleanup.ts) to children or containers.
 */
export function isDeletable(record: RunRecord): boolean {
  return isTerminal(record.status) && record.compensation?.status !== "running" && !hasPendingCleanup(record);
}

/** When the run's object deletes the run (ms since the epoch), or null: it is kept, or has not ended. */
export function deletionDueAt(record: RunRecord, policy: RetentionPolicy): number | null {
  if (!isDeletable(record)) {
    return null;
  }
  const days = policy.days[record.status as EndStatus];
  if (days === null) {
    return null;
  }
  // The terminal transition set updated_at; a compensation after it ends later.
  const endedAt = Math.max(record.updated_at, record.compensation?.finished_at ?? 0);
  return endedAt + Math.round(days * DAY_MS);
}

/** Why a run cannot be deleted now (409 `run.not_terminal`), or null. */
export function deletionRefusal(status: RunStatus, record: RunRecord): EngineError | null {
  if (!isTerminal(status)) {
    return EngineError.terminal("run.not_terminal", `the run is ${status}: only a run that has ended can be deleted`);
  }
  if (!isDeletable(record)) {
    return EngineError.terminal(
      "run.not_terminal",
      "the run is still compensating, or cancelling its children or releasing its containers: try again shortly",
    );
  }
  return null;
}

/** What deleting a run touches. */
export interface DeletionDeps {
  storage: DurableObjectStorage;
  db: D1Database;
  /** The R2 bucket archives go to (binding BLOBS). */
  bucket: R2Bucket;
  /** The run's whole journal, in seq order. */
  journal: () => JournalEntry[];
  /** Gives up the run's holding of its blobs (blobs/store.ts `releaseRunBlobs`): idempotent. */
  releaseBlobs: (runId: string) => Promise<unknown>;
}

/**
 * Deletes the run: archives its journal when asked, marks it deleted in the
 * run index, releases its blobs (an archived journal keeps their references,
 * which verify without the bytes), then deletes the object's storage and
 * keeps only the tombstone.
 * Each step is idempotent, and the storage goes last: a failure (an alarm
 * retries it, an operator asks again) leaves the run whole.
 */
export async function deleteRun(
  deps: DeletionDeps,
  record: RunRecord,
  options: { archive: boolean; reason: RunTombstone["reason"]; now: number },
): Promise<RunTombstone> {
  if (options.archive) {
    await archiveJournal(deps, record.run_id);
  }
  try {
    await markIndexDeleted(deps.db, toIndexRow(record), options.now);
  } catch (error) {
    throw EngineError.retryable(
      "index.unavailable",
      `the run index cannot be written: ${ensureEngineError(error).message}`,
    );
  }
  try {
    await deps.releaseBlobs(record.run_id);
  } catch (error) {
    throw EngineError.retryable(
      "retention.blobs_unavailable",
      `the run's blobs could not be released: ${ensureEngineError(error).message}`,
    );
  }
  const tombstone: RunTombstone = {
    run_id: record.run_id,
    workflow_id: record.workflow.id,
    ended: record.status,
    deleted_at: options.now,
    reason: options.reason,
    archived: options.archive,
  };
  await deps.storage.deleteAlarm();
  await deps.storage.deleteAll();
  await deps.storage.put(TOMBSTONE_KEY, tombstone);
  return tombstone;
}

/** Where the object keeps its tombstone (its only key once the run is deleted). */
export const TOMBSTONE_KEY = "deleted";

/** Writes the journal to R2, as `GET /v1/runs/{id}/journal` answers it. */
async function archiveJournal(deps: DeletionDeps, runId: string): Promise<void> {
  const body = JSON.stringify({ entries: deps.journal() });
  try {
    await deps.bucket.put(archiveKeyOf(runId), body, { httpMetadata: { contentType: "application/json" } });
  } catch (error) {
    throw EngineError.retryable(
      "retention.archive_unavailable",
      `the journal could not be archived: ${ensureEngineError(error).message}`,
    );
  }
}

/**
 * The archived journal of a deleted run, or null when it has none: `{ entries }`
 * as `GET /v1/runs/{id}/journal` answered it before the run was deleted, signed
 * entries unchanged (but for an erasure's), so it verifies as it did. Parsed as
 * it is read: R2 is a boundary like any other.
 */
export async function readArchivedJournal(bucket: R2Bucket, runId: string): Promise<JournalResponse | null> {
  const object = await bucket.get(archiveKeyOf(runId));
  if (!object) {
    return null;
  }
  const parsed = JournalResponse.safeParse(await object.json());
  if (!parsed.success) {
    throw new EngineError("retention.archive_corrupt", `the archived journal of ${runId} is not a journal`);
  }
  return parsed.data;
}
