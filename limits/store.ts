import { LimitConfig } from "../schemas/limits.ts";
import {
  emptyState,
  type GrantNotice,
  type HeldSlot,
  type LimitState,
  type Waiter,
  type WindowEntry,
} from "./decide.ts";

/**
 * A limit object's SQLite, with every statement in one place: the slots held,
 * the queue, the grant notifications still to send, the entries of the two
 * sliding windows, the latest releases, and one row of the rest (which limit
 * and key the object is, the definition last seen, the pause, the queue's
 * arrival counter).
 *
 * The object reads it all once, keeps it in memory, and writes back only the
 * rows whose record changed (decide keeps the identity of what it leaves).
 */

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS holders (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, priority INTEGER NOT NULL,
    granted_at INTEGER NOT NULL, lease_until INTEGER, used_at INTEGER)`,
  `CREATE TABLE IF NOT EXISTS waiters (
    id TEXT PRIMARY KEY, run_id TEXT NOT NULL, priority INTEGER NOT NULL,
    enqueued_at INTEGER NOT NULL, lease_ms INTEGER, seq INTEGER NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS notifications (
    holder_id TEXT PRIMARY KEY, run_id TEXT NOT NULL, lease_until INTEGER,
    due_at INTEGER NOT NULL, attempts INTEGER NOT NULL)`,
  // One row per window entry: a grant or a release writes the entry it adds or grows, not the window.
  `CREATE TABLE IF NOT EXISTS windows (
    kind TEXT NOT NULL, at INTEGER NOT NULL, amount INTEGER NOT NULL, PRIMARY KEY (kind, at))`,
  // The latest releases, oldest first (by rowid): a release sent again counts its tokens once.
  "CREATE TABLE IF NOT EXISTS releases (id TEXT PRIMARY KEY)",
  `CREATE TABLE IF NOT EXISTS config (
    one INTEGER PRIMARY KEY CHECK (one = 1), limit_id TEXT NOT NULL, key TEXT NOT NULL,
    definition TEXT, paused_until INTEGER NOT NULL, next_seq INTEGER NOT NULL)`,
];

/** Which limit and key an object counts for (stored on its first acquire). */
export interface LimitIdentity {
  limit: string;
  key: string;
}

interface ConfigRow extends Record<string, SqlStorageValue> {
  limit_id: string;
  key: string;
  definition: string | null;
  paused_until: number;
  next_seq: number;
}

type Row<T> = T & Record<string, SqlStorageValue>;
type WindowKind = "rate" | "tokens";

export class LimitStore {
  constructor(private readonly sql: SqlStorage) {
    for (const statement of SCHEMA) {
      sql.exec(statement);
    }
  }

  /** The whole state, and the object's limit and key (null before its first acquire). */
  load(): { state: LimitState; identity: LimitIdentity | null } {
    const row = this.sql.exec<ConfigRow>("SELECT * FROM config").toArray()[0];
    const windowOf = (kind: WindowKind) =>
      this.sql.exec<Row<WindowEntry>>("SELECT at, amount FROM windows WHERE kind = ? ORDER BY at", kind).toArray();
    const state: LimitState = {
      ...emptyState(),
      holders: this.sql.exec<Row<HeldSlot>>("SELECT * FROM holders ORDER BY granted_at, id").toArray(),
      waiters: this.sql.exec<Row<Waiter>>("SELECT * FROM waiters ORDER BY priority DESC, seq").toArray(),
      notices: this.sql.exec<Row<GrantNotice>>("SELECT * FROM notifications ORDER BY due_at").toArray(),
      rate: windowOf("rate"),
      tokens: windowOf("tokens"),
      released: this.sql
        .exec<{ id: string }>("SELECT id FROM releases ORDER BY rowid")
        .toArray()
        .map((row) => row.id),
    };
    if (row === undefined) {
      return { state, identity: null };
    }
    return {
      state: {
        ...state,
        config: row.definition === null ? null : LimitConfig.parse(JSON.parse(row.definition)),
        paused_until: row.paused_until,
        next_seq: row.next_seq,
      },
      identity: { limit: row.limit_id, key: row.key },
    };
  }

  /** Writes what changed from `before` to `after` (call it inside one transaction). */
  save(before: LimitState, after: LimitState, identity: LimitIdentity): void {
    this.saveRows(
      before.holders,
      after.holders,
      (slot) => slot.id,
      "holders",
      "id",
      (slot) => this.putHolder(slot),
    );
    this.saveRows(
      before.waiters,
      after.waiters,
      (waiter) => waiter.id,
      "waiters",
      "id",
      (waiter) => this.putWaiter(waiter),
    );
    this.saveRows(
      before.notices,
      after.notices,
      (notice) => notice.holder_id,
      "notifications",
      "holder_id",
      (n) => this.putNotice(n),
    );
    this.saveWindow("rate", before.rate, after.rate);
    this.saveWindow("tokens", before.tokens, after.tokens);
    this.saveRows(
      before.released,
      after.released,
      (id) => id,
      "releases",
      "id",
      (id) => this.sql.exec("INSERT OR REPLACE INTO releases (id) VALUES (?)", id),
    );
    if (
      before.config !== after.config ||
      before.paused_until !== after.paused_until ||
      before.next_seq !== after.next_seq
    ) {
      this.putConfig(after, identity);
    }
  }

  /** Records which limit and key the object is, before anything else is stored. */
  saveIdentity(state: LimitState, identity: LimitIdentity): void {
    this.putConfig(state, identity);
  }

  private saveRows<T>(
    before: readonly T[],
    after: readonly T[],
    idOf: (record: T) => string,
    table: string,
    column: string,
    put: (record: T) => void,
  ): void {
    if (before === after) {
      return;
    }
    const old = new Map(before.map((record) => [idOf(record), record]));
    for (const record of after) {
      const id = idOf(record);
      if (old.get(id) !== record) {
        put(record);
      }
      old.delete(id);
    }
    for (const id of old.keys()) {
      this.sql.exec(`DELETE FROM ${table} WHERE ${column} = ?`, id);
    }
  }

  private putHolder(slot: HeldSlot): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO holders (id, run_id, priority, granted_at, lease_until, used_at) VALUES (?, ?, ?, ?, ?, ?)",
      slot.id,
      slot.run_id,
      slot.priority,
      slot.granted_at,
      slot.lease_until,
      slot.used_at,
    );
  }

  private putWaiter(waiter: Waiter): void {
    this.sql.exec(
      "INSERT OR REPLACE INTO waiters (id, run_id, priority, enqueued_at, lease_ms, seq) VALUES (?, ?, ?, ?, ?, ?)",
      waiter.id,
      waiter.run_id,
      waiter.priority,
      waiter.enqueued_at,
      waiter.lease_ms,
      waiter.seq,
    );
  }

  private putNotice(notice: GrantNotice): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO notifications (holder_id, run_id, lease_until, due_at, attempts)
         VALUES (?, ?, ?, ?, ?)`,
      notice.holder_id,
      notice.run_id,
      notice.lease_until,
      notice.due_at,
      notice.attempts,
    );
  }

  /** Writes the entries added or grown and deletes those gone (a window's entries have distinct times). */
  private saveWindow(kind: WindowKind, before: readonly WindowEntry[], after: readonly WindowEntry[]): void {
    if (before === after) {
      return;
    }
    const kept = new Set(after);
    for (const entry of before) {
      if (!kept.has(entry)) {
        this.sql.exec("DELETE FROM windows WHERE kind = ? AND at = ?", kind, entry.at);
      }
    }
    const old = new Set(before);
    for (const entry of after) {
      if (!old.has(entry)) {
        this.sql.exec(
          "INSERT OR REPLACE INTO windows (kind, at, amount) VALUES (?, ?, ?)",
          kind,
          entry.at,
          entry.amount,
        );
      }
    }
  }

  private putConfig(state: LimitState, identity: LimitIdentity): void {
    this.sql.exec(
      `INSERT OR REPLACE INTO config (one, limit_id, key, definition, paused_until, next_seq)
         VALUES (1, ?, ?, ?, ?, ?)`,
      identity.limit,
      identity.key,
      state.config === null ? null : JSON.stringify(state.config),
      state.paused_until,
      state.next_seq,
    );
  }
}
