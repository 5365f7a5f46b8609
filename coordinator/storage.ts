import type { z } from "zod";
import { JournalEntry, JournalSignedFields } from "../schemas/journal.ts";
import { RunSnapshot } from "../schemas/resolved.ts";
import { RunIndexRow } from "../schemas/run-index.ts";
import { InvocationRecord, NodeRecord, RunRecord, type RunContext } from "../schemas/run.ts";
import type { SignedEntryText } from "../lib/journal/index.ts";
import type { RunState } from "./decide.ts";
import { pendingNode } from "./create.ts";
import { isIndexChange, toIndexRow, type IndexOutbox, type StagedIndexRow } from "./run-index.ts";
import { SpanFoldState } from "../schemas/telemetry.ts";
import { emptyFoldState } from "../telemetry/spans.ts";
import type { ExportCursor, ExportOutbox } from "./telemetry-export.ts";
import { JOURNAL_PAGES_TABLE, journalTable, pagesOf, type JournalTable } from "./journal-store.ts";

/**
 * SQLite rows hold at most 2 MB; JSON values are split into chunks of this
 * many UTF-16 code units (≤ 1.5 MB of UTF-8 even if every unit takes 3 bytes).
 */
const CHUNK_CHARS = 500_000;

/** Rows inserted together are bound as one JSON text of about this many characters at most. */
const BATCH_CHARS = 200_000;

/**
 * A run context of at most this many characters of JSON is stored in the run
 * record's row, rewritten with it; a longer one has a blob of its own, written
 * only when it changed (so that an event that moves only the record does not
 * write out a large context again).
 */
const INLINE_CONTEXT_CHARS = 16_384;

/**
 * The run's tables. Node and invocation rows are small and rewritten in place
 * by every event: WITHOUT ROWID keeps each in one B-tree (no separate key
 * index to update). Tables of objects created before keep theirs, and a run
 * whose object has the `journal` table (one row an entry) keeps its journal
 * there (journal-store.ts).
 */
export const RUN_TABLES = `CREATE TABLE IF NOT EXISTS blobs (key TEXT NOT NULL, chunk INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (key, chunk));
  CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE IF NOT EXISTS invocations (node TEXT NOT NULL, idx INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (node, idx)) WITHOUT ROWID;
  ${JOURNAL_PAGES_TABLE}
  CREATE TABLE IF NOT EXISTS journal_unsigned (seq INTEGER PRIMARY KEY, fields TEXT NOT NULL);
  CREATE TABLE IF NOT EXISTS index_outbox (k INTEGER PRIMARY KEY CHECK (k = 0), seq INTEGER NOT NULL,
    row TEXT NOT NULL, written INTEGER NOT NULL, attempts INTEGER NOT NULL, retry_at INTEGER);`;

/** The OTLP export's cursor: the last seq exported, the spans still open, and how the retries go. */
const EXPORT_TABLE = `CREATE TABLE IF NOT EXISTS otel_outbox (k INTEGER PRIMARY KEY CHECK (k = 0), seq INTEGER NOT NULL,
  state TEXT NOT NULL, attempts INTEGER NOT NULL, retry_at INTEGER, dropped INTEGER NOT NULL)`;

/** A journal entry decided and committed, waiting to be chained and signed. */
/** Journal entries returned by one journal call, at most: a long journal is read in pages, no answer grows with the run. */
export const JOURNAL_PAGE = 1_000;

export const UnsignedEntry = JournalSignedFields.omit({ prev: true, run_id: true });
export type UnsignedEntry = z.infer<typeof UnsignedEntry>;

/**
 * Row ↔ record mapping for one run, with all of the coordinator's SQL in one
 * place. The run record, the snapshot, each node and each task invocation are
 * separate rows, so an event rewrites only what it changed (a foreach item's
 * result writes one invocation row, not the whole node). Values larger than a
 * SQLite row are stored in chunks. Rows are parsed with their schemas when
 * read back. It is also the run's outbox of run index rows (run-index.ts):
 * a commit that changes the run's status stages the new row in the same
 * transaction, and the row stays staged until D1 has it.
 */
export class RunStore implements IndexOutbox, ExportOutbox {
  private readonly sql: SqlStorage;
  /** Whether the context blob exists (a short context is kept in the record, as a run stored before the blob kept it). */
  private contextStored = false;
  /** The context last written and its text: an unchanged context is not written out again. */
  private contextText: { context: RunContext; text: string } | null = null;
  /** Nodes that have (or may have) invocation rows: a node with more than one invocation, or any of a run stored before. */
  private invocationRows = new Set<string>();
  /** How many chunks each blob has in storage, once this instance knows (read or written it). */
  private readonly chunks = new Map<string, number>();
  /** Whether the tables exist: false in a new object until its run is created. */
  private hasTables: boolean;
  /** The journal's table, in the layout of the run's object; null while it has no tables. */
  private journalRows: JournalTable | null = null;

  constructor(sql: SqlStorage) {
    this.sql = sql;
    // A new object has no tables yet: it creates them with its run, in the run's first transaction (one
    // commit, not two; measured below). An existing object gets any table added since it was created.
    this.hasTables =
      sql.exec("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'blobs'").toArray().length > 0;
    if (this.hasTables) {
      sql.exec(RUN_TABLES);
      this.journalRows = journalTable(sql);
    }
  }

  /** The object's storage was deleted with its run (coordinator/retention.ts): it holds no run from now on. */
  drop(): void {
    this.hasTables = false;
    this.journalRows = null;
    this.chunks.clear();
  }

  /** The run, or null when this object holds none yet. */
  load(): { state: RunState; snapshot: RunSnapshot; lastHash: string | null } | null {
    if (!this.hasTables) {
      return null;
    }
    const stored = this.getJson("record");
    const context = this.getJson("context");
    const snapshot = this.getJson("snapshot");
    if (stored === undefined || snapshot === undefined) {
      return null;
    }
    // A short context is in the record (as a run stored before the blob keeps it); a longer one has a blob.
    this.contextStored = context !== undefined;
    const inline = typeof stored === "object" && stored !== null && "context" in stored;
    const record = inline || context === undefined ? stored : { ...(stored as object), context };
    const parsedSnapshot = RunSnapshot.parse(snapshot);
    const nodes = this.loadNodes(Object.keys(parsedSnapshot.workflow.definition.nodes));
    const last = this.journalRows?.last();
    const parsed = RunRecord.parse(record);
    if (this.sql.exec("SELECT k FROM index_outbox").toArray().length === 0) {
      this.stageIndexRow(toIndexRow(parsed)); // A run created before the index existed: indexed now.
    }
    return {
      state: { record: parsed, nodes },
      snapshot: parsedSnapshot,
      lastHash: last ? JournalEntry.parse(last).hash : null,
    };
  }

  /**
   * The run's nodes: each node row, with its invocations in it or, for a node
   * with more than one (and every node of a run stored before), in rows of
   * their own; a node of the definition without a row has not started.
   */
  private loadNodes(ids: readonly string[]): Record<string, NodeRecord> {
    const invocations = new Map<string, InvocationRecord[]>();
    for (const row of this.sql.exec<{ node: string; data: string }>(
      "SELECT node, data FROM invocations ORDER BY node, idx",
    )) {
      const list = invocations.get(row.node) ?? [];
      list.push(InvocationRecord.parse(JSON.parse(row.data)));
      invocations.set(row.node, list);
    }
    this.invocationRows = new Set(invocations.keys());
    const stored = new Map<string, NodeRecord>();
    for (const row of this.sql.exec<{ id: string; data: string }>("SELECT id, data FROM nodes")) {
      const data = JSON.parse(row.data) as { invocations?: unknown };
      // Invocations in the node row are its own; rows of a node that has them are left over.
      stored.set(row.id, NodeRecord.parse({ invocations: invocations.get(row.id) ?? [], ...data }));
    }
    // In the definition's order, as a new run has them.
    const nodes: Record<string, NodeRecord> = {};
    for (const id of ids) {
      nodes[id] = stored.get(id) ?? pendingNode();
    }
    for (const [id, node] of stored) {
      nodes[id] ??= node;
    }
    return nodes;
  }

  /** Writes a new run. Call inside a storage transaction with its first journal entries. */
  create(state: RunState, snapshot: RunSnapshot): void {
    // Every time, not once: a transaction that failed took the tables (and any blob rows) back with it.
    this.sql.exec(RUN_TABLES);
    this.hasTables = true;
    this.journalRows = journalTable(this.sql);
    this.chunks.clear();
    this.invocationRows.clear();
    this.contextStored = false;
    this.putJson("snapshot", snapshot);
    this.save(null, state);
  }

  /**
   * Writes what changed between `before` and `after`: of the nodes, those in `changed`
   * when the caller knows them (every node a decision replaced), else every node that
   * is not the same object as before. Call inside a storage transaction.
   */
  save(before: RunState | null, after: RunState, changed?: ReadonlySet<string>): void {
    if (before?.record !== after.record) {
      this.saveRecord(before?.record ?? null, after.record);
      if (isIndexChange(before?.record ?? null, after.record)) {
        this.stageIndexRow(toIndexRow(after.record));
      }
    }
    const nodeRows: [string, string][] = [];
    const rows: [string, number, string][] = [];
    for (const id of changed !== undefined && before !== null ? changed : Object.keys(after.nodes)) {
      const node = after.nodes[id];
      const previous = before?.nodes[id];
      if (node !== undefined && previous !== node) {
        this.nodeRows(id, node, previous ?? null, nodeRows, rows);
      }
    }
    // A wave of a hundred dispatches or results is one call into SQLite, not a hundred.
    this.insertRows("INSERT INTO nodes (id, data)", nodeRows, "ON CONFLICT (id) DO UPDATE SET data = excluded.data");
    this.insertRows(
      "INSERT INTO invocations (node, idx, data)",
      rows,
      "ON CONFLICT (node, idx) DO UPDATE SET data = excluded.data",
    );
  }

  /**
   * Writes the record. The run context (input, state, output) grows with the run
   * and changes less often than the record (every event moves journal_seq): while
   * its text is short it goes in the record's row (one row written, not two); once
   * longer it is a blob of its own, written only when it changed.
   */
  private saveRecord(before: RunRecord | null, after: RunRecord): void {
    const { context, ...rest } = after;
    const changed = before?.context !== context;
    // The text of the same context object, if this instance made it already.
    const contextText = this.contextText?.context === context ? this.contextText.text : JSON.stringify(context);
    this.contextText = { context, text: contextText };
    const recordText = JSON.stringify(rest);
    if (contextText.length <= INLINE_CONTEXT_CHARS) {
      this.putText("record", `${recordText.slice(0, -1)},"context":${contextText}}`);
      if (this.contextStored) {
        this.sql.exec("DELETE FROM blobs WHERE key = 'context'");
        this.chunks.set("context", 0);
        this.contextStored = false;
      }
      return;
    }
    this.putText("record", recordText);
    if (changed || !this.contextStored) {
      this.putText("context", contextText);
      this.contextStored = true;
    }
  }

  /**
   * A changed node's rows, pushed onto `nodeRows` and `rows`. A node with at
   * most one invocation (a chain's node) is one row, its invocation in it; a
   * node with more (a foreach's) has a row an invocation, so that an item's
   * result writes its own row, not the node's every item. A pending node
   * of a new run has no row (loadNodes).
   */
  private nodeRows(
    id: string,
    node: NodeRecord,
    previous: NodeRecord | null,
    nodeRows: [string, string][],
    rows: [string, number, string][],
  ): void {
    const { invocations, ...rest } = node;
    if (invocations.length <= 1) {
      if (previous !== null || !isDeepPending(node)) {
        nodeRows.push([id, JSON.stringify(node)]);
      }
      if (this.invocationRows.has(id)) {
        // Rows it had are left over: deleted, so that none keeps a value an erasure removed.
        this.sql.exec("DELETE FROM invocations WHERE node = ?", id);
      }
      return;
    }
    nodeRows.push([id, JSON.stringify(rest)]);
    const moved = (previous?.invocations.length ?? 0) <= 1;
    if (this.invocationRows.has(id) && (moved || (previous?.invocations.length ?? 0) > invocations.length)) {
      this.sql.exec("DELETE FROM invocations WHERE node = ? AND idx >= ?", id, invocations.length);
    }
    // Never taken out of the set: a transaction that fails takes back what it wrote, not the set.
    this.invocationRows.add(id);
    invocations.forEach((invocation, index) => {
      if (moved || previous?.invocations[index] !== invocation) {
        rows.push([id, index, JSON.stringify(invocation)]);
      }
    });
  }

  /** Appends signed entries, each stored as the text it was signed into (lib/journal `signEntryText`). */
  appendJournal(entries: readonly Pick<SignedEntryText, "seq" | "text">[]): void {
    if (entries.length > 0) {
      this.journalTable().append(entries);
    }
  }

  /** The journal's table; throws when the object holds no run (a caller's bug: nothing writes a journal before `create`). */
  private journalTable(): JournalTable {
    if (this.journalRows === null) {
      throw new Error("the run's journal is read or written before the run exists");
    }
    return this.journalRows;
  }

  /**
   * Inserts rows with few statements: rows go as one JSON array bound to
   * `json_each` (each value a JSON string or number, so SQLite never
   * re-renders stored JSON), in batches of at most BATCH_CHARS; a row larger
   * than that goes on its own with plain parameters.
   */
  private insertRows(insert: string, rows: readonly (readonly (string | number)[])[], onConflict = ""): void {
    const width = rows[0]?.length ?? 0;
    const single = `${insert} VALUES (${Array.from({ length: width }, () => "?").join(", ")}) ${onConflict}`;
    // `WHERE true` lets SQLite read an ON CONFLICT clause after a SELECT.
    const batch = `${insert} SELECT ${Array.from({ length: width }, (_, column) => `value ->> ${column}`).join(", ")} FROM json_each(?) WHERE true ${onConflict}`;
    let pending: (readonly (string | number)[])[] = [];
    let pendingChars = 0;
    const flush = () => {
      if (pending.length === 1) {
        this.sql.exec(single, ...(pending[0] ?? []));
      } else if (pending.length > 1) {
        this.sql.exec(batch, JSON.stringify(pending));
      }
      pending = [];
      pendingChars = 0;
    };
    for (const row of rows) {
      const chars = row.reduce<number>((sum, cell) => sum + (typeof cell === "string" ? cell.length : 16), 0);
      if (pendingChars + chars > BATCH_CHARS) {
        flush();
      }
      pending.push(row);
      pendingChars += chars;
    }
    flush();
  }

  /**
   * Records journal entries decided but not signed yet, in the transaction
   * that commits their decision (see Coordinator.applyNow): a restart before
   * they are signed finds them here and signs them first.
   */
  putUnsigned(entries: readonly UnsignedEntry[]): void {
    // One row a commit, as the journal (journal-store.ts): a JSON array of the entries, keyed by the first seq.
    const texts = entries.map((entry) => ({ seq: entry.seq, text: JSON.stringify(entry) }));
    this.insertRows(
      "INSERT INTO journal_unsigned (seq, fields)",
      pagesOf(texts).map((page) => [page[0]?.seq ?? 0, `[${page.map((entry) => entry.text).join(",")}]`]),
    );
  }

  /** The entries committed unsigned, in seq order: a row holds a page of them, or one (as stored before pages). */
  unsigned(): UnsignedEntry[] {
    return this.sql
      .exec<{ fields: string }>("SELECT fields FROM journal_unsigned ORDER BY seq")
      .toArray()
      .flatMap((row) => {
        const fields: unknown = JSON.parse(row.fields);
        return (Array.isArray(fields) ? fields : [fields]).map((entry) => UnsignedEntry.parse(entry));
      });
  }

  /** Appends signed entries and forgets their unsigned drafts. Call inside a storage transaction. */
  appendSigned(entries: readonly Pick<SignedEntryText, "seq" | "text">[]): void {
    this.appendJournal(entries);
    const last = entries.at(-1);
    if (last) {
      this.sql.exec("DELETE FROM journal_unsigned WHERE seq <= ?", last.seq);
    }
  }

  /** The journal rows whose entries hold sealed values (they have `$salt`), in seq order: what an erasure rewrites. */
  sealedRows(): { seq: number; entry: string }[] {
    return this.journalTable().sealed();
  }

  /**
   * Rewrites journal rows in place: an erasure's, each entry without its
   * sealed values (what is signed is unchanged). Call inside a storage transaction.
   */
  rewriteJournal(rows: readonly { seq: number; entry: string }[]): void {
    this.journalTable().rewrite(rows);
  }

  /** Stages the run's index row, replacing any older one, written or not. Call inside the commit's transaction. */
  stageIndexRow(row: RunIndexRow): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO index_outbox (k, seq, row, written, attempts, retry_at) VALUES (0, ?, ?, 0, 0, NULL)",
      row.seq,
      JSON.stringify(row),
    );
  }

  stagedIndexRow(): StagedIndexRow | null {
    if (!this.hasTables) {
      return null; // An alarm of an object that never held a run.
    }
    const staged = this.sql
      .exec<{ row: string; attempts: number; retry_at: number | null }>(
        "SELECT row, attempts, retry_at FROM index_outbox WHERE written = 0",
      )
      .toArray()[0];
    return staged
      ? { row: RunIndexRow.parse(JSON.parse(staged.row)), attempts: staged.attempts, retry_at: staged.retry_at }
      : null;
  }

  indexRowWritten(seq: number): void {
    if (!this.hasTables) {
      return; // The run was deleted while its row was being written.
    }
    this.sql.exec("UPDATE index_outbox SET written = 1, attempts = 0, retry_at = NULL WHERE seq = ?", seq);
  }

  indexRowFailed(seq: number, attempts: number, retryAt: number): void {
    if (!this.hasTables) {
      return;
    }
    this.sql.exec(
      "UPDATE index_outbox SET attempts = ?, retry_at = ? WHERE seq = ? AND written = 0",
      attempts,
      retryAt,
      seq,
    );
  }

  /**
   * The OTLP export's cursor (coordinator/telemetry-export.ts). Its table is
   * made by the first read, so a deployment that exports nothing has none.
   */
  exportCursor(): ExportCursor | null {
    if (!this.hasTables) {
      return null;
    }
    this.sql.exec(EXPORT_TABLE);
    const row = this.sql
      .exec<{ seq: number; state: string; attempts: number; retry_at: number | null; dropped: number }>(
        "SELECT seq, state, attempts, retry_at, dropped FROM otel_outbox",
      )
      .toArray()[0];
    if (row === undefined) {
      return { seq: 0, state: emptyFoldState(), attempts: 0, retry_at: null, dropped: 0 };
    }
    const state = SpanFoldState.parse(JSON.parse(row.state));
    return { seq: row.seq, state, attempts: row.attempts, retry_at: row.retry_at, dropped: row.dropped };
  }

  lastJournalSeq(): number {
    if (!this.hasTables) {
      return 0; // The run was deleted (drop): nothing is left to export.
    }
    return this.journalTable().lastSeq();
  }

  saveExportCursor(cursor: ExportCursor): void {
    if (!this.hasTables) {
      return;
    }
    this.sql.exec(
      "INSERT OR REPLACE INTO otel_outbox (k, seq, state, attempts, retry_at, dropped) VALUES (0, ?, ?, ?, ?, ?)",
      cursor.seq,
      JSON.stringify(cursor.state),
      cursor.attempts,
      cursor.retry_at,
      cursor.dropped,
    );
  }

  /**
   * The latest attestation: the journal's last entry, unless a compensation
   * section was opened after it (docs/journal.md), where it is the last `attest`.
   */
  lastAttestation(): JournalEntry | undefined {
    const entry = this.journalTable().lastAttestation();
    return entry === undefined ? undefined : JournalEntry.parse(entry);
  }

  /**
   * Journal entries after `afterSeq`. Entries are read back as written: only
   * appendJournal writes them, with entries signEntry built and checked,
   * and every reader can verify each one against its hash and signature;
   * checking them against their schema again on every read (a run's journal
   * is read whole by each client that follows it) cost more than the run.
   */
  journal(afterSeq = 0, limit = 10_000): JournalEntry[] {
    if (!this.hasTables) {
      return []; // The run was deleted (drop) while a long poll waited for entries.
    }
    return this.journalTable().read(afterSeq, limit);
  }

  private putJson(key: string, value: unknown): void {
    this.putText(key, JSON.stringify(value));
  }

  private putText(key: string, text: string): void {
    if (text.length <= CHUNK_CHARS && this.chunks.get(key) === 1) {
      // One chunk before and after (the usual case): the row is rewritten in place.
      this.sql.exec("UPDATE blobs SET data = ? WHERE key = ? AND chunk = 0", text, key);
      return;
    }
    this.sql.exec("DELETE FROM blobs WHERE key = ?", key);
    let start = 0;
    let chunk = 0;
    do {
      let end = Math.min(start + CHUNK_CHARS, text.length);
      // Never split a surrogate pair: SQLite would store each half as U+FFFD.
      if (end < text.length && isHighSurrogate(text.charCodeAt(end - 1))) {
        end -= 1;
      }
      this.sql.exec("INSERT INTO blobs (key, chunk, data) VALUES (?, ?, ?)", key, chunk, text.slice(start, end));
      start = end;
      chunk += 1;
    } while (start < text.length);
    this.chunks.set(key, chunk);
  }

  private getJson(key: string): unknown {
    const rows = this.sql.exec<{ data: string }>("SELECT data FROM blobs WHERE key = ? ORDER BY chunk", key).toArray();
    this.chunks.set(key, rows.length);
    return rows.length === 0 ? undefined : (JSON.parse(rows.map((row) => row.data).join("")) as unknown);
  }
}

/** Whether `node` is as a new run's node is: pending, never started. */
function isDeepPending(node: NodeRecord): boolean {
  return JSON.stringify(node) === PENDING_NODE;
}

const PENDING_NODE = JSON.stringify(pendingNode());

function isHighSurrogate(code: number): boolean {
  return code >= 0xd800 && code <= 0xdbff;
}
