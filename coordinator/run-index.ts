import { ensureEngineError } from "../lib/errors.ts";
import type { RunIndexRow } from "../schemas/run-index.ts";
import { triggerOf, type RunRecord } from "../schemas/run.ts";
import { isTerminal } from "./lifecycle.ts";
import type { WakeScheduler } from "./wakes.ts";

/**
 * The run's row in the run index (D1, `GET /v1/runs`; docs/architecture.md,
 * "The run index"). The index is a read model kept off the run's critical
 * path: a decision that changes the run's status stages the new row in the
 * run's own storage, in the transaction that commits the decision (the
 * outbox, RunStore), and this module writes it to D1 after the commit,
 * without the run ever waiting for it. A write that fails stays staged and
 * is retried by the run's alarm with backoff; a restart finds it staged and
 * writes it on load. The upsert is idempotent and ordered: a row replaces
 * the stored one only when its `seq` (the run's journal seq) is newer.
 */

/** The first retry of a failed index write waits this long; each further one twice as long. */
export const INDEX_RETRY_BASE_MS = 1_000;
/** The longest wait between two index write attempts. */
export const INDEX_RETRY_MAX_MS = 5 * 60_000;
/**
 * While a write is in flight the run keeps an alarm this far out, so that an
 * instance that dies before the write lands still wakes to write it again.
 */
export const INDEX_BACKSTOP_MS = 30_000;
/** How long a staged row waits before it is written, for a newer one to replace it. */
export const INDEX_COALESCE_MS = 50;
/** Error messages are cut to this many characters in the index (the run itself keeps the whole message). */
const INDEX_MESSAGE_CHARS = 500;

/** A staged row, and how its writes went so far. */
export interface StagedIndexRow {
  row: RunIndexRow;
  attempts: number;
  /** When the next attempt is due after a failure; null before the first. */
  retry_at: number | null;
}

/** The run's outbox of index rows, in its own storage (RunStore). */
export interface IndexOutbox {
  /** The staged row not yet written, or null when the index has the latest one. */
  stagedIndexRow(): StagedIndexRow | null;
  /** The row with this seq is in D1 (a newer row staged meanwhile stays staged). */
  indexRowWritten(seq: number): void;
  indexRowFailed(seq: number, attempts: number, retryAt: number): void;
}

/** Whether a commit from `before` to `after` changes what the index shows of the run. */
export function isIndexChange(before: RunRecord | null, after: RunRecord): boolean {
  return (
    before === null ||
    before.status !== after.status ||
    before.error?.code !== after.error?.code ||
    openGatesOf(before) !== openGatesOf(after)
  );
}

/** How many of the run's gates are open (the index's `open_gates`, which `GET /v1/gates` pages over). */
export function openGatesOf(record: RunRecord): number {
  return record.gates.filter((gate) => gate.status === "open").length;
}

/** The index row of a run record, taken at the commit that changed it. */
export function toIndexRow(record: RunRecord): RunIndexRow {
  return {
    run_id: record.run_id,
    workflow_id: record.workflow.id,
    workflow_version: record.workflow.version,
    status: record.status,
    mode: record.mode,
    parent_run_id: record.parent?.run_id ?? null,
    created_by: record.created_by,
    created_at: record.created_at,
    updated_at: record.updated_at,
    // Taken at the commit that made the run terminal, whose time is updated_at.
    finished_at: isTerminal(record.status) ? record.updated_at : null,
    error_code: record.error?.code ?? null,
    error_message: record.error ? record.error.message.slice(0, INDEX_MESSAGE_CHARS) : null,
    seq: record.journal_seq,
    open_gates: openGatesOf(record),
    trigger_kind: triggerOf(record).kind,
    deleted_at: null,
  };
}

/** How long to wait after the `attempts`-th failed write. */
export function indexRetryDelay(attempts: number): number {
  return Math.min(INDEX_RETRY_MAX_MS, INDEX_RETRY_BASE_MS * 2 ** Math.max(0, attempts - 1));
}

const UPSERT = `INSERT INTO runs (run_id, workflow_id, workflow_version, status, mode, parent_run_id, created_by,
    created_at, updated_at, finished_at, error_code, error_message, seq, open_gates, trigger_kind)
  VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15)
  ON CONFLICT (run_id) DO UPDATE SET status = excluded.status, updated_at = excluded.updated_at,
    finished_at = excluded.finished_at, error_code = excluded.error_code,
    error_message = excluded.error_message, seq = excluded.seq, open_gates = excluded.open_gates
  WHERE excluded.seq > runs.seq AND runs.status != 'deleted'`;

/** Writes a row to the index: inserted, or replacing an older row of the same run (never a newer one). */
export async function upsertIndexRow(db: D1Database, row: RunIndexRow): Promise<void> {
  await db
    .prepare(UPSERT)
    .bind(
      row.run_id,
      row.workflow_id,
      row.workflow_version,
      row.status,
      row.mode,
      row.parent_run_id,
      row.created_by,
      row.created_at,
      row.updated_at,
      row.finished_at,
      row.error_code,
      row.error_message,
      row.seq,
      row.open_gates,
      row.trigger_kind,
    )
    .run();
}

/**
 * Marks the run deleted in the index (coordinator/retention.ts): its last row,
 * with status `deleted` and `deleted_at`, inserted or replacing whatever row
 * the index has. `seq` is one past the run's last entry, so no index write of
 * the run still in flight replaces it; a second call keeps the first time.
 */
const MARK_DELETED = `INSERT INTO runs (run_id, workflow_id, workflow_version, status, mode, parent_run_id, created_by,
    created_at, updated_at, finished_at, error_code, error_message, seq, open_gates, trigger_kind, deleted_at)
  VALUES (?1, ?2, ?3, 'deleted', ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, 0, ?13, ?14)
  ON CONFLICT (run_id) DO UPDATE SET status = 'deleted', deleted_at = excluded.deleted_at, seq = excluded.seq,
    updated_at = excluded.updated_at, finished_at = excluded.finished_at, error_code = excluded.error_code,
    error_message = excluded.error_message, open_gates = 0
  WHERE runs.status != 'deleted'`;

/** Writes the deleted run's row: `row` is the run's last row (toIndexRow), `deletedAt` when it was deleted. */
export async function markIndexDeleted(db: D1Database, row: RunIndexRow, deletedAt: number): Promise<void> {
  await db
    .prepare(MARK_DELETED)
    .bind(
      row.run_id,
      row.workflow_id,
      row.workflow_version,
      row.mode,
      row.parent_run_id,
      row.created_by,
      row.created_at,
      row.updated_at,
      row.finished_at,
      row.error_code,
      row.error_message,
      row.seq + 1,
      row.trigger_kind,
      deletedAt,
    )
    .run();
}

/** What the sync needs of its Durable Object. */
export interface RunIndexDeps {
  outbox: IndexOutbox;
  db: D1Database;
  waitUntil: (promise: Promise<unknown>) => void;
  /**
   * The run's alarm: `setAlarm` sets it at a time or earlier; `holdReleased`
   * says the index has the latest row, so an alarm held only for it may go.
   */
  wakes: Pick<WakeScheduler, "setAlarm" | "holdReleased">;
  /** @default Date.now */
  now?: () => number;
  /** @default INDEX_COALESCE_MS */
  coalesceMs?: number;
}

/** Writes the run's staged index rows to D1, one write at a time, off the run's path. */
export class RunIndexSync {
  private writing = false;

  constructor(private readonly deps: RunIndexDeps) {}

  /**
   * Starts writing the staged row, if there is one and no write is under
   * way (that write goes on to a row staged meanwhile). Called after each
   * commit, on load and when the alarm fires; never awaited by the run.
   */
  flush(): void {
    const staged = this.writing ? null : this.staged();
    if (staged === null) {
      return;
    }
    this.writing = true;
    // The row is written a moment later: a short run's `running` row is then replaced by
    // its final one before it is written (one D1 write, not two), and the write stays
    // out of the way of the work its commit just released (the dispatches, the answer).
    const settle = this.deps.coalesceMs ?? INDEX_COALESCE_MS;
    this.deps.waitUntil(
      new Promise((resolve) => setTimeout(resolve, settle))
        .then(() => this.writeStaged())
        .finally(() => {
          this.writing = false;
        }),
    );
  }

  /**
   * The alarm the index needs even when the run needs none: the backstop of
   * a write under way (or not yet tried), else the retry after a failed one;
   * null once the row is written. A write under way never asks for its past
   * retry time, or each wake meanwhile would fire the alarm again at once.
   */
  heldUntil(now: number): number | null {
    const staged = this.staged();
    if (staged === null) {
      return null;
    }
    return this.writing || staged.retry_at === null ? now + INDEX_BACKSTOP_MS : staged.retry_at;
  }

  /** Writes staged rows until none is left, or stops at a failure with the retry scheduled. */
  private async writeStaged(): Promise<void> {
    const now = this.deps.now ?? Date.now;
    for (let staged = this.staged(); staged !== null;) {
      try {
        await upsertIndexRow(this.deps.db, staged.row);
      } catch (error) {
        const attempts = staged.attempts + 1;
        const retryAt = now() + indexRetryDelay(attempts);
        this.deps.outbox.indexRowFailed(staged.row.seq, attempts, retryAt);
        console.error(
          JSON.stringify({
            msg: "writing the run index failed; the alarm retries",
            run: staged.row.run_id,
            attempts,
            error: ensureEngineError(error).message,
          }),
        );
        await this.deps.wakes.setAlarm(retryAt);
        return;
      }
      this.deps.outbox.indexRowWritten(staged.row.seq);
      staged = this.staged();
    }
    await this.deps.wakes.holdReleased();
  }

  /**
   * The staged row; a row that cannot be read (it never should) is logged
   * and left alone rather than thrown into the run's event: the index must
   * never fail the run. The next status change stages a fresh one.
   */
  private staged(): StagedIndexRow | null {
    try {
      return this.deps.outbox.stagedIndexRow();
    } catch (error) {
      console.error(
        JSON.stringify({ msg: "reading the staged run index row failed", error: ensureEngineError(error).message }),
      );
      return null;
    }
  }
}
