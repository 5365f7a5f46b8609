import { ensureEngineError } from "../lib/errors.ts";
import type { JournalEntry } from "../schemas/journal.ts";
import type { SpanFoldState } from "../schemas/telemetry.ts";
import { encodeSpans, postSpans, type OtlpConfig } from "../telemetry/otlp.ts";
import { foldEntries } from "../telemetry/spans.ts";
import type { WakeScheduler } from "./wakes.ts";

/**
 * The run's journal exported as OpenTelemetry spans (docs/telemetry.md,
 * "How spans leave"), off the run's path like the run index (run-index.ts):
 * after a commit, a moment later, this module reads the entries not yet
 * exported, folds them into the spans they close (telemetry/spans.ts) and
 * POSTs them in one OTLP request per page; the run never waits for it. The
 * journal is the outbox: the run's storage keeps only a cursor (the last seq
 * exported) and the spans still open, so a failed POST is retried from the
 * same entries, which give the same spans with the same ids. Retries follow
 * the run's alarm with backoff; after {@link EXPORT_MAX_ATTEMPTS} failures, or
 * at once when the collector refuses a request for good (a 4xx other than
 * 408/429), the page is given up (counted, logged) and the export goes on.
 */

/** How long after a commit the export starts, so that a short run sends one request, not one per commit. */
export const EXPORT_COALESCE_MS = 1_000;
/** Journal entries per OTLP request, at most. */
export const EXPORT_PAGE = 200;
/** The first retry waits this long; each further one twice as long, up to EXPORT_RETRY_MAX_MS. */
export const EXPORT_RETRY_BASE_MS = 1_000;
export const EXPORT_RETRY_MAX_MS = 5 * 60_000;
/** A page that failed this many times is given up: about 18 minutes of a collector down. */
export const EXPORT_MAX_ATTEMPTS = 12;
/** While an export is due or under way the run keeps an alarm this far out, should its instance die first. */
export const EXPORT_BACKSTOP_MS = 30_000;

/** The export's cursor in the run's storage (RunStore). */
export interface ExportCursor {
  /** The last journal seq whose spans were sent (or given up); 0 before the first. */
  seq: number;
  state: SpanFoldState;
  attempts: number;
  retry_at: number | null;
  /** Spans given up so far. */
  dropped: number;
}

export interface ExportOutbox {
  /** The cursor, or null when the object holds no run. */
  exportCursor(): ExportCursor | null;
  lastJournalSeq(): number;
  journal(afterSeq: number, limit: number): JournalEntry[];
  saveExportCursor(cursor: ExportCursor): void;
}

export interface TelemetryExportDeps {
  /** Null: `OTEL_EXPORTER_OTLP_ENDPOINT` is not set, and nothing here runs or costs. */
  config: OtlpConfig | null;
  outbox: ExportOutbox;
  waitUntil: (promise: Promise<unknown>) => void;
  wakes: Pick<WakeScheduler, "setAlarm" | "holdReleased">;
  /** @default Date.now */
  now?: () => number;
  /** @default fetch */
  fetcher?: typeof fetch;
}

/** How long to wait after the `attempts`-th failed POST. */
export function exportRetryDelay(attempts: number): number {
  return Math.min(EXPORT_RETRY_MAX_MS, EXPORT_RETRY_BASE_MS * 2 ** Math.max(0, attempts - 1));
}

/** Exports the run's journal as spans, one request at a time, off the run's path. */
export class TelemetryExport {
  private exporting = false;
  /** The stored cursor as last read or written (undefined: not read yet); storage is its durable copy. */
  private cursor: ExportCursor | null | undefined;

  constructor(private readonly deps: TelemetryExportDeps) {}

  /** Starts exporting what is new, unless an export is under way (it goes on to what came meanwhile). Never awaited. */
  flush(): void {
    if (this.deps.config === null || this.exporting || this.pending() === null) {
      return;
    }
    this.exporting = true;
    this.deps.waitUntil(
      new Promise((resolve) => setTimeout(resolve, EXPORT_COALESCE_MS))
        .then(() => this.exportPending())
        .catch((error: unknown) => log("exporting the run's spans failed", { error: ensureEngineError(error).message }))
        .finally(() => {
          this.exporting = false;
        }),
    );
  }

  /** The alarm the export needs: its backstop while due or under way, its retry after a failure; null when done. */
  heldUntil(now: number): number | null {
    const cursor = this.deps.config === null ? null : this.pending();
    if (cursor === null) {
      return null;
    }
    return this.exporting || cursor.retry_at === null ? now + EXPORT_BACKSTOP_MS : cursor.retry_at;
  }

  /** The cursor when entries wait to be exported; null when all are (or no run, or a cursor that cannot be read). */
  private pending(): ExportCursor | null {
    try {
      this.cursor ??= this.deps.outbox.exportCursor();
      const cursor = this.cursor;
      return cursor !== null && cursor.seq < this.deps.outbox.lastJournalSeq() ? cursor : null;
    } catch (error) {
      log("reading the export cursor failed", { error: ensureEngineError(error).message });
      return null;
    }
  }

  /** Sends page after page until none is left, or stops at a failure with its retry scheduled. */
  private async exportPending(): Promise<void> {
    const now = this.deps.now ?? Date.now;
    for (let cursor = this.pending(); cursor !== null; cursor = this.pending()) {
      if (cursor.retry_at !== null && cursor.retry_at > now()) {
        return; // A retry is scheduled: the alarm comes for it.
      }
      if (!(await this.exportPage(cursor))) {
        return;
      }
    }
    await this.deps.wakes.holdReleased();
  }

  /** The export reached `seq` (sent or given up): stored, and kept as the cursor. */
  private advance(seq: number, state: SpanFoldState, dropped: number): void {
    this.cursor = { seq, state, attempts: 0, retry_at: null, dropped };
    this.deps.outbox.saveExportCursor(this.cursor);
  }

  /** Exports the page after `cursor`; false when it failed and waits for its retry. */
  private async exportPage(cursor: ExportCursor): Promise<boolean> {
    const { outbox } = this.deps;
    const entries = outbox.journal(cursor.seq, EXPORT_PAGE);
    const last = entries.at(-1);
    const config = this.deps.config;
    if (last === undefined || config === null) {
      return false;
    }
    const { state, spans } = foldEntries(cursor.state, entries);
    if (spans.length === 0) {
      this.advance(last.seq, state, cursor.dropped);
      return true;
    }
    const run = { runId: last.run_id, traceparent: state.created?.traceparent ?? null };
    const outcome = await postSpans(config, await encodeSpans(config, run, spans), this.deps.fetcher);
    if (outcome.ok) {
      this.advance(last.seq, state, cursor.dropped);
      return true;
    }
    const attempts = cursor.attempts + 1;
    if (!outcome.retryable || attempts >= EXPORT_MAX_ATTEMPTS) {
      this.advance(last.seq, state, cursor.dropped + spans.length);
      log("spans given up", { run: last.run_id, spans: spans.length, attempts, error: outcome.message });
      return true;
    }
    const retryAt = (this.deps.now ?? Date.now)() + exportRetryDelay(attempts);
    this.cursor = { ...cursor, attempts, retry_at: retryAt };
    outbox.saveExportCursor(this.cursor);
    log("exporting spans failed; the alarm retries", { run: last.run_id, attempts, error: outcome.message });
    await this.deps.wakes.setAlarm(retryAt);
    return false;
  }
}

function log(msg: string, fields: Record<string, unknown>): void {
  console.error(JSON.stringify({ msg, ...fields }));
}
