import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { LIVENESS_CHECK_MS, PARENT_NOTIFY_RETRY_MS } from "../../coordinator/decide.ts";
import { RUN_TABLES } from "../../coordinator/storage.ts";
import { runIdFor, sha256Hex } from "../../lib/ids.ts";
import { canonicalJson } from "../../lib/journal/index.ts";
import {
  oneStepWorkflow,
  registerWorkflow,
  untilHits,
  api,
  uniqueId,
  waitForRun,
  httpTarget,
  hits,
  type Entry,
  register,
  journal,
  verified,
  httpStep,
} from "./helpers.ts";
import { catalogStub, stubOf, storedAlarm, hold } from "./durable-helpers.ts";

/**
 * Recovery needs no reader. A restart (here: `abortAllDurableObjects`, which
 * drops every Durable Object instance, its memory and its calls in flight, as
 * a crash or a deploy does) interrupts some work; afterwards nothing reads the
 * run: the only thing that gives the object a chance to run again is its own
 * alarm (`runDurableObjectAlarm`). Each test checks, at the moment of the
 * crash, that the stored alarm is due within seconds (nothing else would wake
 * the object), then fires it, waits on the HTTP peer's counters (never on the
 * run), and only then reads the run and its journal once.
 */

const humanStep = (ref: string) => ({
  ref,
  action: { kind: "human", implementation: { prompt_template: "go on?", input_schema: { type: "object" } } },
});

const local = () => env as unknown as { SHELL_SERVER_URL: string };
const sandboxes = () => env.SANDBOX as unknown as DurableObjectNamespace;
const sandboxOf = (container: string) => sandboxes().get(sandboxes().idFromName(container));

/** The Sandbox's own storage: its owner record and the workspace's credential on the shell server. */
function sandboxRecord(
  container: string,
): Promise<{ owner: { run_id: string; released_at?: string } | undefined; token: string | undefined }> {
  return runInDurableObject(sandboxOf(container), (_instance, state) => ({
    owner: state.storage.kv.get<{ run_id: string; released_at?: string }>("sandbox:owner"),
    token: state.storage.kv.get<string>("sandbox:workspace-token"),
  }));
}

/** Reads a workspace file straight from the local shell server with the workspace's credential. */
async function readFromShellServer(
  container: string,
  token: string,
  path: string,
): Promise<{ status: number; text: string }> {
  const response = await fetch(
    `${local().SHELL_SERVER_URL}/v1/workspaces/${encodeURIComponent(container)}/files/read`,
    {
      method: "POST",
      headers: { "content-type": "application/json", "authorization": `Bearer ${token}` },
      body: JSON.stringify({ path }),
    },
  );
  return { status: response.status, text: await response.text() };
}
const countOf = (entries: readonly Entry[], kind: string, node?: string) =>
  entries.filter((entry) => entry.kind === kind && (node === undefined || entry.body.node === node)).length;

describe("recovery needs no reader", () => {
  it("a dispatch lost in a restart is journaled task.lost and sent again by the alarm alone, never timed out", async ({
    expect,
  }) => {
    const key = uniqueId("lost");
    const id = uniqueId("one-call");
    // The attempt may take 20 s: its deadline (30 s with the grace) is far behind the liveness check.
    await registerWorkflow({
      id,
      nodes: {
        call: { timeout_ms: 20_000, task: { steps: [httpStep("wait", `${httpTarget()}/slow/${key}?ms=1500`)] } },
      },
    });
    const runId: string = (await api("POST", `/v1/workflows/${id}/runs`, { input: {} })).json.run_id;
    await untilHits(key, 1);

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    await runDurableObjectAlarm(stubOf(runId));
    // Sent again, with nobody reading the run.
    await untilHits(key, 2);

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    expect(countOf(entries, "task.lost", "call")).toBe(1);
    expect(countOf(entries, "task.timeout")).toBe(0);
    expect(countOf(entries, "task.completed", "call")).toBe(1);
    expect(run.nodes.call.attempts).toBe(1);
    expect(await hits(key)).toBe(2);
    expect(await verified(runId)).toBe(true);
  });

  it("a child start lost in a restart is asked for again by the parent's alarm alone, and the child runs once", async ({
    expect,
  }) => {
    const key = uniqueId("child");
    const child = uniqueId("child-flow");
    const parent = uniqueId("parent-flow");
    await register({
      workflows: [
        oneStepWorkflow(child, "mark", httpStep("mark", `${httpTarget()}/mark/${key}`)),
        { id: parent, nodes: { sub: { workflow: child } } },
      ],
    });
    // Created in approval mode, so the start of its child is what the approval sets off.
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: {}, mode: "approval" })).json
      .run_id;
    // The catalog holds the child's resolution: the start is in flight when the process dies.
    const catalog = hold(catalogStub());
    const approved = await api("POST", `/v1/runs/${runId}/approve`);
    expect(approved.json.nodes.sub.status).toBe("waiting");

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    catalog.release();
    await runDurableObjectAlarm(stubOf(runId));
    // The child ran its task, and its report completes the parent: nobody read either run.
    await untilHits(key, 1);

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    expect(countOf(entries, "child.started", "sub")).toBe(1);
    expect(countOf(entries, "child.finished", "sub")).toBe(1);
    expect(countOf(entries, "node.completed", "sub")).toBe(1);
    expect(await hits(key)).toBe(1);
    const childRunId = String(entries.find((entry) => entry.kind === "child.started")?.body.child_run_id);
    expect(await verified(runId)).toBe(true);
    expect(await verified(childRunId)).toBe(true);
  });

  it("a child's report lost in a restart is sent again by the child's alarm alone, and the parent goes on", async ({
    expect,
  }) => {
    const key = uniqueId("report");
    const child = uniqueId("child-flow");
    const parent = uniqueId("parent-flow");
    await register({
      workflows: [
        {
          id: child,
          nodes: { wait: { task: { steps: [httpStep("wait", `${httpTarget()}/slow/${key}-child?ms=200`)] } } },
        },
        {
          id: parent,
          nodes: {
            sub: { workflow: child },
            after: { depends_on: ["sub"], task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}-after`)] } },
          },
        },
      ],
    });
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: {} })).json.run_id;
    const started = await waitForRun(runId, (run) => run.nodes.sub.status === "waiting");
    expect(started.status).toBe("waiting");
    const childRunId = await vi.waitUntil(
      async () =>
        (await journal(runId)).find((entry) => entry.kind === "child.started")?.body.child_run_id as string | undefined,
      { timeout: 10_000 },
    );
    // The parent holds every call: the child's report is in flight when the process dies.
    const parentHeld = hold(stubOf(runId));
    const finished = await waitForRun(childRunId);
    expect(finished.status).toBe("completed");

    const alarm = await storedAlarm(childRunId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + PARENT_NOTIFY_RETRY_MS);
    await abortAllDurableObjects();
    parentHeld.release();
    await runDurableObjectAlarm(stubOf(childRunId));
    // The parent got the report and dispatched the node after it: nobody read the parent.
    await untilHits(`${key}-after`, 1);

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    expect(countOf(entries, "child.finished", "sub")).toBe(1);
    expect(countOf(entries, "task.completed", "after")).toBe(1);
    expect(await hits(`${key}-child`)).toBe(1);
    expect(await verified(runId)).toBe(true);
    expect(await verified(childRunId)).toBe(true);
  });

  it("a cancel of a child lost in a restart is sent again by the parent's alarm alone, and the child ends cancelled", async ({
    expect,
  }) => {
    const child = uniqueId("gated-child");
    const parent = uniqueId("cancelled-parent");
    await register({
      workflows: [
        { id: child, nodes: { ask: { task: { steps: [humanStep("ask")] } } } },
        { id: parent, nodes: { sub: { workflow: child } } },
      ],
    });
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: {} })).json.run_id;
    const childRunId = await vi.waitUntil(
      async () =>
        (await journal(runId)).find((entry) => entry.kind === "child.started")?.body.child_run_id as string | undefined,
      { timeout: 10_000 },
    );
    // The child runs: it waits at its gate.
    await waitForRun(childRunId, (run) => run.gates.some((gate: { status: string }) => gate.status === "open"));
    // The child holds every call: the parent's cancel is in flight when the process dies.
    const childHeld = hold(stubOf(childRunId));
    const cancelled = await api("POST", `/v1/runs/${runId}/cancel`);
    expect(cancelled.json.status).toBe("cancelled");

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    childHeld.release();
    await runDurableObjectAlarm(stubOf(runId));
    // Only the parent's alarm ran; nobody read the parent. The child is cancelled.
    const ended = await waitForRun(childRunId, (run) => run.status !== "waiting", 10_000);
    expect(ended.status).toBe("cancelled");
    // The parent stops once the child confirmed: nothing pending, no alarm left.
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });

    const entries = await journal(runId);
    expect(entries.filter((entry) => entry.kind === "child.cancel_requested").map((entry) => entry.body)).toEqual([
      { node: "sub", item: null, step: null, child_run_id: childRunId, key: expect.any(String) },
    ]);
    const childEntries = await journal(childRunId);
    expect(childEntries.at(-1)?.body).toMatchObject({
      outcome: "cancelled",
      reason: "the parent run ended",
      created_by: `run:${runId}`,
    });
    expect(await verified(runId)).toBe(true);
    expect(await verified(childRunId)).toBe(true);
    // Cancel is idempotent on the child's side: another one changes nothing.
    const again = await api("POST", `/v1/runs/${childRunId}/cancel`);
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("run.terminal");
    expect(await journal(childRunId)).toHaveLength(childEntries.length);
  });

  it("a container release lost in a restart is sent again by the run's alarm alone, and the Sandbox is released", async ({
    expect,
  }) => {
    const key = uniqueId("last");
    const id = uniqueId("with-container");
    await registerWorkflow({
      id,
      resources: { dev_env: { type: "container" } },
      nodes: {
        work: {
          resource_bindings: { container: "dev_env" },
          task: {
            steps: [
              {
                ref: "write",
                action: { kind: "shell", implementation: { command_template: "echo kept > note.txt" } },
              },
            ],
          },
        },
        last: { depends_on: ["work"], task: { steps: [httpStep("wait", `${httpTarget()}/slow/${key}?ms=300`)] } },
      },
    });
    const runId: string = (await api("POST", `/v1/workflows/${id}/runs`, { input: {} })).json.run_id;
    const container = `${runId}/dev_env`;
    // The container is done with (its node completed) while the last node runs.
    await untilHits(key, 1);
    const claimed = await sandboxRecord(container);
    expect(claimed.owner).toMatchObject({ run_id: runId });
    expect(claimed.owner?.released_at).toBeUndefined();
    const token = claimed.token ?? "";
    expect((await readFromShellServer(container, token, "note.txt")).text).toContain("kept");
    // The Sandbox holds every call: the run's release is in flight when the process dies.
    const sandboxHeld = hold(sandboxOf(container));
    const finished = await waitForRun(runId);
    expect(finished.status).toBe("completed");

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    sandboxHeld.release();
    await runDurableObjectAlarm(stubOf(runId));
    // Only the run's alarm ran: the Sandbox is released, its workspace gone from the shell server.
    await vi.waitUntil(async () => (await sandboxRecord(container)).owner?.released_at !== undefined, {
      timeout: 10_000,
    });
    const gone = await readFromShellServer(container, token, "note.txt");
    expect(gone.status).not.toBe(200);
    expect(gone.text).not.toContain("kept");
    // Released once it answered: nothing pending, no alarm left.
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });
    expect(await verified(runId)).toBe(true);
  });

  it("a run queued for a delayed start keeps its alarm at start_at across a restart, and that alarm alone starts it", async ({
    expect,
  }) => {
    const key = uniqueId("delayed");
    const id = uniqueId("delayed-flow");
    await registerWorkflow({
      id,
      nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } },
    });
    const runId: string = (await api("POST", `/v1/workflows/${id}/runs`, { input: {}, delay_ms: 1_500 })).json.run_id;
    const startAt = Date.parse((await api("GET", `/v1/runs/${runId}`)).json.start_at);
    expect(await storedAlarm(runId)).toBe(startAt);
    await abortAllDurableObjects();
    // Loading the object again (here, to read its alarm) wakes nothing early: the alarm is still start_at.
    expect(await storedAlarm(runId)).toBe(startAt);
    expect(await hits(key)).toBe(0);

    await untilHits(key, 1);
    expect(Date.now()).toBeGreaterThanOrEqual(startAt);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    const running = entries.find((entry) => entry.kind === "run.status" && entry.body.to === "running");
    expect(Date.parse(String(running?.at))).toBeGreaterThanOrEqual(startAt);
    expect(await verified(runId)).toBe(true);
  });

  it("a run that ended with no children and no containers keeps no alarm and stores no cleanup fields", async ({
    expect,
  }) => {
    const key = uniqueId("plain");
    const id = uniqueId("plain-flow");
    await registerWorkflow({
      id,
      nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } },
    });
    const runId: string = (await api("POST", `/v1/workflows/${id}/runs`, { input: {} })).json.run_id;
    expect((await waitForRun(runId)).status).toBe("completed");
    // The run index's backstop alarm is held only until its last row is written.
    await vi.waitUntil(async () => (await storedAlarm(runId)) === null, { timeout: 10_000 });
    const stored = await runInDurableObject(stubOf(runId), async (_instance, state) => ({
      alarm: await state.storage.getAlarm(),
      record: JSON.parse(
        state.storage.sql
          .exec<{ data: string }>("SELECT data FROM blobs WHERE key = 'record' ORDER BY chunk")
          .toArray()
          .map((row) => row.data)
          .join(""),
      ) as Record<string, unknown>,
    }));
    expect(stored.alarm).toBeNull();
    expect(Object.keys(stored.record)).not.toContain("pending_cancels");
    expect(Object.keys(stored.record)).not.toContain("pending_releases");
  });

  it("a crash while an auto run is created leaves no run stranded in drafting: creation and start commit together", async ({
    expect,
  }) => {
    const key = uniqueId("mark");
    const id = uniqueId("created");
    const idempotencyKey = uniqueId("key");
    await registerWorkflow({
      id,
      nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } },
    });
    const runId = await runIdFor(`${id}\n${idempotencyKey}`);
    // Staged crash: any commit of a journal entry after `run.created` fails (a page of
    // entries, one commit's, that ends past seq 1), as if the
    // process died between the two (seq 2 is the start's `run.status`).
    // A new object makes its tables with its run, in the same transaction: made here first to hold the trigger.
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec(RUN_TABLES);
      state.storage.sql.exec(
        "CREATE TRIGGER staged_crash BEFORE INSERT ON journal_pages WHEN NEW.last_seq >= 2 BEGIN SELECT RAISE(ABORT, 'staged crash'); END",
      );
    });
    const failed = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: idempotencyKey });
    expect(failed.status).toBeGreaterThanOrEqual(500);
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec("DROP TRIGGER staged_crash");
    });
    await abortAllDurableObjects();
    await runDurableObjectAlarm(stubOf(runId));

    // Nothing half-made: no run holds this id, and the client's retry creates and runs it.
    expect((await api("GET", `/v1/runs/${runId}`)).status).toBe(404);
    const retried = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: idempotencyKey });
    expect(retried.status).toBe(201);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(await hits(key)).toBe(1);
    expect(await verified(runId)).toBe(true);
  });

  it("an auto run stored in drafting (its start lost before creation and start were one transaction) starts on a retried create", async ({
    expect,
  }) => {
    const key = uniqueId("mark");
    const id = uniqueId("stranded");
    const idempotencyKey = uniqueId("key");
    await registerWorkflow({
      id,
      nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } },
    });
    // What the two-transaction creation left after a crash between them: `run.created`
    // committed, the run in drafting, in auto mode, with no alarm. Staged from an
    // approval-mode run whose record is then made an auto one's.
    const created = await api("POST", `/v1/workflows/${id}/runs`, {
      input: {},
      idempotency_key: idempotencyKey,
      mode: "approval",
    });
    const runId: string = created.json.run_id;
    const autoHash = await sha256Hex(canonicalJson({ workflow: id, version: null, input: {}, mode: "auto" }));
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec(
        "UPDATE blobs SET data = json_set(data, '$.mode', 'auto', '$.request_hash', ?) WHERE key = 'record' AND chunk = 0",
        autoHash,
      );
    });
    await abortAllDurableObjects();

    const retried = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: idempotencyKey });
    expect(retried.status).toBe(200);
    expect(retried.json.status).not.toBe("drafting");
    await untilHits(key, 1);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(await verified(runId)).toBe(true);
  });
});
