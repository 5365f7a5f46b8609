import type { Json } from "../schemas/common.ts";
import {
  EventSource,
  type EventRecord,
  type EventTriggers,
  type TriggerStartRecord,
  type WaitRegistration,
} from "../schemas/events.ts";
import type { StoredMatch } from "./match.ts";
import type { PendingDelivery } from "./rounds.ts";
import type { PlannedStart } from "./triggers.ts";

/**
 * An event hub's SQLite, with every statement in one place: the events it
 * keeps for lookback and deduplication, the waits registered at it, and the
 * delivery outbox (one row per event offered to a wait, until the wait's run
 * answers).
 */

/** How long a hub keeps an event: the longest lookback, and the window in which an id is accepted once. */
export const EVENT_RETENTION_MS = 24 * 60 * 60 * 1000;
/** How long after its `expires_at` a hub still keeps a wait (its run times it out itself, from its own alarm). */
export const WAIT_GRACE_MS = 60 * 60 * 1000;

/** A stored event with its place in the hub's order of acceptance. */
export interface StoredEvent {
  seq: number;
  record: EventRecord;
}

/** A live wait as accept matches it. */
export interface StoredWait extends StoredMatch {
  wait_key: string;
  since: number;
}

interface EventRow extends Record<string, SqlStorageValue> {
  seq: number;
  event_id: string;
  name: string;
  data: string;
  received_at: number;
  source: string | null;
}

interface WaitRow extends Record<string, SqlStorageValue> {
  wait_key: string;
  names: string;
  since: number;
  match: string | null;
  input: string | null;
  input_kept: number;
}

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS events (
    seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL,
    data TEXT NOT NULL, received_at INTEGER NOT NULL, source TEXT, UNIQUE (name, event_id))`,
  "CREATE INDEX IF NOT EXISTS events_by_age ON events (received_at)",
  `CREATE TABLE IF NOT EXISTS waits (
    wait_key TEXT PRIMARY KEY, run_id TEXT NOT NULL, names TEXT NOT NULL, since INTEGER NOT NULL,
    expires_at INTEGER, match TEXT, input TEXT, input_kept INTEGER NOT NULL)`,
  "CREATE INDEX IF NOT EXISTS waits_by_expiry ON waits (expires_at)",
  "CREATE TABLE IF NOT EXISTS wait_names (name TEXT NOT NULL, wait_key TEXT NOT NULL, PRIMARY KEY (name, wait_key))",
  `CREATE TABLE IF NOT EXISTS deliveries (
    wait_key TEXT NOT NULL, seq INTEGER NOT NULL, due_at INTEGER NOT NULL, attempts INTEGER NOT NULL,
    PRIMARY KEY (wait_key, seq))`,
  "CREATE INDEX IF NOT EXISTS deliveries_by_seq ON deliveries (seq)",
  "CREATE INDEX IF NOT EXISTS deliveries_by_due ON deliveries (due_at)",
  // Accepted events not yet matched against the catalog's triggers (only the hub of a name's shard 0 writes them).
  "CREATE TABLE IF NOT EXISTS trigger_events (seq INTEGER PRIMARY KEY, due_at INTEGER NOT NULL, attempts INTEGER NOT NULL)",
  // One row per (event, workflow) to start: pending (due_at set) until started or failed for good (due_at null).
  `CREATE TABLE IF NOT EXISTS trigger_starts (
    seq INTEGER NOT NULL, workflow TEXT NOT NULL, version INTEGER NOT NULL, input TEXT,
    status TEXT NOT NULL, due_at INTEGER, attempts INTEGER NOT NULL, run_id TEXT, error TEXT,
    PRIMARY KEY (seq, workflow))`,
  "CREATE INDEX IF NOT EXISTS trigger_starts_by_due ON trigger_starts (due_at)",
  // Events pruned whose data held blob references: their `event:<id>` holding is still to be given up.
  "CREATE TABLE IF NOT EXISTS blob_releases (event_id TEXT PRIMARY KEY, due_at INTEGER NOT NULL, attempts INTEGER NOT NULL)",
];

/** Waits whose `expires_at` is older than the given time. */
const EXPIRED_WAITS = "SELECT wait_key FROM waits WHERE expires_at IS NOT NULL AND expires_at <= ?";

export class HubStore {
  constructor(private readonly sql: SqlStorage) {
    for (const statement of SCHEMA) {
      sql.exec(statement);
    }
    // Hubs created before events had a source: their table gains the column (null: sent to POST /v1/events).
    const columns = sql.exec<{ name: string }>("SELECT name FROM pragma_table_info('events')").toArray();
    if (!columns.some((column) => column.name === "source")) {
      sql.exec("ALTER TABLE events ADD COLUMN source TEXT");
    }
  }

  /** The event of this name and id that is still retained at `now`, if any. */
  findEvent(name: string, eventId: string, now: number): StoredEvent | undefined {
    const row = this.sql
      .exec<EventRow>("SELECT * FROM events WHERE name = ? AND event_id = ?", name, eventId)
      .toArray()[0];
    return row && isRetained(row.received_at, now) ? toStoredEvent(row) : undefined;
  }

  /** Stores an event (replacing a row of the same name and id kept past retention, which the next prune would delete). */
  insertEvent(record: EventRecord): StoredEvent {
    for (const table of ["deliveries", "trigger_events", "trigger_starts"]) {
      this.sql.exec(
        `DELETE FROM ${table} WHERE seq IN (SELECT seq FROM events WHERE name = ? AND event_id = ?)`,
        record.name,
        record.event_id,
      );
    }
    this.sql.exec("DELETE FROM events WHERE name = ? AND event_id = ?", record.name, record.event_id);
    const row = this.sql
      .exec<{ seq: number }>(
        "INSERT INTO events (event_id, name, data, received_at, source) VALUES (?, ?, ?, ?, ?) RETURNING seq",
        record.event_id,
        record.name,
        JSON.stringify(record.data),
        record.received_at,
        record.source === undefined ? null : JSON.stringify(record.source),
      )
      .one();
    return { seq: row.seq, record };
  }

  /**
   * The waits listening for `name`: every one the hub still holds. Neither
   * `since` nor `expires_at` is compared with the hub's clock here: a wait
   * registered before an event was accepted began before it (whatever the
   * clocks of the machines say), and whether a wait has timed out is its
   * run's to say (it answers `not_waiting`).
   */
  waitsFor(name: string): StoredWait[] {
    return this.sql
      .exec<WaitRow>("SELECT w.* FROM wait_names n JOIN waits w ON w.wait_key = n.wait_key WHERE n.name = ?", name)
      .toArray()
      .map(toStoredWait);
  }

  /** Whether any wait is registered here: an accept with none writes no delivery. */
  hasWaits(): boolean {
    return this.sql.exec("SELECT 1 FROM waits LIMIT 1").toArray().length > 0;
  }

  /** Offers an event to a wait (once: the same pair again changes nothing). */
  addDelivery(waitKey: string, seq: number, now: number): void {
    this.sql.exec(
      "INSERT OR IGNORE INTO deliveries (wait_key, seq, due_at, attempts) VALUES (?, ?, ?, 0)",
      waitKey,
      seq,
      now,
    );
  }

  /** Stores a wait unless its key is stored already; answers the stored one either way. */
  registerWait(
    wait: WaitRegistration,
    input: { text: string | null; kept: boolean },
  ): StoredWait & { names: string[] } {
    const stored = this.sql.exec<WaitRow>("SELECT * FROM waits WHERE wait_key = ?", wait.wait_key).toArray()[0];
    if (stored) {
      return { ...toStoredWait(stored), names: JSON.parse(stored.names) as string[] };
    }
    this.sql.exec(
      `INSERT INTO waits (wait_key, run_id, names, since, expires_at, match, input, input_kept)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
      wait.wait_key,
      wait.run_id,
      JSON.stringify(wait.names),
      wait.since,
      wait.expires_at,
      wait.match ?? null,
      input.text,
      input.kept ? 1 : 0,
    );
    for (const name of new Set(wait.names)) {
      this.sql.exec("INSERT OR IGNORE INTO wait_names (name, wait_key) VALUES (?, ?)", name, wait.wait_key);
    }
    return {
      wait_key: wait.wait_key,
      since: wait.since,
      match: wait.match ?? null,
      input: input.text === null ? undefined : wait.input,
      inputKept: input.kept,
      names: wait.names,
    };
  }

  /** Events of these names received at or after `since` and still retained at `now`, oldest first, read lazily. */
  *eventsSince(names: readonly string[], since: number, now: number): Generator<StoredEvent> {
    const marks = names.map(() => "?").join(", ");
    const cursor = this.sql.exec<EventRow>(
      `SELECT * FROM events WHERE name IN (${marks}) AND received_at >= ? ORDER BY seq`,
      ...names,
      since,
    );
    for (const row of cursor) {
      if (isRetained(row.received_at, now)) {
        yield toStoredEvent(row);
      }
    }
  }

  /** Forgets a wait and everything offered to it. */
  deleteWait(waitKey: string): void {
    this.sql.exec("DELETE FROM deliveries WHERE wait_key = ?", waitKey);
    this.sql.exec("DELETE FROM wait_names WHERE wait_key = ?", waitKey);
    this.sql.exec("DELETE FROM waits WHERE wait_key = ?", waitKey);
  }

  /**
   * The oldest pending delivery of each wait (the only one a round may send
   * it), those due soonest first, at most `limit`.
   */
  pendingHeads(limit: number): PendingDelivery[] {
    return this.sql
      .exec<PendingDelivery & Record<string, SqlStorageValue>>(
        `SELECT d.wait_key, w.run_id, d.seq, d.due_at, d.attempts
         FROM deliveries d JOIN waits w ON w.wait_key = d.wait_key
         WHERE d.seq = (SELECT MIN(o.seq) FROM deliveries o WHERE o.wait_key = d.wait_key)
         ORDER BY d.due_at, d.seq LIMIT ?`,
        limit,
      )
      .toArray();
  }

  /** The event of a delivery (undefined once pruned). */
  eventAt(seq: number): EventRecord | undefined {
    const row = this.sql.exec<EventRow>("SELECT * FROM events WHERE seq = ?", seq).toArray()[0];
    return row ? toStoredEvent(row).record : undefined;
  }

  deleteDelivery(waitKey: string, seq: number): void {
    this.sql.exec("DELETE FROM deliveries WHERE wait_key = ? AND seq = ?", waitKey, seq);
  }

  /** Makes a delivery due at `dueAt`, counting `attempts` failures so far. */
  reschedule(waitKey: string, seq: number, dueAt: number, attempts: number): void {
    this.sql.exec(
      "UPDATE deliveries SET due_at = ?, attempts = ? WHERE wait_key = ? AND seq = ?",
      dueAt,
      attempts,
      waitKey,
      seq,
    );
  }

  /**
   * Deletes events past retention and waits past their expiry and grace, with
   * their deliveries. Both bounds are inclusive, so an alarm set for the
   * moment {@link nextDueAt} names always finds what it was set for.
   */
  prune(now: number): void {
    const cutoff = now - EVENT_RETENTION_MS;
    // An event whose data holds blob references gives up its holding once it is forgotten (blobs/store.ts).
    this.sql.exec(
      `INSERT OR IGNORE INTO blob_releases (event_id, due_at, attempts)
         SELECT event_id, ?, 0 FROM events WHERE received_at <= ? AND instr(data, '"$blob":"sha256:') > 0`,
      now,
      cutoff,
    );
    for (const table of ["deliveries", "trigger_events", "trigger_starts"]) {
      this.sql.exec(`DELETE FROM ${table} WHERE seq IN (SELECT seq FROM events WHERE received_at <= ?)`, cutoff);
    }
    this.sql.exec("DELETE FROM events WHERE received_at <= ?", cutoff);
    const expiry = now - WAIT_GRACE_MS;
    this.sql.exec(`DELETE FROM deliveries WHERE wait_key IN (${EXPIRED_WAITS})`, expiry);
    this.sql.exec(`DELETE FROM wait_names WHERE wait_key IN (${EXPIRED_WAITS})`, expiry);
    this.sql.exec("DELETE FROM waits WHERE expires_at IS NOT NULL AND expires_at <= ?", expiry);
  }

  /** When the next delivery, trigger work or prune is due, or null when the hub holds nothing that will need one. */
  nextDueAt(): number | null {
    return earliest([this.nextDeliveryAt(), this.nextTriggerAt(), this.nextPruneAt(), this.nextReleaseAt()]);
  }

  /** When the next release of a pruned event's blobs is due, or null when none is pending. */
  nextReleaseAt(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(due_at) AS at FROM blob_releases").one().at;
  }

  /** Pruned events whose blobs are due to be released, at most `limit`. */
  dueReleases(now: number, limit: number): { event_id: string; attempts: number }[] {
    return this.sql
      .exec<{ event_id: string; attempts: number }>(
        "SELECT event_id, attempts FROM blob_releases WHERE due_at <= ? ORDER BY due_at LIMIT ?",
        now,
        limit,
      )
      .toArray();
  }

  /** A release done (`retryAt` null), or failed and due again at `retryAt`. */
  settleRelease(eventId: string, retryAt: number | null): void {
    if (retryAt === null) {
      this.sql.exec("DELETE FROM blob_releases WHERE event_id = ?", eventId);
    } else {
      this.sql.exec(
        "UPDATE blob_releases SET due_at = ?, attempts = attempts + 1 WHERE event_id = ?",
        retryAt,
        eventId,
      );
    }
  }

  /** When the next trigger match or start may run, or null when none is pending. */
  nextTriggerAt(): number | null {
    return this.sql
      .exec<{ at: number | null }>(
        `SELECT MIN(at) AS at FROM (SELECT MIN(due_at) AS at FROM trigger_events
           UNION ALL SELECT MIN(due_at) AS at FROM trigger_starts)`,
      )
      .one().at;
  }

  /** When the next pending delivery may be sent, or null when none is pending. */
  nextDeliveryAt(): number | null {
    return this.sql.exec<{ at: number | null }>("SELECT MIN(due_at) AS at FROM deliveries").one().at;
  }

  /** When the next event passes retention or wait its grace, or null when the hub holds neither. */
  nextPruneAt(): number | null {
    const row = this.sql
      .exec<{ event: number | null; wait: number | null }>(
        "SELECT (SELECT MIN(received_at) FROM events) AS event, (SELECT MIN(expires_at) FROM waits) AS wait",
      )
      .one();
    return earliest([
      row.event === null ? null : row.event + EVENT_RETENTION_MS,
      row.wait === null ? null : row.wait + WAIT_GRACE_MS,
    ]);
  }
}

/** The trigger outbox of a hub (events/triggers.ts): events to match against triggers, and runs to start. */
export class TriggerOutbox {
  constructor(private readonly sql: SqlStorage) {}

  /** An accepted event to match against its name's triggers. */
  addEvent(seq: number, now: number): void {
    this.sql.exec("INSERT OR IGNORE INTO trigger_events (seq, due_at, attempts) VALUES (?, ?, 0)", seq, now);
  }

  /**
   * Due events to match, oldest first, at most `limit` and of at most
   * `maxNames` names (one hub may hold two names: `a#1` is also shard 1 of
   * `a`), leased until `leaseUntil`, with their records (a pruned event's row
   * is dropped). `more`: a due event was left for the next round.
   */
  takeEvents(
    now: number,
    limits: { events: number; names: number },
    leaseUntil: number,
  ): { taken: TakenEvent[]; more: boolean } {
    const rows = this.sql
      .exec<{ seq: number; attempts: number }>(
        "SELECT seq, attempts FROM trigger_events WHERE due_at <= ? ORDER BY seq LIMIT ?",
        now,
        limits.events + 1,
      )
      .toArray();
    const names = new Set<string>();
    const taken: TakenEvent[] = [];
    for (const { seq, attempts } of rows.slice(0, limits.events)) {
      const event = this.eventAt(seq);
      if (event === undefined) {
        this.sql.exec("DELETE FROM trigger_events WHERE seq = ?", seq);
      } else if (names.has(event.name) || names.size < limits.names) {
        names.add(event.name);
        this.sql.exec("UPDATE trigger_events SET due_at = ? WHERE seq = ?", leaseUntil, seq);
        taken.push({ seq, attempts, event });
      }
    }
    return { taken, more: rows.length > taken.length };
  }

  /** An event matched: its starts replace it (a start already recorded for the pair is kept). */
  expand(seq: number, starts: readonly PlannedStart[], now: number): void {
    for (const start of starts) {
      this.sql.exec(
        `INSERT OR IGNORE INTO trigger_starts (seq, workflow, version, input, status, due_at, attempts, error)
           VALUES (?, ?, ?, ?, ?, ?, 0, ?)`,
        seq,
        start.workflow,
        start.version,
        start.error === undefined ? JSON.stringify(start.input) : null,
        start.error === undefined ? "pending" : "failed",
        start.error === undefined ? now : null,
        start.error ?? null,
      );
    }
    this.sql.exec("DELETE FROM trigger_events WHERE seq = ?", seq);
  }

  /** Matching an event failed (the catalog was unreachable): try again at `at`. */
  retryEvent(seq: number, at: number, attempts: number): void {
    this.sql.exec("UPDATE trigger_events SET due_at = ?, attempts = ? WHERE seq = ?", at, attempts, seq);
  }

  /** Due starts, oldest event first, leased until `leaseUntil`, with their events. */
  takeStarts(now: number, limit: number, leaseUntil: number): (PendingStart & { event: EventRecord })[] {
    const rows = this.sql
      .exec<PendingStart & Record<string, SqlStorageValue>>(
        `SELECT seq, workflow, version, input, attempts FROM trigger_starts
           WHERE due_at IS NOT NULL AND due_at <= ? ORDER BY due_at, seq LIMIT ?`,
        now,
        limit,
      )
      .toArray();
    return rows.flatMap((row) => {
      const event = this.eventAt(row.seq);
      if (event === undefined) {
        this.sql.exec("DELETE FROM trigger_starts WHERE seq = ?", row.seq);
        return [];
      }
      this.sql.exec(
        "UPDATE trigger_starts SET due_at = ? WHERE seq = ? AND workflow = ?",
        leaseUntil,
        row.seq,
        row.workflow,
      );
      return [{ ...row, event }];
    });
  }

  /** A start's outcome: started (its run), failed for good (why), or tried again at `retryAt`. */
  settle(
    start: Pick<PendingStart, "seq" | "workflow">,
    outcome:
      | { status: "started"; run_id: string }
      | { status: "failed"; error: string }
      | { status: "retry"; at: number; attempts: number; error: string },
  ): void {
    const { seq, workflow } = start;
    if (outcome.status === "retry") {
      this.sql.exec(
        "UPDATE trigger_starts SET due_at = ?, attempts = ?, error = ? WHERE seq = ? AND workflow = ?",
        outcome.at,
        outcome.attempts,
        outcome.error,
        seq,
        workflow,
      );
      return;
    }
    this.sql.exec(
      "UPDATE trigger_starts SET status = ?, due_at = NULL, run_id = ?, error = ? WHERE seq = ? AND workflow = ?",
      outcome.status,
      outcome.status === "started" ? outcome.run_id : null,
      outcome.status === "failed" ? outcome.error : null,
      seq,
      workflow,
    );
  }

  /**
   * What the triggers of an event (by name and id) started: whether it is
   * matched against the triggers yet, and each start. Null when the hub does
   * not hold the event.
   */
  startsOf(name: string, eventId: string): EventTriggers | null {
    const event = this.sql
      .exec<{ seq: number }>("SELECT seq FROM events WHERE name = ? AND event_id = ?", name, eventId)
      .toArray()[0];
    if (event === undefined) {
      return null;
    }
    const matching = this.sql.exec("SELECT 1 FROM trigger_events WHERE seq = ?", event.seq).toArray().length > 0;
    const rows = this.sql
      .exec<StartRow>("SELECT * FROM trigger_starts WHERE seq = ? ORDER BY workflow", event.seq)
      .toArray();
    return { matched: !matching, starts: rows.map(toStartRecord) };
  }

  private eventAt(seq: number): EventRecord | undefined {
    const row = this.sql.exec<EventRow>("SELECT * FROM events WHERE seq = ?", seq).toArray()[0];
    return row ? toStoredEvent(row).record : undefined;
  }
}

/** An accepted event a round matches against its name's triggers. */
export interface TakenEvent {
  seq: number;
  /** Matches that failed so far (the catalog unreachable). */
  attempts: number;
  event: EventRecord;
}

/** A start to make, as a round takes it. */
export interface PendingStart {
  seq: number;
  workflow: string;
  version: number;
  /** The run input's JSON. */
  input: string;
  attempts: number;
}

interface StartRow extends Record<string, SqlStorageValue> {
  workflow: string;
  version: number;
  status: string;
  attempts: number;
  run_id: string | null;
  error: string | null;
}

function toStartRecord(row: StartRow): TriggerStartRecord {
  const status = row.status === "started" || row.status === "failed" ? row.status : "pending";
  return {
    workflow: row.workflow,
    version: row.version,
    status,
    attempts: row.attempts,
    ...(row.run_id === null ? {} : { run_id: row.run_id }),
    ...(row.error === null ? {} : { error: row.error }),
  };
}

function earliest(times: (number | null)[]): number | null {
  const known = times.filter((time): time is number => time !== null);
  return known.length === 0 ? null : Math.min(...known);
}

/** Whether an event received at `receivedAt` is still kept at `now`: for less than {@link EVENT_RETENTION_MS}. */
function isRetained(receivedAt: number, now: number): boolean {
  return now - receivedAt < EVENT_RETENTION_MS;
}

function toStoredEvent(row: EventRow): StoredEvent {
  return {
    seq: row.seq,
    record: {
      event_id: row.event_id,
      name: row.name,
      // Written by insertEvent from a parsed JSON value.
      data: JSON.parse(row.data) as Json,
      received_at: row.received_at,
      ...(row.source === null ? {} : { source: EventSource.parse(JSON.parse(row.source)) }),
    },
  };
}

function toStoredWait(row: WaitRow): StoredWait {
  return {
    wait_key: row.wait_key,
    since: row.since,
    match: row.match,
    input: row.input === null ? undefined : (JSON.parse(row.input) as Json),
    inputKept: row.input_kept === 1,
  };
}
