import { describe, it } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import { toLiveWork } from "../../coordinator/live.ts";
import { decide, LIVENESS_CHECK_MS, type Decision, type RunEvent, type RunState } from "../../coordinator/decide.ts";
import {
  RunSnapshot,
  type CompensatePolicy,
  type Json,
  type StepRecord,
  type TaskPayload,
  type TaskResult,
} from "../../schemas/index.ts";
import { apiStartRequest } from "./run-request.ts";

/**
 * Compensation decided with plain objects (decide.test.ts style): a snapshot
 * whose steps declare undos, results that carry step records with the undo
 * enqueued, and an explicit clock. What is dispatched, journaled and
 * scheduled is read back from the decisions.
 */

const NOW = 1_700_000_000_000;
const WORKFLOW_ID = "wf";

/** A resolved step `make` whose action declares an undo (both `context` actions: nothing here runs them). */
function undoableTask(nodeId: string) {
  const id = `${WORKFLOW_ID}/${nodeId}`;
  const context = { kind: "context", implementation: { updates: [{ path: "done", expr: "true" }] } };
  return {
    id,
    version: 0,
    steps: [
      {
        ref: "make",
        action: {
          ...context,
          id: `${id}/make`,
          version: 0,
          undo: { action: { ...context, id: `${id}/make/undo`, version: 0 }, retry: { max_attempts: 2 } },
        },
      },
    ],
  };
}

/** A chain of nodes `ids[0] → ids[1] → …`, each making one item. */
function makeSnapshot(ids: string[], compensate?: CompensatePolicy): RunSnapshot {
  const nodes = Object.fromEntries(
    ids.map((id, index) => [
      id,
      { task: { steps: [{ ref: "make", action: "make" }] }, ...(index > 0 ? { depends_on: [ids[index - 1]] } : {}) },
    ]),
  );
  return RunSnapshot.parse({
    workflow: {
      id: WORKFLOW_ID,
      version: 1,
      definition: { id: WORKFLOW_ID, ...(compensate ? { compensate } : {}), nodes },
    },
    tasks: Object.fromEntries(ids.map((id) => [id, undoableTask(id)])),
    workflows: {},
  });
}

const METRICS = { duration_ms: 5, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };

/** The step record of a completed `make` that enqueued its undo with `input`. */
const madeStep = (input: Json): StepRecord => ({
  step: "make",
  action: "context make@0",
  status: "completed",
  duration_ms: 1,
  attempts: [{ attempt: 1, duration_ms: 1 }],
  undo: { action: "context make/undo@0", input },
});

function makeRun(ids: string[], compensate?: CompensatePolicy) {
  const snapshot = makeSnapshot(ids, compensate);
  let state: RunState = newRunState(apiStartRequest("run_test", snapshot), NOW);
  const run = {
    get state() {
      return state;
    },
    send(event: RunEvent, now = NOW): Decision {
      const decision = decide(state, event, { snapshot, now, random: () => 0 });
      state = decision.state;
      return decision;
    },
    /** A wake with everything this run dispatched still live (or only `tokens`). */
    wake(now = NOW, tokens?: string[]): Decision {
      return run.send({ type: "wake", live: toLiveWork({ tokens: tokens ?? liveTokens(state) }) }, now);
    },
    result(result: TaskResult, now = NOW): Decision {
      return run.send({ type: "task_result", result }, now);
    },
    /** Runs the chain: each node's task completes with its item's undo enqueued. */
    complete(): void {
      run.send({ type: "start" });
      for (const id of ids) {
        run.wake();
        const token = state.nodes[id]?.invocations[0]?.token ?? "";
        run.result({ token_id: token, success: true, output: { id }, metrics: METRICS, steps: [madeStep({ id })] });
      }
    },
  };
  return run;
}

function liveTokens(state: RunState): string[] {
  const nodes = Object.values(state.nodes).flatMap((node) =>
    node.invocations.flatMap((invocation) => (invocation.token === null ? [] : [invocation.token])),
  );
  const undos = (state.record.undos ?? []).flatMap((undo) => (undo.token === null ? [] : [undo.token]));
  return [...nodes, ...undos];
}

const journaled = (decision: Decision) =>
  decision.commands.flatMap((command) => (command.kind === "journal" ? [command] : []));
const kindsOf = (decision: Decision) => journaled(decision).map((command) => command.entryKind);
const dispatched = (decision: Decision): TaskPayload[] =>
  decision.commands.flatMap((command) => (command.kind === "dispatch" ? [command.payload] : []));
const success = (token: string): TaskResult => ({ token_id: token, success: true, output: {}, metrics: METRICS });
const failure = (token: string, retryable: boolean): TaskResult => ({
  token_id: token,
  success: false,
  error: { code: "http.status", message: "no", retryable, context_snapshot: null },
  metrics: METRICS,
});

/** Fails the run from outside (cancel) or by a last node's failure: a chain of `a`, `b` then `boom` failing. */
function failedRun(compensate?: CompensatePolicy) {
  const run = makeRun(["a", "b", "boom"], compensate);
  run.send({ type: "start" });
  for (const id of ["a", "b"]) {
    run.wake();
    const token = run.state.nodes[id]?.invocations[0]?.token ?? "";
    run.result({ token_id: token, success: true, output: {}, metrics: METRICS, steps: [madeStep({ id })] });
  }
  run.wake();
  const boom = run.state.nodes.boom?.invocations[0]?.token ?? "";
  const ended = run.result(failure(boom, false));
  return { run, ended };
}

describe("compensation, decided", () => {
  it("enqueues each completed step's undo and, after a failure, opens the compensation right after the attestation", ({
    expect,
  }) => {
    const { run, ended } = failedRun();
    expect(run.state.record.status).toBe("failed");
    expect(run.state.record.undos?.map((undo) => [undo.node, undo.input, undo.status])).toEqual([
      ["a", { id: "a" }, "enqueued"],
      ["b", { id: "b" }, "enqueued"],
    ]);
    expect(kindsOf(ended).slice(-2)).toEqual(["attest", "compensation.started"]);
    expect(journaled(ended).at(-1)?.body).toEqual({ trigger: "on_failure", pending: [1, 0] });
    // Nothing is dispatched by the result's event: a wake is asked for now.
    expect(dispatched(ended)).toEqual([]);
    expect(ended.wakeAt).toBe(NOW);
  });

  it("runs the undos one at a time, latest first, through the executor, and closes with a new attestation", ({
    expect,
  }) => {
    const { run } = failedRun();
    const first = run.wake();
    const [undoB] = dispatched(first);
    expect(undoB).toMatchObject({ node_id: "b", input: { id: "b" }, task: { steps: [{ ref: "undo" }] } });
    expect(kindsOf(first)).toEqual(["undo.dispatched"]);
    expect(first.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    expect(kindsOf(run.result(success(undoB?.token_id ?? "")))).toEqual(["undo.completed"]);
    const [undoA] = dispatched(run.wake());
    expect(undoA).toMatchObject({ node_id: "a", input: { id: "a" } });
    const last = run.result(success(undoA?.token_id ?? ""));
    expect(kindsOf(last)).toEqual(["undo.completed", "compensation.finished", "attest"]);
    expect(journaled(last).at(-1)?.body).toMatchObject({
      outcome: "failed",
      compensation: { status: "completed", undone: 2, undos: 2 },
    });
    expect(run.state.record.status).toBe("failed");
    expect(run.state.record.compensation?.status).toBe("completed");
    expect(last.wakeAt).toBeNull();
  });

  it("retries a retryable undo failure by its own policy, and stops at a final one, which a redrive resumes", ({
    expect,
  }) => {
    const { run } = failedRun();
    const [first] = dispatched(run.wake());
    const retried = run.result(failure(first?.token_id ?? "", true));
    expect(kindsOf(retried)).toEqual(["undo.failed"]);
    const retryAt = run.state.record.undos?.[1]?.retry_at ?? 0;
    expect(retryAt).toBeGreaterThan(NOW);
    expect(retried.wakeAt).toBe(retryAt);
    expect(dispatched(run.wake(retryAt - 1))).toEqual([]);
    const [second] = dispatched(run.wake(retryAt));
    expect(second).toMatchObject({ node_id: "b", retry_attempt: 1 });
    // The undo's retry allows 2 attempts: this failure is final, and a stays enqueued.
    const stopped = run.result(failure(second?.token_id ?? "", true), retryAt);
    expect(kindsOf(stopped)).toEqual(["undo.failed", "compensation.finished", "attest"]);
    expect(run.state.record.undos?.map((undo) => undo.status)).toEqual(["enqueued", "failed"]);
    expect(journaled(stopped).at(-1)?.body).toMatchObject({ compensation: { status: "failed", undone: 0 } });
    const redriven = run.send({ type: "redrive" }, retryAt);
    expect(kindsOf(redriven)).toEqual(["compensation.started"]);
    expect(journaled(redriven)[0]?.body).toEqual({ trigger: "redrive", pending: [1, 0] });
    expect(run.state.record.status).toBe("failed");
    expect(dispatched(run.wake(retryAt))).toMatchObject([{ node_id: "b", retry_attempt: 0 }]);
  });

  it("stops at an undo whose input could not be built, without calling anything", ({ expect }) => {
    const run = makeRun(["a", "boom"]);
    run.send({ type: "start" });
    run.wake();
    const unbuilt: StepRecord = {
      ...madeStep(null),
      undo: {
        action: "context make/undo@0",
        error: { code: "mapping.unresolved", message: "$.output.id selected nothing" },
      },
    };
    run.result({
      token_id: run.state.nodes.a?.invocations[0]?.token ?? "",
      success: true,
      output: {},
      metrics: METRICS,
      steps: [unbuilt],
    });
    run.wake();
    run.result(failure(run.state.nodes.boom?.invocations[0]?.token ?? "", false));
    const stopped = run.wake();
    expect(dispatched(stopped)).toEqual([]);
    expect(journaled(stopped).map((entry) => [entry.entryKind, entry.body])).toMatchObject([
      ["undo.failed", { token: null, attempt: 1, error: { code: "mapping.unresolved", retryable: false } }],
      ["compensation.finished", { status: "failed", undone: 0, undos: 1 }],
      ["attest", { outcome: "failed", compensation: { status: "failed" } }],
    ]);
  });

  it("counts a lost undo dispatch as a retryable failure", ({ expect }) => {
    const { run } = failedRun();
    const [first] = dispatched(run.wake());
    const lost = run.wake(NOW + LIVENESS_CHECK_MS, []);
    expect(journaled(lost).map((entry) => [entry.entryKind, entry.body])).toMatchObject([
      ["undo.failed", { token: first?.token_id, error: { code: "task.lost", retryable: true } }],
    ]);
  });

  it("compensates after a cancel by default, and only as the policy asks", ({ expect }) => {
    const cancelled = makeRun(["a", "b"]);
    cancelled.send({ type: "start" });
    cancelled.wake();
    const token = cancelled.state.nodes.a?.invocations[0]?.token ?? "";
    cancelled.result({ token_id: token, success: true, output: {}, metrics: METRICS, steps: [madeStep({ id: "a" })] });
    const decision = cancelled.send({ type: "cancel", reason: "stop" });
    expect(kindsOf(decision).slice(-2)).toEqual(["attest", "compensation.started"]);
    expect(journaled(decision).at(-1)?.body).toEqual({ trigger: "on_cancel", pending: [0] });

    for (const policy of ["never", "on_cancel"] as const) {
      const { run, ended } = failedRun(policy);
      expect(kindsOf(ended).at(-1), policy).toBe("attest");
      expect(run.state.record.compensation).toBeUndefined();
      // By hand, once.
      expect(kindsOf(run.send({ type: "compensate" }))).toEqual(["compensation.started"]);
      expect(run.state.record.compensation?.trigger).toBe("manual");
      expect(kindsOf(run.send({ type: "compensate" }))).toEqual([]);
    }
  });

  it("leaves a run that completed, or has nothing to undo, as it was", ({ expect }) => {
    const done = makeRun(["a"]);
    done.complete();
    expect(done.state.record.status).toBe("completed");
    expect(kindsOf(done.send({ type: "compensate" }))).toEqual([]);
    const plain = makeRun(["a"]);
    plain.send({ type: "start" });
    plain.wake();
    const ended = plain.result(failure(plain.state.nodes.a?.invocations[0]?.token ?? "", false));
    expect(kindsOf(ended).at(-1)).toBe("attest");
    expect(plain.state.record.undos).toBeUndefined();
  });
});
