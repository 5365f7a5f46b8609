import { JournalEntry, NodeRecord, RunRecord, RunSnapshot } from "../schemas/index.ts";
import type { RunState } from "./decide.ts";

/**
 * Row ↔ record mapping for one run, with all of the coordinator's SQL in one
 * place. The run record, the snapshot and each node are separate rows, so an
 * event rewrites only what it changed; rows are parsed with their schemas
 * when read back.
 */
export class RunStore {
  private readonly sql: SqlStorage;

  constructor(sql: SqlStorage) {
    this.sql = sql;
    sql.exec(`CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS nodes (id TEXT PRIMARY KEY, data TEXT NOT NULL);
      CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL);`);
  }

  /** The run, or null when this object holds none yet. */
  load(): { state: RunState; snapshot: RunSnapshot; lastHash: string | null } | null {
    const meta = new Map(this.sql.exec<{ key: string; value: string }>("SELECT key, value FROM meta").toArray().map((row) => [row.key, row.value]));
    const record = meta.get("record");
    const snapshot = meta.get("snapshot");
    if (record === undefined || snapshot === undefined) {
      return null;
    }
    const nodes: Record<string, NodeRecord> = {};
    for (const row of this.sql.exec<{ id: string; data: string }>("SELECT id, data FROM nodes")) {
      nodes[row.id] = NodeRecord.parse(JSON.parse(row.data));
    }
    const last = this.sql.exec<{ entry: string }>("SELECT entry FROM journal ORDER BY seq DESC LIMIT 1").toArray()[0];
    return {
      state: { record: RunRecord.parse(JSON.parse(record)), nodes },
      snapshot: RunSnapshot.parse(JSON.parse(snapshot)),
      lastHash: last ? JournalEntry.parse(JSON.parse(last.entry)).hash : null,
    };
  }

  /** Writes a new run. Call inside a storage transaction with its first journal entries. */
  create(state: RunState, snapshot: RunSnapshot): void {
    this.sql.exec("INSERT INTO meta (key, value) VALUES ('snapshot', ?)", JSON.stringify(snapshot));
    this.save(null, state);
  }

  /** Writes what changed between `before` and `after`. Call inside a storage transaction. */
  save(before: RunState | null, after: RunState): void {
    this.sql.exec("INSERT OR REPLACE INTO meta (key, value) VALUES ('record', ?)", JSON.stringify(after.record));
    for (const [id, node] of Object.entries(after.nodes)) {
      if (before?.nodes[id] !== node) {
        this.sql.exec("INSERT OR REPLACE INTO nodes (id, data) VALUES (?, ?)", id, JSON.stringify(node));
      }
    }
  }

  appendJournal(entries: readonly JournalEntry[]): void {
    for (const entry of entries) {
      this.sql.exec("INSERT INTO journal (seq, entry) VALUES (?, ?)", entry.seq, JSON.stringify(entry));
    }
  }

  journal(afterSeq = 0): JournalEntry[] {
    return this.sql
      .exec<{ entry: string }>("SELECT entry FROM journal WHERE seq > ? ORDER BY seq", afterSeq)
      .toArray()
      .map((row) => JournalEntry.parse(JSON.parse(row.entry)));
  }
}
