import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import type { RunState } from "../../coordinator/decide.ts";
import { RUN_TABLES, RunStore } from "../../coordinator/storage.ts";
import {
  importSigningKey,
  signEntryText,
  toJwks,
  verifyJournal,
  type SignedEntryText,
} from "../../lib/journal/index.ts";
import { RunSnapshot, type InvocationRecord } from "../../schemas/index.ts";
import { uniqueId } from "./helpers.ts";

/**
 * RunStore writes a wave of rows with one statement (a JSON array bound to
 * `json_each`), in batches bounded by size, and a row too large for a batch
 * on its own. These tests read back exactly what was written, across batch
 * boundaries and for text that JSON escaping could mangle.
 */

const SNAPSHOT = RunSnapshot.parse({
  workflow: {
    id: "wf",
    version: 1,
    definition: {
      id: "wf",
      nodes: {
        each: {
          task: {
            steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }],
          },
        },
      },
    },
  },
  tasks: {
    each: {
      id: "wf/each",
      version: 0,
      steps: [
        {
          ref: "s",
          action: {
            id: "wf/each/s",
            version: 0,
            kind: "context",
            implementation: { updates: [{ path: "v", expr: "1" }] },
          },
        },
      ],
    },
  },
  workflows: {},
});

/** A new run of SNAPSHOT with this id, as a start creates it. */
const newState = (runId: string, input: RunState["record"]["context"]["input"] = {}): RunState =>
  newRunState(
    {
      run_id: runId,
      snapshot: SNAPSHOT,
      input,
      mode: "auto",
      idempotency_key: null,
      request_hash: "h",
      created_by: "token:t",
      trigger: { kind: "api" },
    },
    1,
  );

/** Text that breaks naive quoting: quotes, backslashes, controls, a surrogate pair, SQL. */
const AWKWARD = `"quoted" \\ back\\slash \n\t\u0000 é 😀 '); DROP TABLE journal; --`;

function invocation(index: number, output: unknown): InvocationRecord {
  return {
    index,
    status: "completed",
    attempts: 1,
    token: `tok_${index}`,
    dispatched_at: 1,
    deadline_at: null,
    retry_at: null,
    input: { item: index },
    output: output as InvocationRecord["output"],
    error: null,
  };
}

function withInvocations(state: RunState, invocations: InvocationRecord[]): RunState {
  const node = state.nodes.each;
  if (!node) {
    throw new Error("no node each");
  }
  return { ...state, nodes: { ...state.nodes, each: { ...node, status: "running", invocations } } };
}

/**
 * Runs `body` with a RunStore over the SQLite storage of a fresh Durable
 * Object whose tables exist (as once its run is created, or in an object an
 * earlier version created).
 */
async function withStore<T>(body: (open: () => RunStore) => T | Promise<T>): Promise<T> {
  const namespace = env.COORDINATOR;
  const stub = namespace.get(namespace.idFromName(uniqueId("storage")));
  return runInDurableObject(stub, (_instance, state) => {
    state.storage.sql.exec(RUN_TABLES);
    return body(() => new RunStore(state.storage.sql));
  });
}

describe("RunStore", () => {
  it("creates a new object's tables with its run, in the run's transaction, and finds them again", async ({
    expect,
  }) => {
    const initial = newState("run_tables");
    const namespace = env.COORDINATOR;
    const stub = namespace.get(namespace.idFromName(uniqueId("tables")));
    const seen = await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      const tables = () =>
        sql
          .exec<{ name: string }>(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE '\\_cf\\_%' ESCAPE '\\'",
          )
          .toArray()
          .map((row) => row.name)
          .sort();
      // The object's own constructor ran first: a new object has none of the run's tables.
      const before = tables();
      const store = new RunStore(sql);
      const empty = { load: store.load(), staged: store.stagedIndexRow(), tables: tables() };
      // A transaction that fails takes the tables back; the next create makes them again.
      expect(() =>
        state.storage.transactionSync(() => {
          store.create(initial, SNAPSHOT);
          throw new Error("the commit failed");
        }),
      ).toThrow("the commit failed");
      const afterRollback = tables();
      state.storage.transactionSync(() => store.create(initial, SNAPSHOT));
      const reopened = new RunStore(sql).load();
      return { before, empty, afterRollback, after: tables(), reopened: reopened?.state.record.run_id };
    });
    expect(seen.before).toEqual([]);
    expect(seen.empty).toEqual({ load: null, staged: null, tables: [] });
    expect(seen.afterRollback).toEqual([]);
    expect(seen.after).toEqual(["blobs", "index_outbox", "invocations", "journal", "journal_unsigned", "nodes"]);
    expect(seen.reopened).toBe("run_tables");
  });

  it("reads back a wave of invocations written in size-bounded batches, large rows alone", async ({ expect }) => {
    const initial = newState("run_storage");
    // 300 small rows and, among them, rows of 150 000 and 450 000 characters: several
    // batches, and rows over the batch size that must go on their own.
    const invocations = Array.from({ length: 300 }, (_, index) =>
      invocation(
        index,
        index % 97 === 5
          ? { big: "x".repeat(index % 2 === 0 ? 450_000 : 150_000), text: AWKWARD }
          : { n: index, text: AWKWARD, nested: [{ a: null, b: [1.5, -0, 1e21] }] },
      ),
    );
    const loaded = await withStore((open) => {
      const store = open();
      store.create(initial, SNAPSHOT);
      const running = withInvocations(initial, invocations);
      store.save(initial, running);
      // A second save rewrites only what changed: one invocation gets a new output.
      const changed = withInvocations(
        running,
        invocations.map((one, index) => (index === 7 ? { ...one, output: { changed: AWKWARD } } : one)),
      );
      store.save(running, changed);
      return { expected: changed, actual: open().load() };
    });
    expect(loaded.actual?.state.nodes.each?.invocations).toHaveLength(300);
    expect(loaded.actual?.state).toEqual(JSON.parse(JSON.stringify(loaded.expected)));
  });

  it("appends many journal entries at once and reads them back byte for byte", async ({ expect }) => {
    const key = await importSigningKey(env.JOURNAL_SIGNING_KEY ?? "");
    const entries: SignedEntryText[] = [];
    let prev: string | null = null;
    for (let seq = 1; seq <= 120; seq += 1) {
      const body = seq === 60 ? { blob: "y".repeat(250_000) } : { seq, text: AWKWARD, values: [0.1 + 0.2, 1e-7, -0] };
      const entry = await signEntryText(key, {
        seq,
        run_id: "run_storage",
        kind: "test.entry",
        at: new Date(1_700_000_000_000 + seq).toISOString(),
        body,
        prev,
      });
      entries.push(entry);
      prev = entry.hash;
    }
    const read = await withStore((open) => {
      const store = open();
      store.appendJournal(entries.slice(0, 1));
      store.appendJournal(entries.slice(1));
      return open().journal();
    });
    expect(read.map((entry) => JSON.stringify(entry))).toEqual(entries.map((entry) => entry.text));
    expect(await verifyJournal(read, toJwks([key.publicJwk]))).toMatchObject({ ok: true, entries: 120 });
  });

  it("writes the run context only when it changed, apart from the record", async ({ expect }) => {
    const initial = newState("run_ctx", { big: "z".repeat(1000) });
    const seen = await withStore((open) => {
      const store = open();
      store.create(initial, SNAPSHOT);
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      // A marker in the stored context: a save that rewrote the context would erase it.
      const marked = { ...initial.record.context, state: { marker: true } };
      sql.exec("UPDATE blobs SET data = ? WHERE key = 'context'", JSON.stringify(marked));
      const moved = { ...initial, record: { ...initial.record, journal_seq: 5 } }; // same context object
      store.save(initial, moved);
      const afterRecordOnly = open().load()?.state.record;
      const changed = {
        ...moved,
        record: { ...moved.record, context: { ...moved.record.context, output: { done: true } } },
      };
      store.save(moved, changed);
      return { afterRecordOnly, afterContext: open().load()?.state.record };
    });
    expect(seen.afterRecordOnly?.journal_seq).toBe(5);
    expect(seen.afterRecordOnly?.context.state).toEqual({ marker: true });
    expect(seen.afterContext?.context).toEqual({ input: { big: "z".repeat(1000) }, state: {}, output: { done: true } });
  });

  it("rewrites a one-chunk context in place, and keeps it whole as it grows past one chunk and shrinks back", async ({
    expect,
  }) => {
    const initial = newState("run_grow");
    const withState = (before: RunState, state: Record<string, string>): RunState => ({
      ...before,
      record: { ...before.record, context: { ...before.record.context, state } },
    });
    const seen = await withStore((open) => {
      const store = open();
      store.create(initial, SNAPSHOT);
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      const chunks = () => sql.exec("SELECT chunk FROM blobs WHERE key = 'context'").toArray().length;
      const small = withState(initial, { a: "x" });
      store.save(initial, small);
      const big = withState(small, { a: "y".repeat(1_200_000) }); // three chunks of 500,000 characters
      store.save(small, big);
      const grown = { chunks: chunks(), state: open().load()?.state.record.context.state };
      const back = withState(big, { a: "z" });
      store.save(big, back);
      const again = withState(back, { a: "w" }); // in place: one chunk before and after
      store.save(back, again);
      return { grown, chunks: chunks(), state: open().load()?.state.record.context.state };
    });
    expect(seen.grown.chunks).toBe(3);
    expect(seen.grown.state).toEqual({ a: "y".repeat(1_200_000) });
    expect(seen.chunks).toBe(1);
    expect(seen.state).toEqual({ a: "w" });
  });

  it("loads a run stored with its context inside the record (before the split) and splits it on the next save", async ({
    expect,
  }) => {
    const initial = newState("run_legacy", { n: 1 });
    const seen = await withStore((open) => {
      const sql = (open() as unknown as { sql: SqlStorage }).sql;
      sql.exec("INSERT INTO blobs (key, chunk, data) VALUES ('record', 0, ?)", JSON.stringify(initial.record));
      sql.exec("INSERT INTO blobs (key, chunk, data) VALUES ('snapshot', 0, ?)", JSON.stringify(SNAPSHOT));
      const store = open();
      const legacy = store.load();
      if (!legacy) {
        throw new Error("the legacy run did not load");
      }
      store.save(legacy.state, { ...legacy.state, record: { ...legacy.state.record, journal_seq: 9 } });
      return { legacy: legacy.state.record, after: open().load()?.state.record };
    });
    expect(seen.legacy.context).toEqual({ input: { n: 1 }, state: {}, output: {} });
    expect(seen.after).toMatchObject({ journal_seq: 9, context: { input: { n: 1 }, state: {}, output: {} } });
  });
});
