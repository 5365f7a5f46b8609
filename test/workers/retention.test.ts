import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { blobKey } from "../../blobs/ref.ts";
import { putBlob } from "../../blobs/store.ts";
import { newRunState } from "../../coordinator/create.ts";
import { DAY_MS, daysOf, deletionDueAt, retentionOf } from "../../coordinator/retention.ts";
import { RunSnapshot } from "../../schemas/resolved.ts";
import { runEvents } from "../../src/service.ts";
import type { RunRecord } from "../../schemas/run.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import type { RunSummary } from "../../schemas/index.ts";
import { archiveKeyOf } from "../../schemas/retention.ts";
import { stubOf, storedAlarm } from "./durable-helpers.ts";
import { api, httpStep, httpTarget, oneStepWorkflow, register, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Retention: a run's object deletes the run once its workflow's (or the
 * deployment's) days for the status it ended with are up, driven here by the
 * test: the object's retention clock is moved days ahead and its alarm run
 * with `runDurableObjectAlarm`, so no test waits.
 */

/** A workflow whose one step GETs the HTTP target: `/mark` completes, `/flaky?…&status=400` fails. */
const callWorkflow = (id: string, path: string, retention: Record<string, unknown>) => ({
  ...oneStepWorkflow(id, "call", httpStep("call", `${httpTarget()}${path}`)),
  retention,
});

/** A workflow whose one step asks a human: the run waits until it is answered or cancelled. */
const gateWorkflow = (id: string, retention: Record<string, unknown> = {}) => ({
  id,
  retention,
  nodes: {
    ask: {
      task: {
        steps: [
          {
            ref: "ask",
            action: {
              kind: "human",
              implementation: { prompt_template: "Go?", input_schema: { type: "object" } },
            },
          },
        ],
      },
    },
  },
});

/** Moves the run's retention clock to `at` (ms since the epoch), then runs its alarm; whether an alarm was set. */
async function alarmAt(runId: string, at: number): Promise<boolean> {
  await runInDurableObject(stubOf(runId), (instance) => {
    instance.retentionClock = () => at;
  });
  return runDurableObjectAlarm(stubOf(runId));
}

/** When the run ended (ms), as its view says. */
async function endedAt(runId: string): Promise<number> {
  return Date.parse((await waitForRun(runId)).updated_at);
}

/** The run's row in the listing, once the index has it with `status`. */
async function listed(workflow: string, runId: string, status: string): Promise<RunSummary> {
  let found: RunSummary | undefined;
  await vi.waitUntil(
    async () => {
      const { json } = await api("GET", `/v1/runs?workflow=${workflow}&status=${status}`);
      found = (json.runs as RunSummary[]).find((run) => run.run_id === runId);
      return found !== undefined;
    },
    { timeout: 15_000, interval: 50 },
  );
  if (!found) {
    throw new Error(`${runId} never listed as ${status}`);
  }
  return found;
}

async function runCompleted(workflow: string): Promise<string> {
  const runId = await start(workflow);
  const run = await waitForRun(runId);
  if (run.status !== "completed") {
    throw new Error(`${runId} ended ${run.status}`);
  }
  return runId;
}

describe("retention deletes a run when its status's days are up", () => {
  it("deletes a completed, a failed and a cancelled run each after its own days, and not a moment before", async ({
    expect,
  }) => {
    const retention = { completed_days: 1, failed_days: 2, cancelled_days: 3.5 };
    const [ok, bad, waits] = [uniqueId("keep-ok"), uniqueId("keep-bad"), uniqueId("keep-wait")];
    await register({
      workflows: [
        callWorkflow(ok, `/mark/${ok}`, retention),
        callWorkflow(bad, `/flaky/${bad}?fail=9&status=400`, retention),
        gateWorkflow(waits, retention),
      ],
    });
    const completed = await start(ok);
    const failed = await start(bad);
    const cancelled = await start(waits);
    await waitForRun(cancelled, (run) => run.status === "waiting");
    expect((await api("POST", `/v1/runs/${cancelled}/cancel`, {})).status).toBe(200);
    const cases = [
      { runId: completed, workflow: ok, status: "completed", days: 1 },
      { runId: failed, workflow: bad, status: "failed", days: 2 },
      { runId: cancelled, workflow: waits, status: "cancelled", days: 3.5 },
    ];
    for (const { runId, workflow, status, days } of cases) {
      expect((await waitForRun(runId)).status).toBe(status);
      const deadline = (await endedAt(runId)) + days * DAY_MS;
      await listed(workflow, runId, status);
      // One millisecond early: the alarm leaves the run whole and is set again, at its deadline at the latest
      // (earlier while the index write or the trace export of the run still holds one).
      await alarmAt(runId, deadline - 1);
      expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(200);
      expect(await storedAlarm(runId)).toBeLessThanOrEqual(deadline);
      expect(await storedAlarm(runId)).not.toBeNull();

      expect(await alarmAt(runId, deadline)).toBe(true);
      const gone = await api("GET", `/v1/runs/${runId}`);
      expect(gone.status).toBe(410);
      expect(gone.json.error.code).toBe("run.deleted");
      const row = await listed(workflow, runId, "deleted");
      expect(row).toMatchObject({ run_id: runId, status: "deleted", finished_at: expect.any(String) });
      expect(Date.parse(row.deleted_at ?? "")).toBeGreaterThanOrEqual(deadline - days * DAY_MS);
      expect(await storedAlarm(runId)).toBeNull();
    }
  });

  it("keeps a run whose status has no days, however long it waits", async ({ expect }) => {
    const workflow = uniqueId("keep-forever");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, { failed_days: 1 })] });
    const runId = await runCompleted(workflow);
    await listed(workflow, runId, "completed");
    // The index has the run's row, so nothing holds an alarm: there is none to fire, and a forced one deletes nothing.
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 5_000 });
    await alarmAt(runId, Date.now() + 36_500 * DAY_MS);
    expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(200);
  });

  it("restarts the timer when a failed run is redriven: the old deadline passes and the run stays", async ({
    expect,
  }) => {
    const workflow = uniqueId("keep-redrive");
    await register({ workflows: [callWorkflow(workflow, `/flaky/${workflow}?fail=9&status=400`, { failed_days: 1 })] });
    const runId = await start(workflow);
    expect((await waitForRun(runId)).status).toBe("failed");
    const firstDeadline = (await endedAt(runId)) + DAY_MS;
    await new Promise((resolve) => setTimeout(resolve, 20)); // the second end is later, by this much at least
    expect((await api("POST", `/v1/runs/${runId}/redrive`, {})).status).toBe(200);
    const again = await waitForRun(
      runId,
      (run) => run.status === "failed" && Date.parse(run.updated_at) > firstDeadline - DAY_MS,
    );
    const secondDeadline = Date.parse(again.updated_at) + DAY_MS;
    expect(secondDeadline).toBeGreaterThan(firstDeadline);

    await alarmAt(runId, firstDeadline);
    expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(200);
    await alarmAt(runId, secondDeadline);
    expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(410);
  });

  it("never deletes a run that has not ended, whatever the clock says", async ({ expect }) => {
    const workflow = uniqueId("keep-waiting");
    await register({ workflows: [gateWorkflow(workflow, { completed_days: 1, failed_days: 1, cancelled_days: 1 })] });
    const runId = await start(workflow);
    await waitForRun(runId, (run) => run.status === "waiting");
    await alarmAt(runId, Date.now() + 10 * DAY_MS);
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("waiting");
  });
});

describe("archive: the journal outlives the run", () => {
  it("answers GET /v1/runs/{id}/journal from R2 after the run is deleted, and the journal still verifies", async ({
    expect,
  }) => {
    const workflow = uniqueId("archived");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, { completed_days: 1, archive: true })] });
    const runId = await runCompleted(workflow);
    const before = await api("GET", `/v1/runs/${runId}/journal`);
    expect(await alarmAt(runId, (await endedAt(runId)) + DAY_MS)).toBe(true);
    expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(410);
    expect(await env.BLOBS?.head(archiveKeyOf(runId))).not.toBeNull();

    const after = await api("GET", `/v1/runs/${runId}/journal`);
    expect(after.status).toBe(200);
    expect(after.json).toEqual(before.json);
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    const report = await verifyJournal(after.json.entries, jwks, { requireAttestation: true });
    expect(report).toMatchObject({ ok: true });
    // A change to the archive is caught as any change to a journal is.
    const tampered = structuredClone(after.json.entries);
    tampered[0].body.input = { forged: true };
    expect((await verifyJournal(tampered, jwks, { requireAttestation: true })).ok).toBe(false);
  });

  it("erases a deleted run's archive: its values leave it, a signed erased entry closes it, and it verifies", async ({
    expect,
  }) => {
    const workflow = uniqueId("archived-erase");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, { archive: true })] });
    const email = `${uniqueId("ada")}@example.com`;
    const runId = await start(workflow, { input: { email } });
    expect((await waitForRun(runId)).status).toBe("completed");
    expect((await api("DELETE", `/v1/runs/${runId}`)).status).toBe(200);
    const archived = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
    expect(JSON.stringify(archived)).toContain(email);
    const sealed = archived
      .filter((entry: { body: object }) => "$salt" in entry.body)
      .map((entry: { seq: number }) => entry.seq);
    expect(sealed).toContain(1); // run.created, with the input

    const erased = await api("POST", `/v1/runs/${runId}/erase`, { reason: "the subject asked" });
    expect(erased.status).toBe(200);
    expect(erased.json).toMatchObject({
      run_id: runId,
      status: "deleted",
      archived: true,
      erased: { reason: "the subject asked", seqs: sealed, blobs: [] },
    });
    const after = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
    expect(JSON.stringify(after)).not.toContain(email);
    expect(after.slice(0, -1).map((entry: { hash: string }) => entry.hash)).toEqual(
      archived.map((entry: { hash: string }) => entry.hash),
    );
    expect(after.at(-1)).toMatchObject({ seq: archived.length + 1, kind: "erased", prev: archived.at(-1).hash });
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    const report = await verifyJournal(after, jwks, { requireAttestation: true });
    expect(report).toMatchObject({ ok: true, attested: true, erasure: { reason: "the subject asked" } });

    // Once is enough: a second erasure answers the first and writes nothing.
    const again = await api("POST", `/v1/runs/${runId}/erase`, { reason: "again" });
    expect(again.json.erased).toEqual(erased.json.erased);
    expect((await api("GET", `/v1/runs/${runId}/journal`)).json.entries).toHaveLength(after.length);
    // A deleted run without an archive has nothing left to erase: 410.
    const plain = uniqueId("unarchived-erase");
    await register({ workflows: [callWorkflow(plain, `/mark/${plain}`, {})] });
    const gone = await runCompleted(plain);
    await api("DELETE", `/v1/runs/${gone}`);
    expect((await api("POST", `/v1/runs/${gone}/erase`, { reason: "x" })).status).toBe(410);
  });

  it("without archive, the journal of a deleted run is 410 like the run", async ({ expect }) => {
    const workflow = uniqueId("unarchived");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, { completed_days: 1 })] });
    const runId = await runCompleted(workflow);
    await alarmAt(runId, (await endedAt(runId)) + DAY_MS);
    const journal = await api("GET", `/v1/runs/${runId}/journal`);
    expect(journal.status).toBe(410);
    expect(journal.json.error.code).toBe("run.deleted");
  });
});

describe("DELETE /v1/runs/{run_id}", () => {
  it("deletes a run that has ended at once, for an admin only; 409 while it runs; 410 on its routes afterwards", async ({
    expect,
  }) => {
    const workflow = uniqueId("delete-now");
    await register({ workflows: [gateWorkflow(workflow)] });
    const runId = await start(workflow);
    await waitForRun(runId, (run) => run.status === "waiting");

    const running = await api("DELETE", `/v1/runs/${runId}`);
    expect(running.status).toBe(409);
    expect(running.json.error.code).toBe("run.not_terminal");
    const runner = (await api("POST", "/v1/tokens", { name: "runs things", roles: ["runner", "reader"] })).json.token;
    await api("POST", `/v1/runs/${runId}/cancel`, {});
    await waitForRun(runId);
    const refused = await api("DELETE", `/v1/runs/${runId}`, undefined, runner);
    expect(refused.status).toBe(403);
    expect(refused.json.error.details).toEqual([
      { path: "roles", message: "needs the role admin", code: "auth.forbidden" },
    ]);

    const deleted = await api("DELETE", `/v1/runs/${runId}`);
    expect(deleted.status).toBe(200);
    expect(deleted.json).toEqual({
      run_id: runId,
      status: "deleted",
      ended: "cancelled",
      deleted_at: expect.any(String),
      reason: "operator",
      archived: false,
    });
    // Idempotent: a second delete answers the same deletion.
    expect((await api("DELETE", `/v1/runs/${runId}`)).json).toEqual(deleted.json);

    const routes = [
      ["GET", ""],
      ["GET", "/nodes/ask"],
      ["GET", "/journal"],
      ["GET", "/events"],
      ["GET", "/gates"],
      ["POST", "/redrive"],
      ["POST", "/signals"],
    ];
    for (const [method = "GET", path] of routes) {
      const answer = await api(method, `/v1/runs/${runId}${path}`, method === "POST" ? { name: "x" } : undefined);
      expect([path, answer.status, answer.json?.error?.code]).toEqual([path, 410, "run.deleted"]);
    }
    const row = await listed(workflow, runId, "deleted");
    expect(row.deleted_at).toBe(deleted.json.deleted_at);
    expect(row.status).toBe("deleted");
  });

  it("does not start a new run under a deleted run's id", async ({ expect }) => {
    const workflow = uniqueId("delete-key");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, {})] });
    const first = await api("POST", `/v1/workflows/${workflow}/runs`, { input: {}, idempotency_key: "k1" });
    await waitForRun(first.json.run_id);
    expect((await api("DELETE", `/v1/runs/${first.json.run_id}`)).status).toBe(200);
    const again = await api("POST", `/v1/workflows/${workflow}/runs`, { input: {}, idempotency_key: "k1" });
    expect([again.status, again.json.error?.code]).toEqual([410, "run.deleted"]);
  });

  it("a token limited to other workflows meets 404 for a deleted run, one granted its workflow 410 and the archive", async ({
    expect,
  }) => {
    const workflow = uniqueId("delete-grant");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, { archive: true })] });
    const runId = await runCompleted(workflow);
    expect((await api("DELETE", `/v1/runs/${runId}`)).status).toBe(200);
    const token = async (workflows: string[]) =>
      (await api("POST", "/v1/tokens", { name: "limited", roles: ["reader"], workflows })).json.token as string;
    const elsewhere = await token(["elsewhere-*"]);
    const granted = await token([workflow]);
    const hidden = await api("GET", `/v1/runs/${runId}`, undefined, elsewhere);
    expect([hidden.status, hidden.json.error.code]).toEqual([404, "run.not_found"]);
    expect((await api("GET", `/v1/runs/${runId}/journal`, undefined, elsewhere)).status).toBe(404);
    const gone = await api("GET", `/v1/runs/${runId}`, undefined, granted);
    expect([gone.status, gone.json.error.code]).toEqual([410, "run.deleted"]);
    expect((await api("GET", `/v1/runs/${runId}/journal`, undefined, granted)).status).toBe(200);
  });

  it("releases the run's blobs: one no other run holds is deleted, one another run holds is kept", async ({
    expect,
  }) => {
    const workflow = uniqueId("delete-blobs");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, {})] });
    const [runId, other] = [await runCompleted(workflow), await runCompleted(workflow)];
    const own = await putBlob(env, { only: runId }, { runId, workflowId: workflow });
    const shared = await putBlob(env, { shared: workflow }, { runId, workflowId: workflow });
    await putBlob(env, { shared: workflow }, { runId: other, workflowId: workflow });
    expect((await api("DELETE", `/v1/runs/${runId}`)).status).toBe(200);
    expect(await env.BLOBS.head(blobKey(own.$blob))).toBeNull();
    expect(await env.BLOBS.head(blobKey(shared.$blob))).not.toBeNull();
    const rows = await env.RUN_INDEX.prepare("SELECT digest FROM blob_holders WHERE run_id = ?").bind(runId).all();
    expect(rows.results).toEqual([]);
  });

  it("answers a long poll of the journal that the deletion ends with no entries, not an error", async ({ expect }) => {
    const workflow = uniqueId("delete-poll");
    await register({ workflows: [callWorkflow(workflow, `/mark/${workflow}`, {})] });
    const runId = await runCompleted(workflow);
    const last = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries.length as number;
    const poll = runEvents(env, runId, last, 5_000);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the poll is waiting
    expect((await api("DELETE", `/v1/runs/${runId}`)).status).toBe(200);
    await expect(poll).resolves.toEqual([]);
  });

  it("404s a run that never existed", async ({ expect }) => {
    const missing = await api("DELETE", `/v1/runs/run_${"0".repeat(32)}`);
    expect([missing.status, missing.json.error.code]).toEqual([404, "run.not_found"]);
  });
});

describe("what a run costs to keep", () => {
  it("a finished 3-node run's object stores some kilobytes; once deleted only its tombstone", async ({ expect }) => {
    const workflow = uniqueId("sized");
    const step = httpStep("call", `${httpTarget()}/mark/${workflow}`);
    await register({
      workflows: [
        {
          id: workflow,
          nodes: {
            a: { task: { steps: [step] } },
            b: { task: { steps: [step] }, depends_on: ["a"] },
            c: { task: { steps: [step] }, depends_on: ["b"] },
          },
        },
      ],
    });
    const runId = await runCompleted(workflow);
    const size = () => runInDurableObject(stubOf(runId), (_instance, state) => state.storage.sql.databaseSize);
    const kept = await size();
    const journal = await api("GET", `/v1/runs/${runId}/journal`);
    expect((await api("DELETE", `/v1/runs/${runId}`)).status).toBe(200);
    const left = await size();
    console.log(
      JSON.stringify({ kept_bytes: kept, journal_json_bytes: JSON.stringify(journal.json).length, left_bytes: left }),
    );
    expect(left).toBeLessThan(kept);
  });
});

/** A run record as the coordinator keeps it, ended (or not) with `changes`. */
function recordOf(changes: Partial<RunRecord>): RunRecord {
  const snapshot = RunSnapshot.parse({
    workflow: { id: "kept", version: 1, definition: { id: "kept", nodes: { a: { task: "t" } } } },
    tasks: {},
    workflows: {},
  });
  const request = {
    run_id: "run_test",
    snapshot,
    input: {},
    mode: "auto" as const,
    idempotency_key: null,
    request_hash: "hash",
    created_by: "token:tester",
    trigger: { kind: "api" as const },
  };
  return { ...newRunState(request, 1_000).record, ...changes };
}

describe("the deadline", () => {
  const policy = retentionOf({ completed_days: 1, failed_days: 2 }, {});
  const ended = 10_000;
  it("counts from the end, or from the end of a compensation after it; none while it runs, compensates or owes cleanup", ({
    expect,
  }) => {
    const cases: [string, Partial<RunRecord>, number | null][] = [
      ["completed", { status: "completed", updated_at: ended }, ended + DAY_MS],
      ["failed", { status: "failed", updated_at: ended }, ended + 2 * DAY_MS],
      ["cancelled: no days, kept", { status: "cancelled", updated_at: ended }, null],
      ["redriven: queued again", { status: "queued", updated_at: ended }, null],
      [
        "compensating after the attestation",
        {
          status: "failed",
          updated_at: ended,
          compensation: { status: "running", trigger: "manual", started_at: ended + 5, finished_at: null },
        },
        null,
      ],
      [
        "compensated after the attestation",
        {
          status: "failed",
          updated_at: ended,
          compensation: { status: "completed", trigger: "manual", started_at: ended + 5, finished_at: ended + 500 },
        },
        ended + 500 + 2 * DAY_MS,
      ],
      ["still cancelling a child", { status: "failed", updated_at: ended, pending_cancels: ["key"] }, null],
    ];
    expect(cases.map(([name, changes]) => [name, deletionDueAt(recordOf(changes), policy)])).toEqual(
      cases.map(([name, , due]) => [name, due]),
    );
  });
});

describe("the deployment's defaults", () => {
  it("take the vars for each status the workflow leaves out; unset, empty, zero or not a number keeps", ({
    expect,
  }) => {
    const vars = { RETENTION_COMPLETED_DAYS: "30", RETENTION_FAILED_DAYS: " 0.5 ", RETENTION_CANCELLED_DAYS: "" };
    expect(retentionOf(undefined, vars)).toEqual({
      days: { completed: 30, failed: 0.5, cancelled: null },
      archive: false,
    });
    expect(retentionOf({ completed_days: 2, archive: true }, { ...vars, RETENTION_ARCHIVE: "false" })).toEqual({
      days: { completed: 2, failed: 0.5, cancelled: null },
      archive: true,
    });
    expect(retentionOf({}, { RETENTION_ARCHIVE: "true" }).archive).toBe(true);
    expect(["0", "-1", "abc", "Infinity", "40000", undefined].map(daysOf)).toEqual([
      null,
      null,
      null,
      null,
      null,
      null,
    ]);
  });

  it("refuses a retention that is not days, with the path of each problem", async ({ expect }) => {
    const workflow = uniqueId("bad-retention");
    const bad = { ...callWorkflow(workflow, "/mark/x", { completed_days: 0, archive: "yes", weeks: 2 }) };
    const refused = await api("POST", "/v1/definitions", { workflows: [bad] });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("definition.invalid");
    const paths = (refused.json.error.details as { path: string }[]).map((detail) => detail.path).sort();
    expect(paths).toEqual([
      "workflows.0.retention",
      "workflows.0.retention.archive",
      "workflows.0.retention.completed_days",
    ]);
  });
});
