import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import {
  INDEX_BACKSTOP_MS,
  RunIndexSync,
  toIndexRow,
  upsertIndexRow,
  type IndexOutbox,
  type StagedIndexRow,
} from "../../coordinator/run-index.ts";
import type { RunRecord, RunSummary } from "../../schemas/index.ts";
import { encodeCursor } from "../../src/run-list.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { stubOf, storedAlarm } from "./durable-helpers.ts";
import {
  api,
  httpStep,
  httpTarget,
  oneStepWorkflow,
  register,
  registerWorkflow,
  start,
  uniqueId,
  verified,
  waitForRun,
} from "./helpers.ts";

/**
 * The run index (D1) and `GET /v1/runs`. The index is written by each run's
 * coordinator after its commits, so a test waits for the listing to show
 * what the run already shows: the index is eventually consistent, never
 * ahead of the run.
 */

type Listed = RunSummary;

async function list(query: string): Promise<{ runs: Listed[]; next_cursor: string | null }> {
  const response = await api("GET", `/v1/runs?${query}`);
  if (response.status !== 200) {
    throw new Error(`GET /v1/runs?${query}: ${response.status} ${JSON.stringify(response.json)}`);
  }
  return response.json;
}

/** Waits until the listing of `query` shows `runId` with `status`, and returns that entry. */
async function untilListed(query: string, runId: string, status: string): Promise<Listed> {
  let found: Listed | undefined;
  await vi.waitUntil(
    async () => {
      found = (await list(query)).runs.find((run) => run.run_id === runId && run.status === status);
      return found !== undefined;
    },
    { timeout: 15_000, interval: 50 },
  );
  if (!found) {
    throw new Error(`${runId} never listed as ${status}`);
  }
  return found;
}

/** A workflow whose one step GETs the HTTP target: `/mark` completes, `/flaky?status=400` fails. */
const callWorkflow = (id: string, path: string) =>
  oneStepWorkflow(id, "call", httpStep("call", `${httpTarget()}${path}`));

/** The run's outbox row in its own storage: how the index writes went. */
function outboxOf(runId: string) {
  return runInDurableObject(stubOf(runId), (_instance, state) => {
    const row = state.storage.sql
      .exec<{ written: number; attempts: number; retry_at: number | null }>(
        "SELECT written, attempts, retry_at FROM index_outbox",
      )
      .toArray()[0];
    return row ?? null;
  });
}

describe("GET /v1/runs lists runs from the run index", () => {
  it("a run that completes and one that fails are listed with their final status, who started them and when", async ({
    expect,
  }) => {
    const ok = uniqueId("listed-ok");
    const bad = uniqueId("listed-bad");
    await register({
      workflows: [callWorkflow(ok, `/mark/${ok}`), callWorkflow(bad, `/flaky/${bad}?fail=9&status=400`)],
    });
    const okRun = await start(ok);
    const badRun = await start(bad);
    const okView = await waitForRun(okRun);
    const badView = await waitForRun(badRun);
    expect([okView.status, badView.status]).toEqual(["completed", "failed"]);

    const completed = await untilListed(`workflow=${ok}`, okRun, "completed");
    expect(completed).toEqual({
      run_id: okRun,
      workflow: { id: ok, version: 1 },
      status: "completed",
      mode: "auto",
      parent: null,
      created_by: expect.stringMatching(/^token:[0-9a-f]{16}$/),
      trigger: "api",
      created_at: okView.created_at,
      updated_at: expect.any(String),
      finished_at: expect.any(String),
      deleted_at: null,
      error: null,
    });
    // The token itself never reaches the index, only its keyed digest.
    expect(JSON.stringify(completed)).not.toContain("test-token");
    expect(Date.parse(completed.finished_at ?? "")).toBeGreaterThanOrEqual(Date.parse(completed.created_at));

    const failed = await untilListed(`workflow=${bad}`, badRun, "failed");
    expect(failed.error).toEqual({ code: badView.error.code, message: badView.error.message });
    expect(failed.created_by).toBe(completed.created_by);
  });

  it("filters by workflow (id or id@version), status (one or several), parent and creation time", async ({
    expect,
  }) => {
    const a = uniqueId("filter-a");
    const b = uniqueId("filter-b");
    await register({ workflows: [callWorkflow(a, `/mark/${a}`), callWorkflow(b, `/mark/${b}`)] });
    // Approval mode: the runs wait in drafting until approved, so their status is known.
    const before = new Date(Date.now() - 1).toISOString();
    const drafted = await start(a, { input: {}, mode: "approval" });
    const done = await start(a, { input: {} });
    const other = await start(b, { input: {}, mode: "approval" });
    await waitForRun(done);
    await untilListed(`workflow=${a}`, done, "completed");
    await untilListed(`workflow=${b}`, other, "drafting");
    const after = new Date(Date.now() + 1).toISOString();

    const ids = (runs: Listed[]) => runs.map((run) => run.run_id).sort();
    expect(ids((await list(`workflow=${a}`)).runs)).toEqual([drafted, done].sort());
    expect(ids((await list(`workflow=${a}@1`)).runs)).toEqual([drafted, done].sort());
    expect((await list(`workflow=${a}@2`)).runs).toEqual([]);
    expect(ids((await list(`workflow=${a}&status=drafting`)).runs)).toEqual([drafted]);
    expect(ids((await list(`workflow=${a}&status=completed,drafting`)).runs)).toEqual([drafted, done].sort());
    expect(ids((await list(`workflow=${b}&status=completed`)).runs)).toEqual([]);
    expect(ids((await list(`workflow=${a}&created_after=${before}&created_before=${after}`)).runs)).toEqual(
      [drafted, done].sort(),
    );
    expect((await list(`workflow=${a}&created_after=${after}`)).runs).toEqual([]);
    expect((await list(`workflow=${a}&created_before=${before}`)).runs).toEqual([]);
    expect((await list(`workflow=${a}&parent=${done}`)).runs).toEqual([]);
    // Unfiltered, the newest runs come first.
    const newest = (await list("limit=100")).runs;
    const created = newest.map((run) => Date.parse(run.created_at));
    expect(created).toEqual([...created].sort((x, y) => y - x));
  });

  it("pages newest first with an opaque cursor: every run exactly once, and a run created meanwhile shifts nothing", async ({
    expect,
  }) => {
    const id = uniqueId("paged");
    await registerWorkflow(callWorkflow(id, `/mark/${id}`));
    const started: string[] = [];
    for (let index = 0; index < 7; index += 1) {
      started.push(await start(id, { input: { index }, mode: "approval" }));
    }
    await vi.waitUntil(async () => (await list(`workflow=${id}&limit=100`)).runs.length === 7, { timeout: 15_000 });

    const first = await list(`workflow=${id}&limit=3`);
    expect(first.runs).toHaveLength(3);
    expect(first.next_cursor).toEqual(expect.any(String));
    // A run created between two pages is newer than every run listed: it never lands on a later page.
    const late = await start(id, { input: { index: 7 }, mode: "approval" });
    await untilListed(`workflow=${id}&limit=1`, late, "drafting");

    const pages = [first.runs];
    let cursor = first.next_cursor;
    while (cursor !== null) {
      const page = await list(`workflow=${id}&limit=3&cursor=${cursor}`);
      pages.push(page.runs);
      cursor = page.next_cursor;
    }
    expect(pages.map((page) => page.length)).toEqual([3, 3, 1]);
    const listed = pages.flat().map((run) => run.run_id);
    expect(new Set(listed).size).toBe(listed.length);
    expect([...listed].sort()).toEqual([...started].sort());
    const keys = pages.flat().map((run) => [Date.parse(run.created_at), run.run_id] as const);
    for (let index = 1; index < keys.length; index += 1) {
      const [previous, current] = [keys[index - 1], keys[index]];
      expect(
        previous && current && (previous[0] > current[0] || (previous[0] === current[0] && previous[1] > current[1])),
      ).toBe(true);
    }
  });

  it("a child run lists its parent, and the parent filter finds the children of a run", async ({ expect }) => {
    const child = uniqueId("child");
    const parent = uniqueId("parent");
    await register({
      workflows: [callWorkflow(child, `/mark/${child}`), { id: parent, nodes: { kid: { workflow: child } } }],
    });
    const parentRun = await start(parent);
    expect((await waitForRun(parentRun)).status).toBe("completed");
    await untilListed(`workflow=${parent}`, parentRun, "completed");
    const children = await vi.waitUntil(
      async () => {
        const runs = (await list(`parent=${parentRun}`)).runs;
        return runs.length === 1 && runs[0]?.status === "completed" ? runs : undefined;
      },
      { timeout: 15_000 },
    );
    expect(children[0]).toMatchObject({ workflow: { id: child, version: 1 }, parent: parentRun });
    expect(children[0]?.created_by).toBe(`run:${parentRun}`);
    expect((await list(`workflow=${parent}`)).runs[0]?.parent).toBeNull();
  });
});

describe("listRuns over Workers RPC", () => {
  it("lists what GET /v1/runs lists, and answers a bad query with its error as data", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const id = uniqueId("rpc-listed");
    await registerWorkflow(callWorkflow(id, `/mark/${id}`));
    const runId = await start(id, { input: {}, mode: "approval" });
    await untilListed(`workflow=${id}`, runId, "drafting");
    const listed = await rpc.listRuns({ workflow: id });
    expect(listed).toEqual({ ok: true, value: await list(`workflow=${id}`) });
    const refused = await rpc.listRuns({ limit: 7 });
    expect(refused).toMatchObject({ ok: false, error: { code: "request.invalid_query" } });
    expect(!refused.ok && refused.error.details?.map((detail) => detail.path)).toEqual(["limit"]);
  });
});

describe("GET /v1/runs refuses bad queries and missing tokens", () => {
  it("bad filters are 400 request.invalid_query with the path of each problem", async ({ expect }) => {
    const cases: [string, string[]][] = [
      ["status=bogus", ["status.0"]],
      ["status=running,nope", ["status.1"]],
      ["created_after=yesterday", ["created_after"]],
      ["created_before=2026-13-01T00:00:00Z", ["created_before"]],
      ["limit=0", ["limit"]],
      ["limit=101", ["limit"]],
      ["limit=ten", ["limit"]],
      ["workflow=Not%20An%20Id", ["workflow"]],
      ["status=bogus&limit=0&created_after=x", ["status.0", "limit", "created_after"]],
    ];
    for (const [query, paths] of cases) {
      const response = await api("GET", `/v1/runs?${query}`);
      expect(response.status, query).toBe(400);
      expect(response.json.error.code, query).toBe("request.invalid_query");
      expect(response.json.error.details.map((detail: { path: string }) => detail.path).sort(), query).toEqual(
        [...paths].sort(),
      );
    }
    const unknown = await api("GET", "/v1/runs?stauts=running");
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.message).toContain("stauts");
  });

  it("a cursor this API did not hand out is 400 request.invalid_cursor", async ({ expect }) => {
    const notJson = btoa("not json").replaceAll("=", "");
    const wrongShape = btoa(JSON.stringify({ created_at: 1 })).replaceAll("=", "");
    for (const cursor of ["***", notJson, wrongShape, encodeURIComponent(btoa("[1]")), "%FF%FE"]) {
      const response = await api("GET", `/v1/runs?cursor=${cursor}`);
      expect(response.status, cursor).toBe(400);
      expect(response.json.error.code, cursor).toBe("request.invalid_cursor");
      expect(response.json.error.details[0].path).toBe("cursor");
    }
    // A well-formed cursor is accepted whatever it points at.
    expect((await api("GET", `/v1/runs?cursor=${encodeCursor([0, "run_0"])}`)).status).toBe(200);
  });

  it("without a valid bearer token the listing is 401 and shows no runs", async ({ expect }) => {
    const missing = await api("GET", "/v1/runs", undefined, null);
    expect(missing.status).toBe(401);
    expect(missing.json).toEqual({ error: { code: "auth.missing_token", message: expect.any(String) } });
    const wrong = await api("GET", "/v1/runs", undefined, "not-a-token");
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe("auth.invalid_token");
  });
});

describe("the index never blocks a run and catches up after failed writes", () => {
  it("while D1 refuses the run's writes the run completes anyway; the retries, a restart and the alarm bring the index up to date", async ({
    expect,
  }) => {
    const id = uniqueId("index-down");
    await registerWorkflow(callWorkflow(id, `/mark/${id}`));
    // A real failure in the real database, scoped to this workflow's rows: every write of them aborts.
    const trigger = id.replaceAll("-", "_");
    for (const event of ["INSERT", "UPDATE"]) {
      await env.RUN_INDEX.prepare(
        `CREATE TRIGGER ${trigger}_${event.toLowerCase()} BEFORE ${event} ON runs
         WHEN NEW.workflow_id = '${id}' BEGIN SELECT RAISE(ABORT, 'the index is down (test)'); END`,
      ).run();
    }
    const runId = await start(id);
    expect((await waitForRun(runId)).status).toBe("completed");
    // The first write failed at once and its retry (after the backoff) failed too; the run kept an alarm for the next.
    await vi.waitUntil(async () => ((await outboxOf(runId))?.attempts ?? 0) >= 2, { timeout: 15_000 });
    const pending = await outboxOf(runId);
    expect(pending).toMatchObject({ written: 0 });
    expect(pending?.retry_at).toEqual(expect.any(Number));
    expect(await storedAlarm(runId)).toEqual(expect.any(Number));
    expect((await list(`workflow=${id}`)).runs).toEqual([]);

    // A crash (a deploy, an eviction) loses nothing: the row stays staged in the run's storage.
    await abortAllDurableObjects();
    for (const event of ["insert", "update"]) {
      await env.RUN_INDEX.prepare(`DROP TRIGGER ${trigger}_${event}`).run();
    }
    await runDurableObjectAlarm(stubOf(runId));
    await untilListed(`workflow=${id}`, runId, "completed");
    await vi.waitUntil(async () => (await outboxOf(runId))?.written === 1, { timeout: 10_000 });
    // Written: the run keeps no alarm for the index any more.
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });
    expect(await verified(runId)).toBe(true);
  });

  it("a row staged while an unfinished run's row waits to be written replaces it: one write, the final row", async ({
    expect,
  }) => {
    const id = uniqueId("once");
    // Every write of this workflow's rows is counted, by the database itself.
    const table = `writes_${id.replaceAll("-", "_")}`;
    await env.RUN_INDEX.prepare(`CREATE TABLE ${table} (status TEXT)`).run();
    for (const event of ["INSERT", "UPDATE"]) {
      await env.RUN_INDEX.prepare(
        `CREATE TRIGGER ${table}_${event.toLowerCase()} AFTER ${event} ON runs
         WHEN NEW.workflow_id = '${id}' BEGIN INSERT INTO ${table} VALUES (NEW.status); END`,
      ).run();
    }
    // The coordinator's outbox, as its storage keeps it: one staged row at a time.
    let staged: StagedIndexRow | null = null;
    const outbox: IndexOutbox = {
      stagedIndexRow: () => staged,
      indexRowWritten: (seq) => {
        staged = staged?.row.seq === seq ? null : staged;
      },
      indexRowFailed: () => undefined,
    };
    const pending: Promise<unknown>[] = [];
    const sync = new RunIndexSync({
      outbox,
      db: env.RUN_INDEX,
      waitUntil: (promise) => pending.push(promise),
      wakes: { setAlarm: async () => undefined, holdReleased: async () => undefined },
      coalesceMs: 200,
    });
    const record = (status: RunRecord["status"], seq: number) =>
      toIndexRow({
        run_id: `run_${id}`,
        workflow: { id, version: 1 },
        status,
        mode: "auto",
        parent: null,
        created_by: "token:test",
        created_at: 1,
        updated_at: seq,
        error: null,
        gates: [],
        journal_seq: seq,
      } as unknown as RunRecord);
    staged = { row: record("running", 3), attempts: 0, retry_at: null };
    sync.flush();
    // The run ends before its running row was written: the final row is staged in its place.
    staged = { row: record("completed", 9), attempts: 0, retry_at: null };
    sync.flush();
    await Promise.all(pending);
    const writes = await env.RUN_INDEX.prepare(`SELECT status FROM ${table}`).all<{ status: string }>();
    expect(writes.results.map((row) => row.status)).toEqual(["completed"]);
    expect(staged).toBeNull();
  });

  it("a write in flight holds the run's alarm no further out than the backstop, and releases it once written", async ({
    expect,
  }) => {
    const id = uniqueId("held");
    await registerWorkflow(callWorkflow(id, `/mark/${id}`));
    const before = Date.now();
    const runId = await start(id, { input: {}, mode: "approval" });
    // Nothing in an approval run needs an alarm but its index write: held at most a backstop away, then gone.
    const alarm = await storedAlarm(runId);
    expect(alarm === null || alarm <= Date.now() + INDEX_BACKSTOP_MS).toBe(true);
    expect(alarm === null || alarm >= before).toBe(true);
    await untilListed(`workflow=${id}`, runId, "drafting");
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });
  });

  it("a run stored before the index existed is indexed when its object next loads", async ({ expect }) => {
    const id = uniqueId("backfill");
    await registerWorkflow(callWorkflow(id, `/mark/${id}`));
    const runId = await start(id);
    expect((await waitForRun(runId)).status).toBe("completed");
    await untilListed(`workflow=${id}`, runId, "completed");
    // As if stored by a version without the index: no outbox in the run's storage, no row in D1.
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec("DELETE FROM index_outbox");
    });
    await env.RUN_INDEX.prepare("DELETE FROM runs WHERE run_id = ?").bind(runId).run();
    await abortAllDurableObjects();
    expect((await list(`workflow=${id}`)).runs).toEqual([]);
    // Any call loads the object; loading stages the row and writes it.
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("completed");
    await untilListed(`workflow=${id}`, runId, "completed");
  });

  it("upserts are idempotent and ordered: an older row never replaces a newer one", async ({ expect }) => {
    const runId = `run_${crypto.randomUUID().replaceAll("-", "")}`;
    const record = {
      run_id: runId,
      workflow: { id: uniqueId("ordered"), version: 1 },
      status: "running",
      mode: "auto",
      error: null,
      created_at: 1_000,
      updated_at: 2_000,
      parent: null,
      created_by: "rpc",
      gates: [],
      journal_seq: 5,
    } as unknown as RunRecord;
    const newer = toIndexRow({ ...record, status: "completed", updated_at: 3_000, journal_seq: 9 });
    await upsertIndexRow(env.RUN_INDEX, newer);
    await upsertIndexRow(env.RUN_INDEX, newer);
    await upsertIndexRow(env.RUN_INDEX, toIndexRow(record));
    const rows = (
      await env.RUN_INDEX.prepare("SELECT status, seq, finished_at FROM runs WHERE run_id = ?").bind(runId).all()
    ).results;
    expect(rows).toEqual([{ status: "completed", seq: 9, finished_at: 3_000 }]);
  });
});
