import { runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { newRunState, pendingNode } from "../../coordinator/create.ts";
import type { RunState } from "../../coordinator/decide.ts";
import { RUN_TABLES, RunStore, type UnsignedEntry } from "../../coordinator/storage.ts";
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

/** The tables of an object that a version before journal pages created: one journal row an entry. */
const TABLES_BEFORE_PAGES = `CREATE TABLE blobs (key TEXT NOT NULL, chunk INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (key, chunk));
  CREATE TABLE nodes (id TEXT PRIMARY KEY, data TEXT NOT NULL) WITHOUT ROWID;
  CREATE TABLE invocations (node TEXT NOT NULL, idx INTEGER NOT NULL, data TEXT NOT NULL, PRIMARY KEY (node, idx)) WITHOUT ROWID;
  CREATE TABLE journal (seq INTEGER PRIMARY KEY, entry TEXT NOT NULL);
  CREATE TABLE journal_unsigned (seq INTEGER PRIMARY KEY, fields TEXT NOT NULL);
  CREATE TABLE index_outbox (k INTEGER PRIMARY KEY CHECK (k = 0), seq INTEGER NOT NULL,
    row TEXT NOT NULL, written INTEGER NOT NULL, attempts INTEGER NOT NULL, retry_at INTEGER);`;

/** `count` signed entries chained from seq 1, of kind `test.entry` but for those in `attests`. */
async function signedEntries(count: number, attests: readonly number[] = []): Promise<SignedEntryText[]> {
  const key = await importSigningKey(env.JOURNAL_SIGNING_KEY ?? "");
  const entries: SignedEntryText[] = [];
  let prev: string | null = null;
  for (let seq = 1; seq <= count; seq += 1) {
    const kind = attests.includes(seq) ? "attest" : "test.entry";
    const fields = {
      seq,
      run_id: "run_pages",
      kind,
      at: new Date(1_700_000_000_000).toISOString(),
      body: { seq },
      prev,
    };
    const entry: SignedEntryText = await signEntryText(key, fields);
    entries.push(entry);
    prev = entry.hash;
  }
  return entries;
}

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
    expect(seen.after).toEqual(["blobs", "index_outbox", "invocations", "journal_pages", "journal_unsigned", "nodes"]);
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
    // Longer than a context kept in the record's row.
    const initial = newState("run_ctx", { big: "z".repeat(20_000) });
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
    expect(seen.afterContext?.context).toEqual({
      input: { big: "z".repeat(20_000) },
      state: {},
      output: { done: true },
    });
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
      // Each longer than a context kept in the record's row, all but one shorter than a chunk.
      const small = withState(initial, { a: "x".repeat(20_000) });
      store.save(initial, small);
      const big = withState(small, { a: "y".repeat(1_200_000) }); // three chunks of 500,000 characters
      store.save(small, big);
      const grown = { chunks: chunks(), state: open().load()?.state.record.context.state };
      const back = withState(big, { a: "z".repeat(20_000) });
      store.save(big, back);
      const again = withState(back, { a: "w".repeat(20_000) }); // in place: one chunk before and after
      store.save(back, again);
      return { grown, chunks: chunks(), state: open().load()?.state.record.context.state };
    });
    expect(seen.grown.chunks).toBe(3);
    expect(seen.grown.state).toEqual({ a: "y".repeat(1_200_000) });
    expect(seen.chunks).toBe(1);
    expect(seen.state).toEqual({ a: "w".repeat(20_000) });
  });

  it("keeps a short context in the record's row, and moves it to a blob of its own and back as it grows and shrinks", async ({
    expect,
  }) => {
    const initial = newState("run_inline");
    const withState = (before: RunState, state: Record<string, string>): RunState => ({
      ...before,
      record: { ...before.record, context: { ...before.record.context, state } },
    });
    const longer = withState(initial, { a: "x".repeat(20_000) });
    const shorter = withState(longer, { a: "y" });
    const seen = await withStore((open) => {
      const store = open();
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      const look = () => ({
        keys: sql
          .exec<{ key: string }>("SELECT DISTINCT key FROM blobs ORDER BY key")
          .toArray()
          .map((row) => row.key),
        context: open().load()?.state.record.context,
      });
      store.create(initial, SNAPSHOT);
      const created = look();
      store.save(initial, longer);
      const grown = look();
      store.save(longer, shorter);
      return { created, grown, shrunk: look() };
    });
    expect(seen.created).toEqual({ keys: ["record", "snapshot"], context: initial.record.context });
    expect(seen.grown).toEqual({ keys: ["context", "record", "snapshot"], context: longer.record.context });
    expect(seen.shrunk).toEqual({ keys: ["record", "snapshot"], context: shorter.record.context });
  });

  it("loads a run stored with its context inside the record (before the split) and reads it back after the next save", async ({
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

describe("RunStore's rows", () => {
  it("stores a commit's journal entries in one row and reads any range of them", async ({ expect }) => {
    const entries = await signedEntries(12, [5, 11]);
    const seen = await withStore((open) => {
      const store = open();
      for (const [from, to] of [
        [0, 1],
        [1, 5],
        [5, 9],
        [9, 12],
      ] as const) {
        store.appendJournal(entries.slice(from, to));
      }
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      const reopened = open();
      return {
        pages: sql.exec("SELECT last_seq FROM journal_pages").toArray().length,
        all: reopened.journal().map((entry) => entry.seq),
        middle: reopened.journal(2, 5).map((entry) => entry.seq),
        tail: reopened.journal(11).map((entry) => entry.seq),
        lastSeq: reopened.lastJournalSeq(),
        attest: reopened.lastAttestation()?.seq,
        lastHash: (() => {
          reopened.create(newState("run_pages"), SNAPSHOT);
          return open().load()?.lastHash;
        })(),
      };
    });
    expect(seen.pages).toBe(4);
    expect(seen.all).toEqual(entries.map((entry) => entry.seq));
    expect(seen.middle).toEqual([3, 4, 5, 6, 7]);
    expect(seen.tail).toEqual([12]);
    expect(seen.lastSeq).toBe(12);
    expect(seen.attest).toBe(11);
    expect(seen.lastHash).toBe(entries.at(-1)?.hash);
  });

  it("keeps reading and writing a run stored one journal row an entry, its invocations in rows of their own", async ({
    expect,
  }) => {
    const entries = await signedEntries(5);
    const key = await importSigningKey(env.JOURNAL_SIGNING_KEY ?? "");
    const running = withInvocations(newState("run_before_pages"), [invocation(0, { n: 0 })]);
    const namespace = env.COORDINATOR;
    const stub = namespace.get(namespace.idFromName(uniqueId("before-pages")));
    const seen = await runInDurableObject(stub, (_instance, state) => {
      const sql = state.storage.sql;
      // As the version before wrote it: a row an entry, a node row without its invocations, an invocation row.
      sql.exec(TABLES_BEFORE_PAGES);
      const { context, ...record } = running.record;
      sql.exec("INSERT INTO blobs (key, chunk, data) VALUES ('record', 0, ?)", JSON.stringify(record));
      sql.exec("INSERT INTO blobs (key, chunk, data) VALUES ('context', 0, ?)", JSON.stringify(context));
      sql.exec("INSERT INTO blobs (key, chunk, data) VALUES ('snapshot', 0, ?)", JSON.stringify(SNAPSHOT));
      const { invocations, ...node } = running.nodes.each ?? newState("x").nodes.each ?? {};
      sql.exec("INSERT INTO nodes (id, data) VALUES ('each', ?)", JSON.stringify(node));
      sql.exec("INSERT INTO invocations (node, idx, data) VALUES ('each', 0, ?)", JSON.stringify(invocations?.[0]));
      for (const entry of entries.slice(0, 3)) {
        sql.exec("INSERT INTO journal (seq, entry) VALUES (?, ?)", entry.seq, entry.text);
      }
      const store = new RunStore(sql);
      const loaded = store.load();
      store.appendJournal(entries.slice(3));
      const done = withInvocations(running, [invocation(0, { n: "done" })]);
      store.save(running, done);
      return {
        loaded: loaded?.state,
        lastHash: loaded?.lastHash,
        rows: sql.exec("SELECT seq FROM journal").toArray().length,
        journal: new RunStore(sql).journal(),
        invocationRows: sql.exec("SELECT idx FROM invocations").toArray().length,
        after: new RunStore(sql).load()?.state,
        expected: done,
      };
    });
    expect(seen.loaded).toEqual(JSON.parse(JSON.stringify(running)));
    expect(seen.lastHash).toBe(entries[2]?.hash);
    expect(seen.rows).toBe(5);
    expect(seen.journal.map((entry) => JSON.stringify(entry))).toEqual(entries.map((entry) => entry.text));
    expect(await verifyJournal(seen.journal, toJwks([key.publicJwk]))).toMatchObject({ ok: true, entries: 5 });
    // Its one invocation moved into the node's row: the row it had is gone.
    expect(seen.invocationRows).toBe(0);
    expect(seen.after).toEqual(JSON.parse(JSON.stringify(seen.expected)));
  });

  it("keeps a commit's unsigned entries in one row, reads those stored a row an entry, and forgets them once signed", async ({
    expect,
  }) => {
    const signed = await signedEntries(5);
    const unsigned = signed.map((entry) => {
      const { seq, kind, at, body } = JSON.parse(entry.text) as UnsignedEntry;
      return { seq, kind, at, body };
    });
    const seen = await withStore((open) => {
      const store = open();
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      const rows = () => sql.exec("SELECT seq FROM journal_unsigned").toArray().length;
      // Seq 1 as a version before pages stored it, a row of its own; then a commit of four.
      sql.exec("INSERT INTO journal_unsigned (seq, fields) VALUES (1, ?)", JSON.stringify(unsigned[0]));
      store.putUnsigned(unsigned.slice(1));
      const stored = { rows: rows(), entries: open().unsigned() };
      store.appendSigned(signed);
      return {
        stored,
        afterSigning: rows(),
        journal: open()
          .journal()
          .map((entry) => entry.seq),
      };
    });
    expect(seen.stored).toEqual({ rows: 2, entries: unsigned });
    expect(seen.afterSigning).toBe(0);
    expect(seen.journal).toEqual([1, 2, 3, 4, 5]);
  });

  it("loads the nodes in the definition's order, those not started among them", async ({ expect }) => {
    const definition = SNAPSHOT.workflow.definition;
    const node = definition.nodes.each;
    const snapshot = RunSnapshot.parse({
      ...SNAPSHOT,
      workflow: { ...SNAPSHOT.workflow, definition: { ...definition, nodes: { a: node, b: node, c: node } } },
    });
    const initial = newRunState(
      {
        run_id: "run_order",
        input: {},
        mode: "auto",
        idempotency_key: null,
        request_hash: "h",
        snapshot,
        created_by: "token:t",
        trigger: { kind: "api" },
      },
      1,
    );
    const started = { ...initial, nodes: { ...initial.nodes, c: { ...pendingNode(), status: "running" as const } } };
    const order = await withStore((open) => {
      const store = open();
      store.create(started, snapshot);
      return Object.keys(open().load()?.state.nodes ?? {});
    });
    expect(order).toEqual(["a", "b", "c"]);
  });

  it("keeps a node's one invocation in its row, more in rows of their own, and no row for a node not started", async ({
    expect,
  }) => {
    const initial = newState("run_node_rows");
    const one = withInvocations(initial, [invocation(0, { n: 0 })]);
    const three = withInvocations(
      one,
      [0, 1, 2].map((index) => invocation(index, { n: index })),
    );
    const again = withInvocations(three, [invocation(0, { n: "again" })]);
    const seen = await withStore((open) => {
      const store = open();
      const sql = (store as unknown as { sql: SqlStorage }).sql;
      const count = (table: string) => sql.exec(`SELECT 1 FROM ${table}`).toArray().length;
      const step = (before: RunState, after: RunState) => {
        store.save(before, after);
        return { nodes: count("nodes"), invocations: count("invocations"), state: open().load()?.state };
      };
      store.create(initial, SNAPSHOT);
      const created = { nodes: count("nodes"), state: open().load()?.state };
      return { created, one: step(initial, one), three: step(one, three), again: step(three, again) };
    });
    expect(seen.created).toEqual({ nodes: 0, state: JSON.parse(JSON.stringify(initial)) });
    expect(seen.one).toEqual({ nodes: 1, invocations: 0, state: JSON.parse(JSON.stringify(one)) });
    expect(seen.three).toEqual({ nodes: 1, invocations: 3, state: JSON.parse(JSON.stringify(three)) });
    expect(seen.again).toEqual({ nodes: 1, invocations: 0, state: JSON.parse(JSON.stringify(again)) });
  });
});
