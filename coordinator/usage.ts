/**
 * What a run costs on the platform's meters, counted by its coordinator as it
 * goes (docs/performance.md, "What a step costs"): the calls it makes into
 * Durable Objects and into the executor (Worker invocations), its alarms, the
 * SQLite rows its statements read and write (each cursor's `rowsRead` /
 * `rowsWritten`, what the platform bills) and its database's size.
 *
 * Counting costs next to nothing on the hot path: a statement's cursor is
 * kept in a list and its counters are summed when the usage is read (or when
 * the list grows long), an outgoing call adds one to a number. Counts live in
 * memory: they cover what this instance of the object did since it started
 * (an evicted object starts again from zero).
 *
 * When the meter is on and a commit ends the run, one log line gives the
 * usage so far: `{ "msg": "run usage", "run_id", "status", ...RunUsage }`
 * (off, nothing is counted, and a line of zeros would say a run cost
 * nothing: none is written). What happens
 * after it (the run index's write to D1 marking its outbox row written, reads
 * of the ended run) is not in it.
 */
import type { RunRecord, RunStatus } from "../schemas/run.ts";
import { isTerminal } from "./lifecycle.ts";

/** The counters, as `getStats()` and the run's usage log line give them. */
export interface RunUsage {
  /** Calls this object made into Durable Objects: the catalog, limit objects, event hubs, other runs, itself. */
  objectCalls: number;
  /** Alarm invocations of this object (each one a billed Durable Object request). */
  alarms: number;
  /** Calls into the executor: each one a Worker invocation. */
  executorCalls: number;
  /** SQLite rows read: the statements' cursors, plus one per key-value read. */
  rowsRead: number;
  /** SQLite rows written: the statements' cursors, plus one per `setAlarm` and per key-value write or delete. */
  rowsWritten: number;
  /**
   * The part of `rowsRead` and `rowsWritten` on the run index's outbox (run-index.ts). Staging a row is
   * part of a commit; reading it back and marking it written follow D1's answers, so how many of
   * those a run makes depends on D1's timing. The rest of the rows do not.
   */
  indexRowsRead: number;
  indexRowsWritten: number;
  /** `setAlarm` calls (each billed as one row written, and counted in `rowsWritten`). */
  alarmsSet: number;
  /** The object's SQLite database, in bytes (`ctx.storage.sql.databaseSize`). */
  databaseBytes: number;
}

type Cursor = SqlStorageCursor<Record<string, SqlStorageValue>>;

/** Cursors kept before the oldest half is summed: a cursor is read to its end long before this many more are opened. */
const PENDING_CURSORS = 256;

/** The bindings that are Durable Object namespaces: a call through a stub of one is a billed request. */
const OBJECT_BINDINGS = new Set<string | symbol>([
  "COORDINATOR",
  "CATALOG",
  "EVENT_HUB",
  "SCHEDULE_HUB",
  "LIMITS",
  "SANDBOX",
]);

/** Counts what one Durable Object does on the platform's meters (see the top of this file). */
export class UsageMeter {
  private readonly counts: Omit<RunUsage, "databaseBytes"> = {
    objectCalls: 0,
    alarms: 0,
    executorCalls: 0,
    rowsRead: 0,
    rowsWritten: 0,
    indexRowsRead: 0,
    indexRowsWritten: 0,
    alarmsSet: 0,
  };
  /** Cursors whose rows are not summed yet (a cursor's counters grow while it is iterated). */
  private readonly pending: Cursor[] = [];
  /** Likewise, the statements on the run index's outbox. */
  private readonly indexPending: Cursor[] = [];
  private sqlStorage: SqlStorage | null = null;
  /** The usage when the commit that ended the run was done (what the log line gave), null before. */
  private atEnd: RunUsage | null = null;
  /** Whether the object's storage goes through this meter ({@link state}): only then is there usage to log. */
  private metering = false;

  /** The usage so far. */
  read(): RunUsage {
    this.sum(this.pending, this.pending.length);
    this.sum(this.indexPending, this.indexPending.length);
    return { ...this.counts, databaseBytes: this.sqlStorage?.databaseSize ?? 0 };
  }

  /** The usage at the end of the commit that ended the run, null while it runs. */
  readAtEnd(): RunUsage | null {
    return this.atEnd === null ? null : { ...this.atEnd };
  }

  /** One alarm invocation of this object. */
  alarmFired(): void {
    this.counts.alarms += 1;
  }

  /**
   * A commit moved the run from `before` (null: it had none) to `after`: logs
   * the usage when that ended it, if this meter counted it.
   */
  logIfEnded(before: RunStatus | null, after: Pick<RunRecord, "run_id" | "status">): void {
    if (this.metering && isTerminal(after.status) && (before === null || !isTerminal(before))) {
      this.atEnd = this.read();
      console.log(JSON.stringify({ msg: "run usage", run_id: after.run_id, status: after.status, ...this.atEnd }));
    }
  }

  /** `ctx` whose `storage` is counted (`storage` below); the rest is the object's own. */
  state<S extends { storage: DurableObjectStorage }>(ctx: S): S {
    this.metering = true;
    return withMembers(ctx, { storage: this.storage(ctx.storage) });
  }

  /** `storage` with its SQL statements, alarms and key-value calls counted. */
  storage(storage: DurableObjectStorage): DurableObjectStorage {
    const sql = this.sql(storage.sql);
    const counts = this.counts;
    return withMembers(storage, {
      sql,
      setAlarm: (at: number | Date, options?: DurableObjectSetAlarmOptions) => {
        counts.alarmsSet += 1;
        counts.rowsWritten += 1;
        return storage.setAlarm(at, options);
      },
      get: (keys: string | string[], options?: DurableObjectGetOptions) => {
        counts.rowsRead += Array.isArray(keys) ? keys.length : 1;
        return storage.get(keys as string[], options);
      },
      put: (entries: string | Record<string, unknown>, value?: unknown, options?: DurableObjectPutOptions) => {
        counts.rowsWritten += typeof entries === "string" ? 1 : Object.keys(entries).length;
        return typeof entries === "string" ? storage.put(entries, value, options) : storage.put(entries, options);
      },
      delete: (keys: string | string[], options?: DurableObjectPutOptions) => {
        counts.rowsWritten += Array.isArray(keys) ? keys.length : 1;
        return storage.delete(keys as string[], options);
      },
    });
  }

  /** `sql` with each statement's rows counted. */
  sql(sql: SqlStorage): SqlStorage {
    this.sqlStorage = sql;
    const exec = (query: string, ...bindings: unknown[]) => {
      const cursor = sql.exec(query, ...bindings);
      const list = query.includes("index_outbox") ? this.indexPending : this.pending;
      if (list.push(cursor) >= PENDING_CURSORS) {
        this.sum(list, PENDING_CURSORS / 2);
      }
      return cursor;
    };
    return withMembers(sql, { exec });
  }

  /**
   * `env` with the calls made through its Durable Object namespaces and its
   * executor binding counted. A stub's `id` and `name` are read as they are;
   * any other member is a method whose call is one request.
   */
  env<E extends object>(env: E): E {
    const counts = this.counts;
    const stub = (target: object, count: () => void) =>
      new Proxy(target, {
        get: (inner, name: string | symbol) => {
          const value: unknown = Reflect.get(inner, name, inner);
          if (typeof name === "symbol" || name === "id" || name === "name" || name === "then") {
            return value;
          }
          return typeof value === "function"
            ? (...args: unknown[]) => {
                count();
                // Reflect.apply: an RPC stub's method would take `.apply` for a remote method of that name.
                return Reflect.apply(value as (...args: unknown[]) => unknown, inner, args);
              }
            : value;
        },
      });
    const namespace = (target: DurableObjectNamespace) =>
      new Proxy(target, {
        get: (inner, name: string | symbol) => {
          const value: unknown = Reflect.get(inner, name, inner);
          if (typeof value !== "function") {
            return value;
          }
          const method = (value as (...args: unknown[]) => unknown).bind(inner);
          return name === "get" || name === "getByName"
            ? (...args: unknown[]) => stub(method(...args) as object, () => (counts.objectCalls += 1))
            : method;
        },
      });
    const wrapped = new Map<string | symbol, unknown>();
    return new Proxy(env, {
      get: (target, name: string | symbol) => {
        const value: unknown = Reflect.get(target, name, target);
        if (value === null || typeof value !== "object" || wrapped.has(name)) {
          return wrapped.get(name) ?? value;
        }
        const metered =
          name === "EXECUTOR"
            ? stub(value, () => (counts.executorCalls += 1))
            : OBJECT_BINDINGS.has(name)
              ? namespace(value as DurableObjectNamespace)
              : value;
        wrapped.set(name, metered);
        return metered;
      },
    });
  }

  /** Adds the rows of the `count` oldest cursors of `list` and forgets them. */
  private sum(list: Cursor[], count: number): void {
    for (const cursor of list.splice(0, count)) {
      this.counts.rowsRead += cursor.rowsRead;
      this.counts.rowsWritten += cursor.rowsWritten;
      if (list === this.indexPending) {
        this.counts.indexRowsRead += cursor.rowsRead;
        this.counts.indexRowsWritten += cursor.rowsWritten;
      }
    }
  }
}

/**
 * `target` with the members of `replaced` in place of its own; its other
 * methods are bound to it (a native method called on a proxy throws), once each.
 */
function withMembers<T extends object>(target: T, replaced: { [K in keyof T]?: unknown }): T {
  const members = new Map<string | symbol, unknown>(Object.entries(replaced));
  return new Proxy(target, {
    get: (inner, name: string | symbol) => {
      if (members.has(name)) {
        return members.get(name);
      }
      const value: unknown = Reflect.get(inner, name, inner);
      if (typeof value !== "function") {
        return value;
      }
      const bound = (value as (...args: unknown[]) => unknown).bind(inner);
      members.set(name, bound);
      return bound;
    },
  });
}
