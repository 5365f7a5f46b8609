import { describe, it } from "vitest";
import { newRunState } from "../../coordinator/create.ts";
import { decide, type Decision, type RunEvent, type RunState } from "../../coordinator/decide.ts";
import { toLiveWork } from "../../coordinator/live.ts";
import { QUEUE_RETRY_MS } from "../../coordinator/run-limits.ts";
import { wantsLimitGrant } from "../../coordinator/wait-limits.ts";
import type { AgentState } from "../../schemas/agent.ts";
import { RunSnapshot, type Json, type LimitConfig, type TaskPayload, type TaskResult } from "../../schemas/index.ts";
import { apiStartRequest } from "./run-request.ts";

/**
 * Limits as the coordinator decides them, with plain objects (decide.test.ts
 * style): a step that suspends on a limit with no room, and a workflow whose
 * runs hold its limits. What is journaled, sent to the limit objects and
 * dispatched is read back from the decisions.
 */

const NOW = 1_700_000_000_000;
const RUN_ID = "run_limits";
const LIMIT: LimitConfig = { id: "api", version: 2, concurrency: 3 };
const METRICS = { duration_ms: 5, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };

/** One node `call` running a one-step task; the workflow's `limits` when given. */
function makeSnapshot(limits?: { limit: LimitConfig; key?: string }[]): RunSnapshot {
  const action = { kind: "context", implementation: { updates: [{ path: "done", expr: "true" }] } };
  return RunSnapshot.parse({
    workflow: {
      id: "wf",
      version: 1,
      definition: { id: "wf", nodes: { call: { task: { steps: [{ ref: "get", action }] } } } },
    },
    tasks: {
      call: {
        id: "wf/call",
        version: 0,
        steps: [{ ref: "get", action: { ...action, id: "wf/call/get", version: 0 } }],
      },
    },
    workflows: {},
    ...(limits === undefined ? {} : { limits }),
  });
}

function makeRun(snapshot: RunSnapshot, options: { input?: Json; priority?: number } = {}) {
  let state: RunState = newRunState(apiStartRequest(RUN_ID, snapshot, options.input ?? {}), NOW);
  if (options.priority !== undefined) {
    state = { ...state, record: { ...state.record, priority: options.priority } };
  }
  const run = {
    get state() {
      return state;
    },
    send(event: RunEvent, now = NOW): Decision {
      const decision = decide(state, event, { snapshot, now, random: () => 0 });
      state = decision.state;
      return decision;
    },
    wake(now = NOW, tokens: string[] = []): Decision {
      return run.send({ type: "wake", live: toLiveWork({ tokens }) }, now);
    },
    token(): string {
      const token = state.nodes.call?.invocations[0]?.token;
      if (!token) {
        throw new Error("nothing in flight");
      }
      return token;
    },
  };
  return run;
}

type Run = ReturnType<typeof makeRun>;

function commandsOf<K extends Decision["commands"][number]["kind"]>(decision: Decision, kind: K) {
  return decision.commands.filter(
    (command): command is Extract<Decision["commands"][number], { kind: K }> => command.kind === kind,
  );
}

function bodiesOf(decision: Decision, kind: string): unknown[] {
  return commandsOf(decision, "journal")
    .filter((entry) => entry.entryKind === kind)
    .map((entry) => entry.body);
}

function dispatchesOf(decision: Decision): TaskPayload[] {
  return commandsOf(decision, "dispatch").map((command) => command.payload);
}

/** The step's task answers: suspended on `LIMIT` for key `acme`, holder `h1` (with an agent step's loop when given). */
function suspendOnLimit(run: Run, now = NOW, agent?: AgentState): Decision {
  const result: TaskResult = {
    token_id: run.token(),
    success: true,
    output: null,
    metrics: METRICS,
    suspended: {
      step_ref: "get",
      step_index: 0,
      context: { input: {}, state: {}, output: {} },
      wait: { kind: "limit", limit: LIMIT, key: "acme", holder_id: "h1", ...(agent === undefined ? {} : { agent }) },
    },
  };
  return run.send({ type: "task_result", result }, now);
}

function startedRun(snapshot = makeSnapshot(), options: { input?: Json; priority?: number } = {}): Run {
  const run = makeRun(snapshot, options);
  run.send({ type: "start" });
  run.wake();
  return run;
}

describe("a step waiting for a limit", () => {
  it("suspends and journals limit.waiting; a wake queues its holder at the object, with the run's priority and a step lease", ({
    expect,
  }) => {
    const run = startedRun(makeSnapshot(), { priority: 8 });
    const suspended = suspendOnLimit(run, NOW + 10);
    expect(run.state.record.status).toBe("waiting");
    expect(run.state.nodes.call?.invocations[0]?.status).toBe("suspended");
    expect(bodiesOf(suspended, "limit.waiting")).toEqual([
      {
        node: "call",
        item: null,
        step: "get",
        key: `${RUN_ID}/0/call/0/1/get`,
        limit: { id: "api", version: 2 },
        limit_key: "acme",
      },
    ]);
    expect(commandsOf(suspended, "queue_for_limit")).toEqual([]); // a result sends nothing: the wake after it does
    const queued = commandsOf(run.wake(NOW + 10), "queue_for_limit");
    expect(queued).toEqual([
      {
        kind: "queue_for_limit",
        limit: LIMIT,
        key: "acme",
        holder: { id: "h1", run_id: RUN_ID, priority: 8 },
        lease: "step",
      },
    ]);
  });

  it("sends the request once, again only after QUEUE_RETRY_MS unanswered, and never once the object queued it", ({
    expect,
  }) => {
    const run = startedRun();
    suspendOnLimit(run);
    expect(commandsOf(run.wake(), "queue_for_limit")).toHaveLength(1);
    expect(commandsOf(run.wake(NOW + 1), "queue_for_limit")).toHaveLength(0);
    expect(commandsOf(run.wake(NOW + QUEUE_RETRY_MS), "queue_for_limit")).toHaveLength(1);
    const answered = run.send({
      type: "limit_queued",
      holder_id: "h1",
      answer: { granted: false, position: 4, retry_at: null },
    });
    expect(answered.wakeAt).toBeNull();
    expect(commandsOf(run.wake(NOW + 10 * QUEUE_RETRY_MS), "queue_for_limit")).toHaveLength(0);
    expect(run.state.nodes.call?.invocations[0]?.suspension?.waiting_for).toMatchObject({
      kind: "limit",
      queued: true,
    });
  });

  it("is served by a grant: limit.granted with the time waited, and the task is dispatched again to run the step, holding the slot", ({
    expect,
  }) => {
    const run = startedRun();
    suspendOnLimit(run);
    run.wake();
    run.send({ type: "limit_queued", holder_id: "h1", answer: { granted: false, position: 1, retry_at: null } });
    expect(wantsLimitGrant(run.state, "h1")).toBe(true);
    expect(wantsLimitGrant(run.state, "someone-else")).toBe(false);
    const granted = run.send({ type: "limit_granted", holder_id: "h1" }, NOW + 700);
    expect(bodiesOf(granted, "limit.granted")).toEqual([
      expect.objectContaining({ limit: { id: "api", version: 2 }, limit_key: "acme", waited_ms: 700 }),
    ]);
    const [payload] = dispatchesOf(run.wake(NOW + 700));
    expect(payload?.resume).toEqual({
      mode: "granted",
      holder_id: "h1",
      step_index: 0,
      context: { input: {}, state: {}, output: {} },
    });
    expect(wantsLimitGrant(run.state, "h1")).toBe(false);
  });

  it("keeps an agent step's loop while it waits, and the granted dispatch goes on with it", ({ expect }) => {
    const loop: AgentState = {
      turns: [
        {
          model: "m",
          tokens: { input: 3, output: 2 },
          cost_usd: 0,
          finish_reason: "tool-calls",
          calls: [{ id: "c1", name: "lookup", input: {}, output: { found: true } }],
        },
      ],
      usage: { tokens: { input: 3, output: 2 }, cost_usd: 0 },
    };
    const run = startedRun();
    suspendOnLimit(run, NOW, loop);
    run.wake();
    run.send({ type: "limit_granted", holder_id: "h1" });
    const [payload] = dispatchesOf(run.wake());
    expect(payload?.resume).toMatchObject({ mode: "granted", holder_id: "h1", agent: loop });
  });

  it("runs at once when the object grants the queue request itself", ({ expect }) => {
    const run = startedRun();
    suspendOnLimit(run);
    run.wake();
    const answered = run.send({
      type: "limit_queued",
      holder_id: "h1",
      answer: { granted: true, lease_until: NOW + 30_000 },
    });
    expect(bodiesOf(answered, "limit.granted")).toHaveLength(1);
    expect(dispatchesOf(run.wake())[0]?.resume?.mode).toBe("granted");
  });

  it("is withdrawn when its run is cancelled: limit.withdrawn, the holder dropped at the object, and a late grant not wanted", ({
    expect,
  }) => {
    const run = startedRun();
    suspendOnLimit(run);
    run.wake();
    const cancelled = run.send({ type: "cancel", reason: "stop" });
    expect(bodiesOf(cancelled, "limit.withdrawn")).toEqual([
      expect.objectContaining({ limit_key: "acme", reason: "run cancelled" }),
    ]);
    expect(commandsOf(cancelled, "withdraw_from_limit")).toEqual([
      { kind: "withdraw_from_limit", limit: "api", key: "acme", holder_ids: ["h1"] },
    ]);
    expect(wantsLimitGrant(run.state, "h1")).toBe(false);
    run.send({ type: "limit_granted", holder_id: "h1" });
    expect(dispatchesOf(run.wake())).toEqual([]);
  });

  it("shows in the views as waiting_for kind limit, with its limit, key and since", ({ expect }) => {
    const run = startedRun();
    suspendOnLimit(run, NOW + 5);
    const suspension = run.state.nodes.call?.invocations[0]?.suspension;
    expect(suspension?.waiting_for).toMatchObject({ kind: "limit", key: "acme", holder_id: "h1", started_at: NOW + 5 });
  });
});

describe("a workflow's limits", () => {
  const snapshot = makeSnapshot([{ limit: LIMIT, key: "input.customer" }]);

  it("keep a run queued until it holds each: the key over the run's input, the run's holder and priority, no lease", ({
    expect,
  }) => {
    const run = makeRun(snapshot, { input: { customer: "acme" }, priority: 7 });
    run.send({ type: "start" });
    const woke = run.wake();
    expect(run.state.record.status).toBe("queued");
    expect(dispatchesOf(woke)).toEqual([]);
    expect(commandsOf(woke, "queue_for_limit")).toEqual([
      {
        kind: "queue_for_limit",
        limit: LIMIT,
        key: "acme",
        holder: { id: `run:${RUN_ID}`, run_id: RUN_ID, priority: 7 },
        lease: "run",
      },
    ]);
    expect(woke.wakeAt).toBe(NOW + QUEUE_RETRY_MS);
    const queued = run.send({
      type: "limit_queued",
      holder_id: `run:${RUN_ID}`,
      answer: { granted: false, position: 2, retry_at: null },
    });
    expect(bodiesOf(queued, "run.limit_waiting")).toEqual([
      { limit: { id: "api", version: 2 }, limit_key: "acme", priority: 7 },
    ]);
    expect(queued.wakeAt).toBeNull();
    expect(wantsLimitGrant(run.state, `run:${RUN_ID}`)).toBe(true);
    const granted = run.send({ type: "limit_granted", holder_id: `run:${RUN_ID}` }, NOW + 900);
    expect(granted.wakeAt).toBe(NOW + 900); // held: a wake starts it
    expect(bodiesOf(granted, "run.limit_granted")).toEqual([
      { limit: { id: "api", version: 2 }, limit_key: "acme", waited_ms: 900 },
    ]);
    const started = run.wake(NOW + 900);
    expect(run.state.record.status).toBe("running");
    expect(dispatchesOf(started)).toHaveLength(1);
  });

  it("are given up when the run ends, by wakes until each object answered", ({ expect }) => {
    const run = makeRun(snapshot, { input: { customer: "acme" } });
    run.send({ type: "start" });
    run.wake();
    run.send({ type: "limit_queued", holder_id: `run:${RUN_ID}`, answer: { granted: true, lease_until: null } });
    run.wake();
    const token = run.token();
    const ended = run.send({
      type: "task_result",
      result: { token_id: token, success: true, output: {}, metrics: METRICS },
    });
    expect(run.state.record.status).toBe("completed");
    expect(run.state.record.pending_limit_releases).toEqual(["api/acme"]);
    expect(commandsOf(ended, "release_limits")).toEqual([]);
    const cleanup = run.wake();
    expect(commandsOf(cleanup, "release_limits")).toEqual([{ kind: "release_limits", objects: ["api/acme"] }]);
    expect(commandsOf(run.wake(NOW, []), "release_limits")).toHaveLength(1); // not live: sent again
    run.send({ type: "limits_released", objects: ["api/acme"] });
    expect(run.state.record.pending_limit_releases).toBeUndefined();
  });

  it("give up a place in the queue when the run is cancelled while queued", ({ expect }) => {
    const run = makeRun(snapshot, { input: { customer: "acme" } });
    run.send({ type: "start" });
    run.wake();
    run.send({ type: "cancel", reason: "stop" });
    expect(run.state.record.status).toBe("cancelled");
    expect(run.state.record.pending_limit_releases).toEqual(["api/acme"]);
    expect(wantsLimitGrant(run.state, `run:${RUN_ID}`)).toBe(false);
  });

  it("are asked again by a redriven run only once the failed run's slots were given up", ({ expect }) => {
    const run = makeRun(snapshot, { input: { customer: "acme" } });
    run.send({ type: "start" });
    run.wake();
    run.send({ type: "limit_queued", holder_id: `run:${RUN_ID}`, answer: { granted: true, lease_until: null } });
    run.wake();
    const failure = { code: "step.failed", step: "get", message: "boom", retryable: false, context_snapshot: null };
    run.send({
      type: "task_result",
      result: { token_id: run.token(), success: false, error: failure, metrics: METRICS },
    });
    expect(run.state.record.status).toBe("failed");
    run.send({ type: "redrive" });
    expect(run.state.record.status).toBe("queued");
    expect(commandsOf(run.wake(), "queue_for_limit")).toEqual([]);
    run.send({ type: "limits_released", objects: ["api/acme"] });
    expect(commandsOf(run.wake(), "queue_for_limit")).toHaveLength(1);
  });

  it("fail the run with limit.invalid_key when the key does not evaluate over the input", ({ expect }) => {
    const run = makeRun(snapshot, { input: { other: 1 } });
    run.send({ type: "start" });
    run.wake();
    expect(run.state.record.status).toBe("failed");
    expect(run.state.record.error?.code).toBe("limit.invalid_key");
    expect(run.state.record.error?.message).toContain("input.customer");
  });

  it("are asked in order: the second only once the first is held", ({ expect }) => {
    const second: LimitConfig = { id: "fleet", version: 1, rate: { limit: 10, period_ms: 1000 } };
    const run = makeRun(makeSnapshot([{ limit: LIMIT }, { limit: second }]));
    run.send({ type: "start" });
    const first = run.wake();
    expect(commandsOf(first, "queue_for_limit").map((command) => command.limit.id)).toEqual(["api"]);
    run.send({ type: "limit_queued", holder_id: `run:${RUN_ID}`, answer: { granted: true, lease_until: null } });
    const next = run.wake();
    expect(commandsOf(next, "queue_for_limit").map((command) => [command.limit.id, command.key])).toEqual([
      ["fleet", ""],
    ]);
    expect(run.state.record.status).toBe("queued");
  });
});
