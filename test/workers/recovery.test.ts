import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, onTestFinished, vi } from "vitest";
import { LIVENESS_CHECK_MS, PARENT_NOTIFY_RETRY_MS } from "../../coordinator/decide.ts";
import { runIdFor, sha256Hex } from "../../lib/ids.ts";
import { canonicalJson, verifyJournal } from "../../lib/journal/index.ts";
import { api, httpTarget, uniqueId, waitForRun } from "./helpers.ts";

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

interface Entry {
  seq: number;
  kind: string;
  body: Record<string, unknown>;
}

function stubOf(runId: string) {
  return env.COORDINATOR.get(env.COORDINATOR.idFromName(runId));
}

async function hits(key: string): Promise<number> {
  return ((await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number }).count;
}

async function register(bundle: Record<string, unknown>): Promise<void> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
}

async function journal(runId: string): Promise<Entry[]> {
  return (await api("GET", `/v1/runs/${runId}/journal`)).json.entries as Entry[];
}

async function verified(runId: string): Promise<boolean> {
  const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
  return (await verifyJournal(await journal(runId), jwks, { requireAttestation: true })).ok;
}

/** When the object's stored alarm is due (read inside the live instance, before the crash). */
function storedAlarm(runId: string): Promise<number | null> {
  return runInDurableObject(stubOf(runId), (_instance, state) => state.storage.getAlarm());
}

/**
 * Holds every event to a Durable Object (input gate closed) until `release`:
 * a call to it stays in flight, as one does when the process dies mid-call.
 */
function hold(stub: DurableObjectStub): { release: () => void } {
  let release = () => {};
  const gate = new Promise<void>((resolve) => {
    release = resolve;
  });
  runInDurableObject(stub, (_instance, state) => state.blockConcurrencyWhile(() => gate)).catch(() => {
    // The abort that stages the crash ends this call too.
  });
  // Released in any case, so a failing test leaves no object held for the next.
  onTestFinished(() => release());
  return { release: () => release() };
}

const httpStep = (ref: string, url: string) => ({ ref, action: { kind: "http", implementation: { method: "GET", url_template: url } } });
const countOf = (entries: readonly Entry[], kind: string, node?: string) => entries.filter((entry) => entry.kind === kind && (node === undefined || entry.body.node === node)).length;

describe("recovery needs no reader", () => {
  it("a dispatch lost in a restart is journaled task.lost and sent again by the alarm alone, never timed out", async ({ expect }) => {
    const key = uniqueId("lost");
    const id = uniqueId("one-call");
    // The attempt may take 20 s: its deadline (30 s with the grace) is far behind the liveness check.
    await register({ workflows: [{ id, nodes: { call: { timeout_ms: 20_000, task: { steps: [httpStep("wait", `${httpTarget()}/slow/${key}?ms=1500`)] } } } }] });
    const runId: string = (await api("POST", `/v1/workflows/${id}/runs`, { input: {} })).json.run_id;
    await vi.waitUntil(async () => (await hits(key)) >= 1, { timeout: 10_000 });

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    await runDurableObjectAlarm(stubOf(runId));
    // Sent again, with nobody reading the run.
    await vi.waitUntil(async () => (await hits(key)) >= 2, { timeout: 10_000 });

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

  it("a child start lost in a restart is asked for again by the parent's alarm alone, and the child runs once", async ({ expect }) => {
    const key = uniqueId("child");
    const child = uniqueId("child-flow");
    const parent = uniqueId("parent-flow");
    await register({
      workflows: [
        { id: child, nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } } },
        { id: parent, nodes: { sub: { workflow: child } } },
      ],
    });
    // Created in approval mode, so the start of its child is what the approval sets off.
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: {}, mode: "approval" })).json.run_id;
    // The catalog holds the child's resolution: the start is in flight when the process dies.
    const catalog = hold(env.CATALOG.get(env.CATALOG.idFromName("catalog")));
    const approved = await api("POST", `/v1/runs/${runId}/approve`);
    expect(approved.json.nodes.sub.status).toBe("waiting");

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    catalog.release();
    await runDurableObjectAlarm(stubOf(runId));
    // The child ran its task, and its report completes the parent: nobody read either run.
    await vi.waitUntil(async () => (await hits(key)) >= 1, { timeout: 10_000 });

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

  it("a child's report lost in a restart is sent again by the child's alarm alone, and the parent goes on", async ({ expect }) => {
    const key = uniqueId("report");
    const child = uniqueId("child-flow");
    const parent = uniqueId("parent-flow");
    await register({
      workflows: [
        { id: child, nodes: { wait: { task: { steps: [httpStep("wait", `${httpTarget()}/slow/${key}-child?ms=200`)] } } } },
        { id: parent, nodes: { sub: { workflow: child }, after: { depends_on: ["sub"], task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}-after`)] } } } },
      ],
    });
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: {} })).json.run_id;
    const started = await waitForRun(runId, (run) => run.nodes.sub.status === "waiting");
    expect(started.status).toBe("waiting");
    const childRunId = await vi.waitUntil(async () => (await journal(runId)).find((entry) => entry.kind === "child.started")?.body.child_run_id as string | undefined, { timeout: 10_000 });
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
    await vi.waitUntil(async () => (await hits(`${key}-after`)) >= 1, { timeout: 10_000 });

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    expect(countOf(entries, "child.finished", "sub")).toBe(1);
    expect(countOf(entries, "task.completed", "after")).toBe(1);
    expect(await hits(`${key}-child`)).toBe(1);
    expect(await verified(runId)).toBe(true);
    expect(await verified(childRunId)).toBe(true);
  });

  it("a crash while an auto run is created leaves no run stranded in drafting: creation and start commit together", async ({ expect }) => {
    const key = uniqueId("mark");
    const id = uniqueId("created");
    const idempotencyKey = uniqueId("key");
    await register({ workflows: [{ id, nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } } }] });
    const runId = await runIdFor(`${id}\n${idempotencyKey}`);
    // Staged crash: any commit of a journal entry after `run.created` fails, as if the
    // process died between the two (seq 2 is the start's `run.status`).
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec("CREATE TRIGGER staged_crash BEFORE INSERT ON journal WHEN NEW.seq >= 2 BEGIN SELECT RAISE(ABORT, 'staged crash'); END");
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

  it("an auto run stored in drafting (its start lost before creation and start were one transaction) starts on a retried create", async ({ expect }) => {
    const key = uniqueId("mark");
    const id = uniqueId("stranded");
    const idempotencyKey = uniqueId("key");
    await register({ workflows: [{ id, nodes: { mark: { task: { steps: [httpStep("mark", `${httpTarget()}/mark/${key}`)] } } } }] });
    // What the two-transaction creation left after a crash between them: `run.created`
    // committed, the run in drafting, in auto mode, with no alarm. Staged from an
    // approval-mode run whose record is then made an auto one's.
    const created = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: idempotencyKey, mode: "approval" });
    const runId: string = created.json.run_id;
    const autoHash = await sha256Hex(canonicalJson({ workflow: id, version: null, input: {}, mode: "auto" }));
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec("UPDATE blobs SET data = json_set(data, '$.mode', 'auto', '$.request_hash', ?) WHERE key = 'record' AND chunk = 0", autoHash);
    });
    await abortAllDurableObjects();

    const retried = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, idempotency_key: idempotencyKey });
    expect(retried.status).toBe(200);
    expect(retried.json.status).not.toBe("drafting");
    await vi.waitUntil(async () => (await hits(key)) >= 1, { timeout: 10_000 });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(await verified(runId)).toBe(true);
  });
});
