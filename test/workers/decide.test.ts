import { describe, it } from "vitest";
import { newRunState, runCreatedEntry, type CreateRunRequest } from "../../coordinator/create.ts";
import { MAX_CLEANUP_CALLS_PER_EVENT } from "../../coordinator/cleanup.ts";
import { Draft } from "../../coordinator/draft.ts";
import { toLiveWork } from "../../coordinator/live.ts";
import { MAX_CHILD_STARTS_PER_EVENT } from "../../coordinator/waits.ts";
import {
  DEADLINE_GRACE_MS,
  decide,
  DEFAULT_TASK_TIMEOUT_MS,
  LIVENESS_CHECK_MS,
  MAX_CLEANUP_RETRY_MS,
  MAX_DISPATCHES_PER_EVENT,
  PARENT_NOTIFY_RETRY_MS,
  type Decision,
  type RunEvent,
  type RunState,
} from "../../coordinator/decide.ts";
import {
  RunSnapshot,
  type JsonObject,
  type Json,
  type Node,
  type ResolvedTask,
  type Step,
  type TaskError,
  type TaskPayload,
  type TaskResult,
  type Workflow,
} from "../../schemas/index.ts";
import { apiStartRequest } from "./run-request.ts";

/**
 * `decide` is pure: these tests feed it plain objects (a snapshot, a state,
 * events) with an explicit clock and random source, and read back the next
 * state, the commands and the next wake. They run in workerd because decide
 * evaluates CEL and JSONPath through the production modules.
 */

const NOW = 1_700_000_000_000;
const RUN_ID = "run_test";
const WORKFLOW_ID = "wf";

// ─── Factories ───────────────────────────────────────────────────────────────

/** One `context` step, inline (as a user writes it in a node's task). */
function makeStep(): Step {
  return { ref: "set", action: { kind: "context", implementation: { updates: [{ path: "done", expr: "true" }] } } };
}

/** The same step as the run snapshot holds it: resolved, with a synthetic id and version 0. */
function makeTask(nodeId: string): ResolvedTask {
  const id = `${WORKFLOW_ID}/${nodeId}`;
  return {
    id,
    version: 0,
    steps: [
      {
        ref: "set",
        action: {
          id: `${id}/set`,
          version: 0,
          kind: "context",
          implementation: { updates: [{ path: "done", expr: "true" }] },
        },
      },
    ],
  };
}

/**
 * A snapshot, parsed by the real schema, whose nodes each run an inline task
 * of one `context` step, except nodes given a `workflow`, which run that
 * child workflow (pinned at version 1).
 */
function makeSnapshot(
  nodes: Record<string, Partial<Node>>,
  workflow: Partial<Omit<Workflow, "nodes">> = {},
): RunSnapshot {
  const definitions: Record<string, Node> = {};
  const tasks: Record<string, ResolvedTask> = {};
  const workflows: Record<string, { id: string; version: number }> = {};
  for (const [nodeId, node] of Object.entries(nodes)) {
    if (node.workflow === undefined) {
      definitions[nodeId] = { task: { steps: [makeStep()] }, ...node };
      tasks[nodeId] = makeTask(nodeId);
    } else {
      definitions[nodeId] = node;
      workflows[nodeId] = { id: typeof node.workflow === "string" ? node.workflow : "chosen", version: 1 };
    }
  }
  return RunSnapshot.parse({
    workflow: { id: WORKFLOW_ID, version: 1, definition: { id: WORKFLOW_ID, ...workflow, nodes: definitions } },
    tasks,
    workflows,
  });
}

/** What a start asks besides the snapshot: its input and mode, and a delayed start's `start_at` or `delay_ms`. */
type StartRequest = Partial<Pick<CreateRunRequest, "input" | "mode" | "start_at" | "delay_ms">>;

function makeRequest(snapshot: RunSnapshot, request: StartRequest = {}): CreateRunRequest {
  return { ...apiStartRequest(RUN_ID, snapshot), ...request };
}

function makeState(snapshot: RunSnapshot, request: StartRequest = {}): RunState {
  return newRunState(makeRequest(snapshot, request), NOW);
}

const METRICS = { duration_ms: 5, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };

function makeResult(token: string, output: Json = { done: true }): TaskResult {
  return { token_id: token, success: true, output, metrics: METRICS };
}

function makeFailure(token: string, error: Partial<TaskError> = {}): TaskResult {
  return {
    token_id: token,
    success: false,
    error: {
      code: "step.failed",
      step: "set",
      message: "boom",
      retryable: false,
      context_snapshot: null,
      ...error,
    },
    metrics: METRICS,
  };
}

/** The tokens of every attempt in flight: what a coordinator that never restarted holds as `live`. */
function liveTokens(state: RunState): string[] {
  return Object.values(state.nodes).flatMap((node) =>
    node.invocations.flatMap((invocation) =>
      invocation.status === "running" && invocation.token !== null ? [invocation.token] : [],
    ),
  );
}

interface TestRun {
  snapshot: RunSnapshot;
  state: RunState;
  send(event: RunEvent, now?: number, random?: () => number): Decision;
  /** The alarm; by default every dispatch in flight is still live, and when `live` is given only what it lists is. */
  wake(now?: number, live?: Parameters<typeof toLiveWork>[0]): Decision;
  succeed(token: string, output?: Json, now?: number): Decision;
  fail(token: string, error?: Partial<TaskError>, now?: number): Decision;
  /** The token of a node's invocation in flight. */
  token(nodeId: string, index?: number): string;
}

/** A run in `drafting`, driven one event at a time: each decision becomes the next state. */
function makeRun(
  nodes: Record<string, Partial<Node>>,
  options: { workflow?: Partial<Omit<Workflow, "nodes">> } & StartRequest = {},
): TestRun {
  const { workflow, ...request } = options;
  const snapshot = makeSnapshot(nodes, workflow);
  const run: TestRun = {
    snapshot,
    state: makeState(snapshot, request),
    send(event, now = NOW, random = () => 0) {
      const decision = decide(run.state, event, { snapshot, now, random });
      run.state = decision.state;
      return decision;
    },
    wake: (now = NOW, live = { tokens: liveTokens(run.state) }) =>
      run.send({ type: "wake", live: toLiveWork(live) }, now),
    succeed: (token, output, now = NOW) => run.send({ type: "task_result", result: makeResult(token, output) }, now),
    fail: (token, error, now = NOW) => run.send({ type: "task_result", result: makeFailure(token, error) }, now),
    token(nodeId, index = 0) {
      const token = run.state.nodes[nodeId]?.invocations.find((invocation) => invocation.index === index)?.token;
      if (!token) {
        throw new Error(`node ${nodeId}[${index}] has no dispatch in flight`);
      }
      return token;
    },
  };
  return run;
}

/** A random source that returns `values` in turn (then 0), counting its draws. */
function makeRandom(...values: number[]): { random: () => number; draws: () => number } {
  let draws = 0;
  return {
    random: () => values[draws++] ?? 0,
    draws: () => draws,
  };
}

/** Start, then the first wake: returns the wake's decision. */
function startRun(run: TestRun, now = NOW): Decision {
  run.send({ type: "start" }, now);
  return run.wake(now);
}

function resultOf(result: TaskResult): RunEvent {
  return { type: "task_result", result };
}

function dispatchesOf(decision: Decision): TaskPayload[] {
  return decision.commands.flatMap((command) => (command.kind === "dispatch" ? [command.payload] : []));
}

interface JournalCommand {
  seq: number;
  entryKind: string;
  body: JsonObject;
}

function journalOf(decision: Decision): JournalCommand[] {
  return decision.commands.flatMap((command) => (command.kind === "journal" ? [command] : []));
}

/** The bodies of the entries of `kind` that the decision journals. */
function bodiesOf(decision: Decision, kind: string) {
  return journalOf(decision)
    .filter((entry) => entry.entryKind === kind)
    .map((entry) => entry.body);
}

function kindsOf(decision: Decision): string[] {
  return journalOf(decision).map((entry) => entry.entryKind);
}

/** The one journal entry of a kind in a decision. */
function entryOf(decision: Decision, kind: string): JournalCommand {
  const entries = journalOf(decision).filter((entry) => entry.entryKind === kind);
  const [entry] = entries;
  if (!entry || entries.length > 1) {
    throw new Error(`expected one ${kind} entry, found ${entries.length}: ${kindsOf(decision).join(", ")}`);
  }
  return entry;
}

function lastEntry(decision: Decision): JournalCommand {
  const entry = journalOf(decision).at(-1);
  if (!entry) {
    throw new Error("the decision journals nothing");
  }
  return entry;
}

function nodeIdsOf(decision: Decision): string[] {
  return dispatchesOf(decision).map((payload) => payload.node_id);
}

function independentNodes(count: number): Record<string, Partial<Node>> {
  return Object.fromEntries(Array.from({ length: count }, (_, index) => [`n${index}`, {}]));
}

// ─── Tests ───────────────────────────────────────────────────────────────────

describe("starting a run", () => {
  it("start moves a drafting run to queued and asks for a wake now", ({ expect }) => {
    const run = makeRun({ a: {} });
    const decision = run.send({ type: "start" });
    expect(decision.state.record.status).toBe("queued");
    expect(decision.wakeAt).toBe(NOW);
    expect(dispatchesOf(decision)).toEqual([]);
    expect(journalOf(decision)).toEqual([
      { kind: "journal", seq: 2, entryKind: "run.status", body: { from: "drafting", to: "queued", reason: "started" } },
    ]);
  });

  it("a second start changes nothing", ({ expect }) => {
    const run = makeRun({ a: {} });
    run.send({ type: "start" });
    const decision = run.send({ type: "start" });
    expect(decision.commands).toEqual([]);
    expect(decision.state.record.status).toBe("queued");
  });

  it("a wake leaves a run that waits for its approval in drafting and asks for no further wake", ({ expect }) => {
    const run = makeRun({ a: {} }, { mode: "approval" });
    const decision = run.wake();
    expect(decision.commands).toEqual([]);
    expect(decision.state.record.status).toBe("drafting");
    expect(decision.wakeAt).toBeNull();
  });

  it("a wake starts an auto run still in drafting (its start was lost with a restart) and dispatches its first wave", ({
    expect,
  }) => {
    const run = makeRun({ a: {} });
    const decision = run.wake();
    expect(kindsOf(decision)).toEqual(["run.status", "run.status", "node.started", "task.dispatched"]);
    expect(
      journalOf(decision)
        .slice(0, 2)
        .map((entry) => entry.body),
    ).toEqual([
      { from: "drafting", to: "queued", reason: "started" },
      { from: "queued", to: "running", reason: "dispatching" },
    ]);
    expect(decision.state.record.status).toBe("running");
  });

  it("the first wake moves a queued run to running and dispatches every root node", ({ expect }) => {
    const run = makeRun({ a: {}, b: {}, c: { depends_on: ["a"] } }, { input: { user: "ada" } });
    const decision = startRun(run);
    expect(decision.state.record.status).toBe("running");
    expect(entryOf(decision, "run.status").body).toEqual({ from: "queued", to: "running", reason: "dispatching" });
    expect(nodeIdsOf(decision)).toEqual(["a", "b"]);
    const [payload] = dispatchesOf(decision);
    expect(payload).toEqual({
      token_id: run.token("a"),
      workflow_run_id: RUN_ID,
      workflow_id: "wf",
      workflow_version: 1,
      node_id: "a",
      item_index: null,
      iteration: 1,
      task_id: "wf/a",
      task_version: 0,
      task: run.snapshot.tasks.a,
      input: { user: "ada" },
      resources: {},
      timeout_ms: DEFAULT_TASK_TIMEOUT_MS,
      retry_attempt: 0,
      tools: [],
    });
    expect(decision.state.nodes.a).toMatchObject({ status: "running", attempts: 1, started_at: NOW, iterations: 1 });
    expect(decision.state.nodes.c).toMatchObject({ status: "pending", invocations: [], iterations: 0 });
    expect(kindsOf(decision)).toEqual([
      "run.status",
      "node.started",
      "node.started",
      "task.dispatched",
      "task.dispatched",
    ]);
    // The attempts' deadlines are minutes away; the liveness check comes first.
    expect(decision.state.nodes.a?.invocations[0]?.deadline_at).toBe(NOW + DEFAULT_TASK_TIMEOUT_MS + DEADLINE_GRACE_MS);
    expect(decision.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
  });

  it("every node start journals node.started with its iteration and invocation counts", ({ expect }) => {
    const run = makeRun(
      { a: {}, each: { foreach: { items: "$.input.items" }, when: "item != 'skip'" } },
      { input: { items: ["x", "skip", "y"] } },
    );
    const decision = startRun(run);
    expect(bodiesOf(decision, "node.started")).toEqual([
      { node: "a", iteration: 1, invocations: 1, skipped: 0 },
      { node: "each", iteration: 1, invocations: 3, skipped: 1 },
    ]);
  });

  it("every dispatch gets a token of its own", ({ expect }) => {
    const run = makeRun(independentNodes(3));
    const tokens = dispatchesOf(startRun(run)).map((payload) => payload.token_id);
    expect(new Set(tokens).size).toBe(3);
  });

  it("journal commands have consecutive seqs starting after the record's journal_seq", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } });
    run.state = { ...run.state, record: { ...run.state.record, journal_seq: 41 } };
    const decisions = [run.send({ type: "start" }), run.wake()];
    decisions.push(run.succeed(run.token("a")), run.wake());
    decisions.push(run.succeed(run.token("b")));
    const seqs = decisions.flatMap((decision) => journalOf(decision).map((entry) => entry.seq));
    expect(seqs).toEqual(Array.from({ length: seqs.length }, (_, index) => 42 + index));
    expect(run.state.record.journal_seq).toBe(seqs.at(-1));
    expect(run.state.record.status).toBe("completed");
  });

  it("decide leaves the state it is given untouched", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } });
    startRun(run);
    const before = run.state;
    const copy = structuredClone(before);
    run.succeed(run.token("a"));
    expect(before).toEqual(copy);
  });
});

describe("delayed starts", () => {
  const DELAY_MS = 2_000;

  it("a start with delay_ms is queued until NOW + delay_ms: a wake before then dispatches nothing and keeps the alarm there", ({
    expect,
  }) => {
    const run = makeRun({ a: {} }, { delay_ms: DELAY_MS });
    expect(run.state.record.start_at).toBe(NOW + DELAY_MS);
    const started = run.send({ type: "start" });
    expect(started.state.record.status).toBe("queued");
    expect(started.wakeAt).toBe(NOW + DELAY_MS);

    const early = run.wake(NOW + DELAY_MS - 1);
    expect(early.commands).toEqual([]);
    expect(early.state.record.status).toBe("queued");
    expect(early.wakeAt).toBe(NOW + DELAY_MS);

    const due = run.wake(NOW + DELAY_MS);
    expect(entryOf(due, "run.status").body).toEqual({ from: "queued", to: "running", reason: "dispatching" });
    expect(nodeIdsOf(due)).toEqual(["a"]);
  });

  it("an auto run's start decided with its first wake leaves a delayed start queued, with the alarm at start_at", ({
    expect,
  }) => {
    const run = makeRun({ a: {} }, { start_at: NOW + DELAY_MS });
    const wake: RunEvent = { type: "wake", live: toLiveWork({ tokens: [] }) };
    const decision = decide(run.state, { type: "start" }, { snapshot: run.snapshot, now: NOW, random: () => 0 }, wake);
    expect(decision.state.record.status).toBe("queued");
    expect(dispatchesOf(decision)).toEqual([]);
    expect(decision.wakeAt).toBe(NOW + DELAY_MS);
  });

  it("a start_at already past starts the run at once", ({ expect }) => {
    const run = makeRun({ a: {} }, { start_at: NOW - DELAY_MS });
    expect(run.send({ type: "start" }).wakeAt).toBe(NOW);
    expect(nodeIdsOf(run.wake())).toEqual(["a"]);
  });

  it("the run's timeout_ms counts from start_at, not from creation", ({ expect }) => {
    const delayed = makeRun({ a: {} }, { workflow: { timeout_ms: 5_000 }, delay_ms: DELAY_MS });
    expect(delayed.state.record.deadline_at).toBe(NOW + DELAY_MS + 5_000);
    const past = makeRun({ a: {} }, { workflow: { timeout_ms: 5_000 }, start_at: NOW - DELAY_MS });
    expect(past.state.record.deadline_at).toBe(NOW + 5_000);
  });

  it("run.created records start_at; a run started at once has none", ({ expect }) => {
    const snapshot = makeSnapshot({ a: {} });
    const request = makeRequest(snapshot, { delay_ms: DELAY_MS });
    const delayed = runCreatedEntry(newRunState(request, NOW).record, request, new Date(NOW).toISOString());
    expect(delayed.body.start_at).toBe(new Date(NOW + DELAY_MS).toISOString());
    const plain = makeRequest(snapshot);
    expect(runCreatedEntry(newRunState(plain, NOW).record, plain, "").body).not.toHaveProperty("start_at");
  });

  it("a run paused before its start is due resumes into queued, and one resumed after it runs", ({ expect }) => {
    const run = makeRun({ a: {} }, { delay_ms: DELAY_MS });
    run.send({ type: "start" });
    expect(run.send({ type: "pause" }, NOW + 100).wakeAt).toBeNull();
    const early = run.send({ type: "resume" }, NOW + 200);
    expect(entryOf(early, "run.status").body).toEqual({ from: "paused", to: "queued", reason: "resumed by request" });
    expect(early.wakeAt).toBe(NOW + DELAY_MS);
    expect(dispatchesOf(run.wake(NOW + 300))).toEqual([]);

    run.send({ type: "pause" }, NOW + 400);
    const late = run.send({ type: "resume" }, NOW + DELAY_MS + 1);
    expect(late.state.record.status).toBe("running");
    expect(nodeIdsOf(run.wake(NOW + DELAY_MS + 1))).toEqual(["a"]);
  });

  it("a cancel while queued ends the run and asks for no wake", ({ expect }) => {
    const run = makeRun({ a: {} }, { delay_ms: DELAY_MS });
    run.send({ type: "start" });
    const cancelled = run.send({ type: "cancel", reason: "not needed" }, NOW + 100);
    expect(cancelled.state.record.status).toBe("cancelled");
    expect(cancelled.wakeAt).toBeNull();
    expect(dispatchesOf(run.wake(NOW + DELAY_MS))).toEqual([]);
  });

  it("an approval run with a delayed start waits for its approval, then for start_at", ({ expect }) => {
    const run = makeRun({ a: {} }, { mode: "approval", delay_ms: DELAY_MS });
    expect(run.wake().wakeAt).toBeNull();
    const approved = run.send({ type: "start" }, NOW + 100);
    expect(approved.state.record.status).toBe("queued");
    expect(approved.wakeAt).toBe(NOW + DELAY_MS);
    expect(dispatchesOf(run.wake(NOW + 100))).toEqual([]);
    expect(nodeIdsOf(run.wake(NOW + DELAY_MS))).toEqual(["a"]);
  });
});

describe("scheduling", () => {
  it("a chain dispatches its next node only on the wake after the previous node's result", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } });
    expect(nodeIdsOf(startRun(run))).toEqual(["a"]);

    const result = run.succeed(run.token("a"), { n: 1 });
    expect(dispatchesOf(result)).toEqual([]);
    expect(result.wakeAt).toBe(NOW);
    expect(result.state.record.status).toBe("running");
    expect(result.state.nodes.a?.status).toBe("completed");

    const wake = run.wake();
    expect(nodeIdsOf(wake)).toEqual(["b"]);
  });

  it("a result decided with a following wake is the result's decision and then the wake's, in one", ({ expect }) => {
    // A chain, a diamond's join and a failure with a retry: what the wake finds due differs.
    const cases: [Record<string, Partial<Node>>, (run: TestRun) => RunEvent][] = [
      [{ a: {}, b: { depends_on: ["a"] }, c: { depends_on: ["b"] } }, (run) => resultOf(makeResult(run.token("a")))],
      [{ a: {}, b: {}, c: { depends_on: ["a", "b"] } }, (run) => resultOf(makeResult(run.token("a")))],
      [
        { a: { retry: { max_attempts: 2, initial_delay_ms: 0, jitter: false } }, b: { depends_on: ["a"] } },
        (run) => resultOf(makeFailure(run.token("a"), { retryable: true })),
      ],
    ];
    for (const [nodes, eventOf] of cases) {
      const run = makeRun(nodes);
      startRun(run);
      const event = eventOf(run);
      const context = { snapshot: run.snapshot, now: NOW + 5, random: () => 0.5 };
      const wakeOf = (state: RunState): RunEvent => ({ type: "wake", live: toLiveWork({ tokens: liveTokens(state) }) });
      const first = decide(run.state, event, context);
      const apart =
        first.wakeAt !== null && first.wakeAt <= context.now ? decide(first.state, wakeOf(first.state), context) : null;
      const together = decide(run.state, event, context, wakeOf(run.state));
      expect(together.commands).toEqual([...first.commands, ...(apart?.commands ?? [])]);
      expect(together.state).toEqual((apart ?? first).state);
      expect(together.wakeAt).toBe((apart ?? first).wakeAt);
      expect([...together.changedNodes].sort()).toEqual(
        [...new Set([...first.changedNodes, ...(apart?.changedNodes ?? [])])].sort(),
      );
    }
  });

  it("a following wake is not decided when the event leaves nothing due now", ({ expect }) => {
    const run = makeRun({ a: {}, b: {}, c: { depends_on: ["a", "b"] } });
    startRun(run);
    const event = resultOf(makeResult(run.token("a")));
    const context = { snapshot: run.snapshot, now: NOW, random: () => 0 };
    const wake: RunEvent = { type: "wake", live: toLiveWork({ tokens: [] }) }; // would find b lost, were it decided
    expect(decide(run.state, event, context, wake)).toEqual(decide(run.state, event, context));
  });

  it("a result that makes no work ready asks for no immediate wake", ({ expect }) => {
    const run = makeRun({ a: {}, b: {}, c: { depends_on: ["a", "b"] } });
    startRun(run);
    const result = run.succeed(run.token("a"), null, NOW + 10);
    expect(dispatchesOf(result)).toEqual([]);
    expect(result.wakeAt).toBe(NOW + 10 + LIVENESS_CHECK_MS);
  });

  it("a diamond dispatches both branches in one wake and the join only after both", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] }, c: { depends_on: ["a"] }, d: { depends_on: ["b", "c"] } });
    expect(nodeIdsOf(startRun(run))).toEqual(["a"]);
    run.succeed(run.token("a"));
    expect(nodeIdsOf(run.wake())).toEqual(["b", "c"]);

    const first = run.succeed(run.token("b"));
    expect(first.wakeAt).not.toBe(NOW);
    expect(nodeIdsOf(run.wake())).toEqual([]);

    const second = run.succeed(run.token("c"));
    expect(second.wakeAt).toBe(NOW);
    expect(nodeIdsOf(run.wake())).toEqual(["d"]);
    run.succeed(run.token("d"));
    expect(run.state.record.status).toBe("completed");
  });

  it("max_parallel bounds the dispatches in flight across wakes", ({ expect }) => {
    const run = makeRun(independentNodes(5), { workflow: { max_parallel: 2 } });
    expect(nodeIdsOf(startRun(run))).toEqual(["n0", "n1"]);
    expect(run.state.record.status).toBe("running");

    const result = run.succeed(run.token("n0"));
    expect(result.wakeAt).toBe(NOW);
    expect(nodeIdsOf(run.wake())).toEqual(["n2"]);
    expect(liveTokens(run.state)).toHaveLength(2);
  });

  it("one wake never dispatches more than MAX_DISPATCHES_PER_EVENT, even with room for all", ({ expect }) => {
    const total = MAX_DISPATCHES_PER_EVENT * 2 + 7;
    const run = makeRun(independentNodes(total), { workflow: { max_parallel: 1000 } });
    const counts = [dispatchesOf(startRun(run)).length];
    while (counts.reduce((sum, count) => sum + count, 0) < total) {
      expect(run.state.record.status).toBe("running");
      counts.push(dispatchesOf(run.wake()).length);
    }
    expect(counts).toEqual([MAX_DISPATCHES_PER_EVENT, MAX_DISPATCHES_PER_EVENT, 7]);
    expect(liveTokens(run.state)).toHaveLength(total);
  });
});

describe("conditions and skips", () => {
  it.for<{ when: string; input: JsonObject; dispatched: boolean }>([
    { when: "input.go", input: { go: false }, dispatched: false },
    { when: "input.go", input: { go: true }, dispatched: true },
    { when: "input.count + 1 > 2", input: { count: 2 }, dispatched: true },
    { when: "input.count + 1 > 2", input: { count: 1 }, dispatched: false },
  ])("when `$when` over $input dispatches: $dispatched", ({ when, input, dispatched }, { expect }) => {
    const run = makeRun({ a: { when } }, { input });
    const decision = startRun(run);
    expect(nodeIdsOf(decision)).toEqual(dispatched ? ["a"] : []);
    expect(decision.state.nodes.a?.status).toBe(dispatched ? "running" : "skipped");
  });

  it("a node whose when is false is skipped with a node.skipped entry, and a run of skips completes", ({ expect }) => {
    const run = makeRun({ a: { when: "input.go" } }, { input: { go: false } });
    const decision = startRun(run);
    const skipped = entryOf(decision, "node.skipped");
    expect(skipped.body).toEqual({ node: "a", reason: "when is false: input.go" });
    expect(decision.state.nodes.a).toMatchObject({ status: "skipped", settled_seq: skipped.seq, finished_at: NOW });
    expect(decision.state.record.status).toBe("completed");
    expect(lastEntry(decision).body.cited).toEqual([skipped.seq]);
  });

  it("when sees the state written by a dependency", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"], when: "state.a.ok" } });
    startRun(run);
    run.succeed(run.token("a"), { ok: false });
    expect(run.state.nodes.b?.status).toBe("skipped");
    expect(run.state.record.status).toBe("completed");
  });

  it("a node whose dependencies were all skipped is skipped, and the skip cascades", ({ expect }) => {
    const run = makeRun({ a: { when: "false" }, b: { depends_on: ["a"] }, c: { depends_on: ["b"] } });
    const decision = startRun(run);
    expect(bodiesOf(decision, "node.skipped")).toEqual([
      { node: "a", reason: "when is false: false" },
      { node: "b", reason: "all dependencies were skipped" },
      { node: "c", reason: "all dependencies were skipped" },
    ]);
    expect(nodeIdsOf(decision)).toEqual([]);
    expect(decision.state.record.status).toBe("completed");
  });

  it("a result that starts a skip cascade settles it all, dependents defined before their dependency included", ({
    expect,
  }) => {
    // Definition order c, d, a, b: c waits on b, which is defined after it; d is independent and still running.
    const run = makeRun({
      c: { depends_on: ["b"] },
      d: {},
      a: {},
      b: { depends_on: ["a"], when: "false" },
    });
    expect(nodeIdsOf(startRun(run))).toEqual(["d", "a"]);
    // The run is running: this result's event looks only at what it changed and what depends on that.
    const decision = run.succeed(run.token("a"));
    expect(bodiesOf(decision, "node.skipped")).toEqual([
      { node: "b", reason: "when is false: false" },
      { node: "c", reason: "all dependencies were skipped" },
    ]);
    expect(decision.state.record.status).toBe("running");
    expect(run.succeed(run.token("d")).state.record.status).toBe("completed");
  });

  it("a node with one skipped and one completed dependency runs", ({ expect }) => {
    const run = makeRun({ a: { when: "false" }, b: {}, c: { depends_on: ["a", "b"] } });
    expect(nodeIdsOf(startRun(run))).toEqual(["b"]);
    run.succeed(run.token("b"));
    expect(nodeIdsOf(run.wake())).toEqual(["c"]);
  });
});

describe("outputs", () => {
  it("a node without output mapping writes its task output at state.<node>", ({ expect }) => {
    const run = makeRun({ fetch: {} });
    startRun(run);
    const decision = run.succeed(run.token("fetch"), { user: { id: 7 } });
    expect(decision.state.record.context.state).toEqual({ fetch: { user: { id: 7 } } });
    expect(decision.state.record.context.output).toEqual({});
  });

  it("an explicit output mapping writes output.x, and the run completes with context.output", ({ expect }) => {
    const run = makeRun({ fetch: { output_mapping: { "output.x": "$.user.id" } } });
    startRun(run);
    const decision = run.succeed(run.token("fetch"), { user: { id: 7 } });
    expect(decision.state.record.context).toMatchObject({ state: {}, output: { x: 7 } });
    expect(decision.state.record.status).toBe("completed");
    expect(decision.wakeAt).toBeNull();
    const completed = entryOf(decision, "node.completed");
    expect(kindsOf(decision)).toEqual(["task.completed", "node.completed", "run.status", "attest"]);
    expect(lastEntry(decision).body).toEqual({
      outcome: "completed",
      reason: "all nodes settled",
      cited: [completed.seq],
      created_by: "token:tester",
      workflow: { id: WORKFLOW_ID, version: 1 },
      output: { x: 7 },
    });
  });

  it.for([
    { output: { x: 7 }, status: "completed" },
    { output: { x: "seven" }, status: "failed" },
  ])("a run whose output is $output against output_schema ends $status", ({ output, status }, { expect }) => {
    const run = makeRun(
      { a: { output_mapping: { "output.x": "$.x" } } },
      { workflow: { output_schema: { type: "object", properties: { x: { type: "integer" } }, required: ["x"] } } },
    );
    startRun(run);
    const decision = run.succeed(run.token("a"), output);
    expect(decision.state.record.status).toBe(status);
    expect(lastEntry(decision).entryKind).toBe("attest");
    if (status === "failed") {
      expect(decision.state.record.error).toMatchObject({ code: "run.invalid_output" });
      expect(decision.state.record.error?.message).toContain("output.x");
      expect(lastEntry(decision).body).toMatchObject({ outcome: "failed", error: { code: "run.invalid_output" } });
    }
  });
});

describe("task failures", () => {
  it("a non-retryable failure fails the node and the run, and the attestation cites the node.failed entry", ({
    expect,
  }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } });
    startRun(run);
    const decision = run.fail(run.token("a"), { code: "http.status", message: "404 from upstream" });
    const error = { code: "http.status", message: "404 from upstream", node: "a", retryable: false, step: "set" };
    expect(decision.state.nodes.a).toMatchObject({ status: "failed", error });
    expect(decision.state.record.status).toBe("failed");
    expect(decision.state.record.error).toEqual(error);
    expect(decision.wakeAt).toBeNull();
    expect(kindsOf(decision)).toEqual(["task.failed", "node.failed", "node.cancelled", "run.status", "attest"]);
    const attest = lastEntry(decision);
    expect(attest.entryKind).toBe("attest");
    expect(attest.body).toMatchObject({ outcome: "failed", error });
    expect(attest.body.cited).toContain(entryOf(decision, "node.failed").seq);
    expect(decision.state.nodes.b?.status).toBe("cancelled");
  });

  it("with fail_fast, a failure cancels the other attempts in flight and their late results are not journaled", ({
    expect,
  }) => {
    const run = makeRun({ a: {}, b: {} });
    startRun(run);
    const tokenB = run.token("b");
    const decision = run.fail(run.token("a"));
    expect(entryOf(decision, "node.cancelled").body).toEqual({ node: "b", reason: "node a failed (fail_fast)" });
    expect(decision.state.nodes.b?.invocations[0]).toMatchObject({ status: "cancelled", token: null });
    expect(decision.state.record.status).toBe("failed");

    const late = run.succeed(tokenB);
    expect(late.commands).toEqual([]);
    expect(late.state).toEqual(decision.state);
  });

  it("without fail_fast, the run fails only once the attempts in flight have settled, and cancels the nodes that never started", ({
    expect,
  }) => {
    const run = makeRun({ a: {}, b: {}, c: { depends_on: ["b"] } }, { workflow: { fail_fast: false } });
    startRun(run);
    const failure = run.fail(run.token("a"));
    expect(failure.state.record.status).toBe("running");
    expect(kindsOf(failure)).toEqual(["task.failed", "node.failed"]);

    const last = run.succeed(run.token("b"));
    expect(kindsOf(last)).toEqual(["task.completed", "node.completed", "node.cancelled", "run.status", "attest"]);
    expect(entryOf(last, "node.cancelled").body).toEqual({ node: "c", reason: "run failed" });
    expect(last.state.nodes.b?.status).toBe("completed");
    expect(last.state.nodes.c).toMatchObject({ status: "cancelled", invocations: [], finished_at: NOW });
    expect(last.state.record.status).toBe("failed");
    expect(last.state.record.error).toMatchObject({ node: "a" });
    expect(lastEntry(last).entryKind).toBe("attest");
  });

  it("on_failure continue records the error in state._errors, runs dependents and completes the run", ({ expect }) => {
    const run = makeRun({ a: { on_failure: "continue" }, b: { depends_on: ["a"] } });
    startRun(run);
    const failure = run.fail(run.token("a"), { code: "step.failed", message: "boom" });
    expect(failure.state.nodes.a?.status).toBe("failed");
    expect(entryOf(failure, "node.failed").body).toMatchObject({ node: "a", on_failure: "continue" });
    expect(failure.state.record.context.state._errors).toEqual([
      { node: "a", error: { code: "step.failed", message: "boom" } },
    ]);
    expect(failure.wakeAt).toBe(NOW);

    expect(nodeIdsOf(run.wake())).toEqual(["b"]);
    const done = run.succeed(run.token("b"));
    expect(done.state.record.status).toBe("completed");
    expect(done.state.record.error).toBeNull();
  });
});

describe("retries", () => {
  const retry = { max_attempts: 3, initial_delay_ms: 1000, jitter: false };

  it("a retryable failure schedules a retry and the run waits for it", ({ expect }) => {
    const run = makeRun({ a: { retry } });
    startRun(run);
    const decision = run.fail(run.token("a"), { code: "http.status", retryable: true });
    expect(decision.state.nodes.a?.invocations[0]).toMatchObject({
      status: "retrying",
      attempts: 1,
      token: null,
      retry_at: NOW + 1000,
      error: { code: "http.status", retryable: true },
    });
    expect(decision.state.nodes.a?.status).toBe("waiting");
    expect(decision.state.record.status).toBe("waiting");
    expect(decision.wakeAt).toBe(NOW + 1000);
    expect(entryOf(decision, "task.retry_scheduled").body).toEqual({
      node: "a",
      item: null,
      attempt: 2,
      at: new Date(NOW + 1000).toISOString(),
    });
    expect(dispatchesOf(decision)).toEqual([]);
  });

  it("a wake before retry_at dispatches nothing; a wake at retry_at re-dispatches attempt 2", ({ expect }) => {
    const run = makeRun({ a: { retry } });
    startRun(run);
    const firstToken = run.token("a");
    run.fail(firstToken, { retryable: true });

    const early = run.wake(NOW + 999);
    expect(dispatchesOf(early)).toEqual([]);
    expect(early.wakeAt).toBe(NOW + 1000);

    const due = run.wake(NOW + 1000);
    const [payload] = dispatchesOf(due);
    expect(payload).toMatchObject({ node_id: "a", retry_attempt: 1 });
    expect(payload?.token_id).not.toBe(firstToken);
    expect(entryOf(due, "task.dispatched").body).toMatchObject({ attempt: 2 });
    expect(due.state.nodes.a).toMatchObject({ status: "running", attempts: 2 });
    expect(due.state.record.status).toBe("running");
  });

  it("after max_attempts failed attempts, with growing backoff, the node fails", ({ expect }) => {
    const run = makeRun({ a: { retry } });
    startRun(run);
    let now = NOW;
    const waits: number[] = [];
    for (let attempt = 1; attempt < 3; attempt++) {
      const decision = run.fail(run.token("a"), { retryable: true }, now);
      const retryAt = decision.state.nodes.a?.invocations[0]?.retry_at ?? Number.NaN;
      waits.push(retryAt - now);
      now = retryAt;
      run.wake(now);
    }
    const last = run.fail(run.token("a"), { retryable: true }, now);
    expect(waits).toEqual([1000, 2000]);
    expect(last.state.nodes.a).toMatchObject({ status: "failed", attempts: 3 });
    expect(kindsOf(last)).not.toContain("task.retry_scheduled");
    expect(last.state.record.status).toBe("failed");
  });

  it("a non-retryable error is not retried even under a retry policy", ({ expect }) => {
    const run = makeRun({ a: { retry } });
    startRun(run);
    const decision = run.fail(run.token("a"), { retryable: false });
    expect(kindsOf(decision)).not.toContain("task.retry_scheduled");
    expect(decision.state.nodes.a?.status).toBe("failed");
    expect(decision.state.record.status).toBe("failed");
  });

  it("a Retry-After longer than the backoff delays the retry", ({ expect }) => {
    const run = makeRun({ a: { retry } });
    startRun(run);
    const decision = run.fail(run.token("a"), { retryable: true, retry_after_ms: 5000 });
    expect(decision.wakeAt).toBe(NOW + 5000);
  });

  it.for([
    { random: 0, wait: 500 },
    { random: 0.5, wait: 750 },
  ])(
    "backoff jitter draws from the random source it is given: $random waits $wait ms",
    ({ random, wait }, { expect }) => {
      const run = makeRun({ a: { retry: { ...retry, jitter: true } } });
      startRun(run);
      const decision = run.send(
        { type: "task_result", result: makeFailure(run.token("a"), { retryable: true }) },
        NOW,
        () => random,
      );
      expect(decision.wakeAt).toBe(NOW + wait);
    },
  );
});

describe("timeouts", () => {
  /** When the coordinator gives up on an attempt of a node with `timeout_ms: 5000`. */
  const DEADLINE = NOW + 5000 + DEADLINE_GRACE_MS;

  it("an attempt is bounded by its node's timeout_ms, and the coordinator's own deadline comes DEADLINE_GRACE_MS later", ({
    expect,
  }) => {
    const run = makeRun({ a: { timeout_ms: 5000 } });
    const decision = startRun(run);
    expect(dispatchesOf(decision)[0]?.timeout_ms).toBe(5000);
    expect(decision.state.nodes.a?.invocations[0]).toMatchObject({ dispatched_at: NOW, deadline_at: DEADLINE });
    expect(decision.wakeAt).toBe(Math.min(DEADLINE, NOW + LIVENESS_CHECK_MS));
  });

  it("a wake at timeout_ms but before the grace has passed leaves the attempt running", ({ expect }) => {
    const run = makeRun({ a: { timeout_ms: 5000 } });
    startRun(run);
    const decision = run.wake(DEADLINE - 1);
    expect(decision.commands).toEqual([]);
    expect(decision.state.nodes.a?.invocations[0]?.status).toBe("running");
    expect(decision.wakeAt).toBe(DEADLINE);
  });

  it("a wake past an attempt's deadline journals task.timeout then task.failed, and retries it as retryable", ({
    expect,
  }) => {
    const run = makeRun({ a: { timeout_ms: 5000, retry: { max_attempts: 2, initial_delay_ms: 1000, jitter: false } } });
    startRun(run);
    const token = run.token("a");
    const decision = run.wake(DEADLINE);
    expect(kindsOf(decision)).toEqual(["task.timeout", "task.failed", "task.retry_scheduled", "run.status"]);
    expect(entryOf(decision, "task.timeout").body).toEqual({ node: "a", item: null, token, attempt: 1 });
    expect(entryOf(decision, "task.failed").body).toEqual({
      node: "a",
      item: null,
      token,
      attempt: 1,
      error: { code: "task.timeout", message: "attempt 1 exceeded its timeout", node: "a", retryable: true },
    });
    expect(decision.state.nodes.a?.invocations[0]).toMatchObject({
      status: "retrying",
      token: null,
      retry_at: DEADLINE + 1000,
      error: { code: "task.timeout", retryable: true, node: "a" },
    });
    expect(decision.state.record.status).toBe("waiting");
  });

  it("a timed-out attempt without retries fails the node and the run", ({ expect }) => {
    const run = makeRun({ a: { timeout_ms: 5000 } });
    startRun(run);
    const decision = run.wake(DEADLINE);
    expect(kindsOf(decision)).toEqual(["task.timeout", "task.failed", "node.failed", "run.status", "attest"]);
    expect(decision.state.nodes.a).toMatchObject({ status: "failed", error: { code: "task.timeout" } });
    expect(decision.state.record.status).toBe("failed");
  });

  it("the late result of a timed-out attempt is journaled as ignored and changes nothing else", ({ expect }) => {
    const run = makeRun({ a: { timeout_ms: 5000, retry: { max_attempts: 2, initial_delay_ms: 1000, jitter: false } } });
    startRun(run);
    const token = run.token("a");
    const before = run.wake(DEADLINE).state;
    const late = run.succeed(token, { late: true }, DEADLINE + 500);
    expect(journalOf(late)).toEqual([
      {
        kind: "journal",
        seq: before.record.journal_seq + 1,
        entryKind: "task.result_ignored",
        body: { token, reason: "no dispatch in flight has this token", success: true },
      },
    ]);
    expect(late.state.nodes).toEqual(before.nodes);
    expect(late.state.record).toEqual({ ...before.record, journal_seq: before.record.journal_seq + 1 });
    expect(dispatchesOf(late)).toEqual([]);
  });

  /** What a wake journals when a timed-out attempt fails the run under fail_fast and the other node is cancelled. */
  const TIMEOUT_FAILS_FAST = ["task.timeout", "task.failed", "node.failed", "node.cancelled", "run.status", "attest"];

  it("when attempts of two nodes time out in one wake under fail_fast, the first fails the run and the other is cancelled", ({
    expect,
  }) => {
    const run = makeRun({ a: { timeout_ms: 5000 }, b: { timeout_ms: 5000 } });
    startRun(run);
    const decision = run.wake(DEADLINE);
    expect(kindsOf(decision)).toEqual(TIMEOUT_FAILS_FAST);
    expect(decision.state.nodes.a?.status).toBe("failed");
    expect(decision.state.nodes.b).toMatchObject({
      status: "cancelled",
      invocations: [{ status: "cancelled", token: null }],
    });
  });

  it("a node cancelled by a timeout's fail_fast in the same wake is not also re-dispatched as lost", ({ expect }) => {
    const run = makeRun({ a: { timeout_ms: 5000 }, b: {} });
    startRun(run);
    // a's call is still awaited (it overran); b's was lost with a restart.
    const decision = run.wake(DEADLINE, { tokens: [run.token("a")] });
    expect(kindsOf(decision)).toEqual(TIMEOUT_FAILS_FAST);
    expect(dispatchesOf(decision)).toEqual([]);
    expect(decision.state.nodes.b?.invocations[0]).toMatchObject({ status: "cancelled", attempts: 1 });
  });

  it("when two items of a foreach node time out in one wake, the node fails once", ({ expect }) => {
    const run = makeRun(
      { each: { timeout_ms: 5000, foreach: { items: "$.input.items" } } },
      { input: { items: [1, 2] } },
    );
    startRun(run);
    const decision = run.wake(DEADLINE);
    expect(kindsOf(decision)).toEqual(["task.timeout", "task.failed", "node.failed", "run.status", "attest"]);
    expect(decision.state.nodes.each?.invocations.map((invocation) => invocation.status)).toEqual([
      "failed",
      "cancelled",
    ]);
  });
});

describe("lost dispatches", () => {
  it("a wake whose live list lacks a running token re-dispatches it with a new token and the same attempt", ({
    expect,
  }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const lostToken = run.token("a");
    const decision = run.wake(NOW + 10, {});
    expect(kindsOf(decision)).toEqual(["task.lost", "task.dispatched"]);
    expect(entryOf(decision, "task.lost").body).toEqual({ node: "a", item: null, token: lostToken, attempt: 1 });
    const [payload] = dispatchesOf(decision);
    expect(payload).toMatchObject({ node_id: "a", retry_attempt: 0 });
    expect(payload?.token_id).not.toBe(lostToken);
    expect(entryOf(decision, "task.dispatched").body).toMatchObject({ attempt: 1 });
    expect(decision.state.nodes.a).toMatchObject({ status: "running", attempts: 1 });

    const stale = run.succeed(lostToken);
    expect(kindsOf(stale)).toEqual(["task.result_ignored"]);
    expect(stale.state.nodes.a?.status).toBe("running");
  });

  it("a wake whose live list holds every running token re-dispatches nothing", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const decision = run.wake(NOW + 10);
    expect(decision.commands).toEqual([]);
  });
});

describe("liveness: the alarm always covers work a restart would lose", () => {
  it("while a dispatch is in flight the next wake is at most LIVENESS_CHECK_MS away, however far its deadline", ({
    expect,
  }) => {
    const run = makeRun({ a: {} });
    const started = startRun(run);
    expect(started.state.nodes.a?.invocations[0]?.deadline_at).toBe(NOW + DEFAULT_TASK_TIMEOUT_MS + DEADLINE_GRACE_MS);
    expect(started.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
  });

  it("a liveness wake that finds the dispatch live changes nothing, hands back the same record, and asks again LIVENESS_CHECK_MS later", ({
    expect,
  }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const before = run.state;
    const check = run.wake(NOW + LIVENESS_CHECK_MS);
    expect(check.commands).toEqual([]);
    // The same record object: the coordinator's storage writes nothing for it.
    expect(check.state.record).toBe(before.record);
    expect(check.state.nodes.a).toBe(before.nodes.a);
    expect(check.wakeAt).toBe(NOW + 2 * LIVENESS_CHECK_MS);
  });

  it("a restart that outlasts the attempt's deadline journals the dispatch task.lost, never task.timeout, and sends it again as the same attempt", ({
    expect,
  }) => {
    const run = makeRun({ a: { timeout_ms: 5000, retry: { max_attempts: 2, initial_delay_ms: 1000, jitter: false } } });
    startRun(run);
    const lost = run.token("a");
    const decision = run.wake(NOW + 60_000, {});
    expect(kindsOf(decision)).toEqual(["task.lost", "task.dispatched"]);
    expect(entryOf(decision, "task.lost").body).toEqual({ node: "a", item: null, token: lost, attempt: 1 });
    expect(entryOf(decision, "task.dispatched").body).toMatchObject({ attempt: 1 });
    expect(decision.state.nodes.a).toMatchObject({ status: "running", attempts: 1 });
    expect(decision.state.nodes.a?.invocations[0]).toMatchObject({
      deadline_at: NOW + 60_000 + 5000 + DEADLINE_GRACE_MS,
    });
  });

  it("a child run asked for but not known to exist keeps the next wake within LIVENESS_CHECK_MS until child_started", ({
    expect,
  }) => {
    const run = makeRun({ child: { workflow: "child_flow" } });
    const started = startRun(run);
    const [start] = started.commands.filter((command) => command.kind === "start_child");
    expect(start?.kind).toBe("start_child");
    expect(started.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    const key = start?.kind === "start_child" ? start.key : "";
    // Another wake while this instance is still starting it asks for nothing new.
    const check = run.wake(NOW + LIVENESS_CHECK_MS, { childStarts: [key] });
    expect(check.commands).toEqual([]);
    expect(check.wakeAt).toBe(NOW + 2 * LIVENESS_CHECK_MS);
    // Known to exist: nothing is outstanding that a restart could lose; the child reports on its own.
    const known = run.send({ type: "child_started", key, run_id: "run_child" }, NOW + 10);
    expect(known.wakeAt).toBeNull();
  });

  it("a paused run keeps no liveness wake for a child start it will only ask for again once resumed", ({ expect }) => {
    const run = makeRun({ child: { workflow: "child_flow" } });
    startRun(run);
    const paused = run.send({ type: "pause" });
    expect(paused.wakeAt).toBeNull();
    const resumed = run.send({ type: "resume" });
    expect(resumed.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    // After a restart the resumed run asks for the child again.
    const again = run.wake(NOW + LIVENESS_CHECK_MS, {});
    expect(again.commands.filter((command) => command.kind === "start_child")).toHaveLength(1);
  });

  it("a finished child run whose parent has not acknowledged wakes every PARENT_NOTIFY_RETRY_MS and notifies again, until parent_notified", ({
    expect,
  }) => {
    const run = makeRun({ a: {} });
    run.state = {
      ...run.state,
      record: { ...run.state.record, parent: { run_id: "run_parent", key: "run_parent/0/n/0/1/-", notified: false } },
    };
    startRun(run);
    const finished = run.succeed(run.token("a"));
    expect(finished.state.record.status).toBe("completed");
    expect(finished.commands.filter((command) => command.kind === "notify_parent")).toHaveLength(1);
    expect(finished.wakeAt).toBe(NOW + PARENT_NOTIFY_RETRY_MS);
    const again = run.wake(NOW + PARENT_NOTIFY_RETRY_MS);
    expect(again.commands).toEqual([
      expect.objectContaining({ kind: "notify_parent", parent_run_id: "run_parent", status: "completed" }),
    ]);
    expect(again.wakeAt).toBe(NOW + 2 * PARENT_NOTIFY_RETRY_MS);
    expect(run.send({ type: "parent_notified" }).wakeAt).toBeNull();
  });
});

describe("cancelling", () => {
  it("cancel cancels what is in flight, ends the run cancelled and closes the journal with the attestation", ({
    expect,
  }) => {
    const run = makeRun({ a: {}, b: {}, c: { depends_on: ["a"] } });
    startRun(run);
    const decision = run.send({ type: "cancel", reason: "user asked" });
    expect(decision.state.record.status).toBe("cancelled");
    expect(kindsOf(decision)).toEqual(["node.cancelled", "node.cancelled", "node.cancelled", "run.status", "attest"]);
    expect(lastEntry(decision).body).toMatchObject({ outcome: "cancelled", reason: "user asked" });
    for (const nodeId of ["a", "b"]) {
      expect(decision.state.nodes[nodeId]).toMatchObject({
        status: "cancelled",
        invocations: [{ status: "cancelled", token: null }],
      });
    }
    expect(dispatchesOf(decision)).toEqual([]);
    expect(decision.wakeAt).toBeNull();
  });

  it("a result after cancel is ignored without any journal entry", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const token = run.token("a");
    const cancelled = run.send({ type: "cancel", reason: "user asked" });
    const late = run.succeed(token);
    expect(late.commands).toEqual([]);
    expect(late.state).toEqual(cancelled.state);
    expect(late.wakeAt).toBeNull();
  });

  it("a drafting run can be cancelled before it starts", ({ expect }) => {
    const run = makeRun({ a: {} });
    const decision = run.send({ type: "cancel", reason: "never mind" });
    expect(decision.state.record.status).toBe("cancelled");
    expect(lastEntry(decision).entryKind).toBe("attest");
  });

  it("a wake after the run ended does nothing", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    run.send({ type: "cancel", reason: "user asked" });
    const decision = run.wake(NOW + 10, {});
    expect(decision.commands).toEqual([]);
    expect(decision.wakeAt).toBeNull();
  });
});

describe("results", () => {
  it("a result for an unknown token is journaled as ignored", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const before = run.state;
    const decision = run.succeed("no-such-token");
    expect(journalOf(decision).map((entry) => entry.body)).toEqual([
      { token: "no-such-token", reason: "no dispatch in flight has this token", success: true },
    ]);
    expect(decision.state.nodes).toEqual(before.nodes);
  });

  it("the same result delivered twice is accepted once", ({ expect }) => {
    const run = makeRun({ a: {}, b: {} });
    startRun(run);
    const token = run.token("a");
    run.succeed(token);
    const again = run.succeed(token);
    expect(kindsOf(again)).toEqual(["task.result_ignored"]);
    // A completed invocation gives up its token: the second copy names no dispatch in flight.
    expect(journalOf(again).map((entry) => entry.body)).toEqual([
      { token, reason: "no dispatch in flight has this token", success: true },
    ]);
    expect(again.state.nodes.a?.status).toBe("completed");
  });
});

describe("foreach", () => {
  it("dispatches one invocation per item and collects outputs in item order", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" } } }, { input: { items: ["x", "y", "z"] } });
    const decision = startRun(run);
    expect(dispatchesOf(decision).map((payload) => [payload.item_index, payload.input])).toEqual([
      [0, "x"],
      [1, "y"],
      [2, "z"],
    ]);
    run.succeed(run.token("each", 2), { v: "Z" });
    run.succeed(run.token("each", 0), { v: "X" });
    expect(run.state.nodes.each?.status).toBe("running");
    const last = run.succeed(run.token("each", 1), { v: "Y" });
    expect(last.state.record.context.state.each).toEqual([{ v: "X" }, { v: "Y" }, { v: "Z" }]);
    expect(last.state.record.status).toBe("completed");
  });

  it("item and index are visible to the input mapping", ({ expect }) => {
    const run = makeRun(
      {
        each: {
          foreach: { items: "$.input.items" },
          input_mapping: { value: "$.item", at: "$.index", run: "$.input.tag" },
        },
      },
      { input: { items: [10, 20], tag: "t" } },
    );
    expect(dispatchesOf(startRun(run)).map((payload) => payload.input)).toEqual([
      { value: 10, at: 0, run: "t" },
      { value: 20, at: 1, run: "t" },
    ]);
  });

  it("through an output mapping, each target receives an array in item order", ({ expect }) => {
    const run = makeRun(
      {
        each: {
          foreach: { items: "$.input.items" },
          output_mapping: { "output.values": "$.v", "state.flags": "$.ok" },
        },
      },
      { input: { items: [1, 2] } },
    );
    startRun(run);
    run.succeed(run.token("each", 1), { v: 20, ok: false });
    const last = run.succeed(run.token("each", 0), { v: 10, ok: true });
    expect(last.state.record.context.output).toEqual({ values: [10, 20] });
    expect(last.state.record.context.state).toEqual({ flags: [true, false] });
  });

  it("an empty item list completes the node at once, without a dispatch", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" } } }, { input: { items: [] } });
    const decision = startRun(run);
    expect(dispatchesOf(decision)).toEqual([]);
    expect(decision.state.nodes.each?.status).toBe("completed");
    expect(decision.state.record.context.state.each).toEqual([]);
    expect(decision.state.record.status).toBe("completed");
  });

  it("foreach.max_parallel bounds the item dispatches in flight", ({ expect }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items", max_parallel: 2 } } },
      { input: { items: [1, 2, 3, 4, 5] } },
    );
    expect(dispatchesOf(startRun(run)).map((payload) => payload.item_index)).toEqual([0, 1]);
    expect(run.state.record.status).toBe("running");
    const result = run.succeed(run.token("each", 0));
    expect(result.wakeAt).toBe(NOW);
    expect(dispatchesOf(run.wake()).map((payload) => payload.item_index)).toEqual([2]);
  });

  it("items that are not an array fail the node", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" } } }, { input: { items: "nope" } });
    const decision = startRun(run);
    expect(decision.state.nodes.each).toMatchObject({ status: "failed", error: { code: "node.foreach_not_array" } });
    expect(decision.state.record.status).toBe("failed");
  });
});

describe("run timeout", () => {
  it("a wake at the workflow's timeout fails the run with run.timeout and cancels what is in flight and what never started", ({
    expect,
  }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } }, { workflow: { timeout_ms: 60_000 } });
    const started = startRun(run);
    expect(started.state.record.deadline_at).toBe(NOW + 60_000);
    // While a is in flight the liveness check comes first; the run's deadline is the next timer after it.
    expect(started.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    expect(run.wake(NOW + 58_000).wakeAt).toBe(NOW + 60_000);

    const decision = run.wake(NOW + 60_000);
    expect(decision.state.record.status).toBe("failed");
    expect(decision.state.record.error).toEqual({ code: "run.timeout", message: "the run exceeded its timeout_ms" });
    expect(decision.state.nodes.a).toMatchObject({
      status: "cancelled",
      invocations: [{ status: "cancelled", token: null }],
    });
    expect(decision.state.nodes.b).toMatchObject({ status: "cancelled", invocations: [] });
    expect(journalOf(decision).map((entry) => [entry.entryKind, entry.body.node ?? null])).toEqual([
      ["node.cancelled", "a"],
      ["node.cancelled", "b"],
      ["run.status", null],
      ["attest", null],
    ]);
    expect(lastEntry(decision).body).toMatchObject({ outcome: "failed", error: { code: "run.timeout" } });
    expect(decision.wakeAt).toBeNull();
  });
});

describe("attempts and frozen inputs", () => {
  const retry = { max_attempts: 3, initial_delay_ms: 1000, jitter: false };

  it("a node's attempts count every dispatch of its invocations, and a lost dispatch does not count", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" }, retry } }, { input: { items: [1, 2] } });
    expect(startRun(run).state.nodes.each?.attempts).toBe(2);

    run.fail(run.token("each", 0), { retryable: true });
    const retried = run.wake(NOW + 1000);
    expect(retried.state.nodes.each?.attempts).toBe(3);
    expect(retried.state.nodes.each?.invocations.map((invocation) => invocation.attempts)).toEqual([2, 1]);

    const lost = run.wake(NOW + 1010, {});
    expect(kindsOf(lost)).toEqual(["task.lost", "task.lost", "task.dispatched", "task.dispatched"]);
    expect(lost.state.nodes.each?.attempts).toBe(3);
    expect(lost.state.nodes.each?.invocations.map((invocation) => invocation.attempts)).toEqual([2, 1]);
  });

  it("a node's input is fixed when it starts, so a retry re-sends it even after the run context changed", ({
    expect,
  }) => {
    const run = makeRun(
      { a: { retry, input_mapping: { seen: { path: "$.state.b", optional: true }, tag: "$.input.tag" } }, b: {} },
      { input: { tag: "t" } },
    );
    const [first] = dispatchesOf(startRun(run));
    expect(first?.input).toEqual({ tag: "t" });
    expect(run.state.nodes.a?.invocations[0]?.input).toEqual({ tag: "t" });

    run.succeed(run.token("b"), { late: "value" });
    expect(run.state.record.context.state.b).toEqual({ late: "value" });
    run.fail(run.token("a"), { retryable: true });
    const [second] = dispatchesOf(run.wake(NOW + 1000));
    expect(second).toMatchObject({ node_id: "a", retry_attempt: 1, input: { tag: "t" } });
  });

  it("a lost dispatch is re-sent with the input fixed at start", ({ expect }) => {
    const run = makeRun({ a: { input_mapping: { seen: { path: "$.state.b", optional: true } } }, b: {} });
    startRun(run);
    run.succeed(run.token("b"), { late: "value" });
    const [payload] = dispatchesOf(run.wake(NOW + 10, {}));
    expect(payload).toMatchObject({ node_id: "a", input: {} });
  });

  it("a node started but held back by max_parallel is dispatched later with the input fixed when it started", ({
    expect,
  }) => {
    const run = makeRun(
      { a: {}, b: { input_mapping: { seen: { path: "$.state.a", optional: true } } } },
      { workflow: { max_parallel: 1 } },
    );
    const first = startRun(run);
    expect(nodeIdsOf(first)).toEqual(["a"]);
    expect(first.state.nodes.b).toMatchObject({
      status: "pending",
      iterations: 1,
      invocations: [{ status: "pending", input: {} }],
    });
    run.succeed(run.token("a"), { ready: true });
    expect(dispatchesOf(run.wake())).toMatchObject([{ node_id: "b", input: {} }]);
  });

  it("each retry draws its own jitter, even when several are scheduled in one event", ({ expect }) => {
    const run = makeRun(
      {
        each: {
          timeout_ms: 5000,
          foreach: { items: "$.input.items" },
          retry: { max_attempts: 2, initial_delay_ms: 1000, jitter: true },
        },
      },
      { input: { items: [1, 2] } },
    );
    startRun(run);
    const source = makeRandom(0, 0.5);
    const deadline = NOW + 5000 + DEADLINE_GRACE_MS;
    const decision = run.send(
      { type: "wake", live: toLiveWork({ tokens: liveTokens(run.state) }) },
      deadline,
      source.random,
    );
    expect(source.draws()).toBe(2);
    expect(decision.state.nodes.each?.invocations.map((invocation) => invocation.retry_at)).toEqual([
      deadline + 500,
      deadline + 750,
    ]);
    expect(decision.wakeAt).toBe(deadline + 500);
  });

  it("a failure that is not retried draws no random number", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const source = makeRandom();
    run.send({ type: "task_result", result: makeFailure(run.token("a"), { retryable: true }) }, NOW, source.random);
    expect(run.state.record.status).toBe("failed");
    expect(source.draws()).toBe(0);
  });
});

describe("foreach with when", () => {
  it("when is evaluated per item with item and index; false items are skipped invocations with null output", ({
    expect,
  }) => {
    const run = makeRun(
      {
        each: {
          foreach: { items: "$.input.items" },
          when: "item.go && index != 3",
          input_mapping: { name: "$.item.name" },
        },
      },
      {
        input: {
          items: [
            { go: true, name: "a" },
            { go: false, name: "b" },
            { go: true, name: "c" },
            { go: true, name: "d" },
          ],
        },
      },
    );
    const started = startRun(run);
    expect(dispatchesOf(started).map((payload) => [payload.item_index, payload.input])).toEqual([
      [0, { name: "a" }],
      [2, { name: "c" }],
    ]);
    expect(started.state.nodes.each?.invocations.map((invocation) => [invocation.status, invocation.input])).toEqual([
      ["running", { name: "a" }],
      ["skipped", null],
      ["running", { name: "c" }],
      ["skipped", null],
    ]);
    expect(entryOf(started, "node.started").body).toEqual({ node: "each", iteration: 1, invocations: 4, skipped: 2 });

    run.succeed(run.token("each", 2), { v: "C" });
    const last = run.succeed(run.token("each", 0), { v: "A" });
    expect(last.state.record.context.state.each).toEqual([{ v: "A" }, null, { v: "C" }, null]);
    expect(entryOf(last, "node.completed").body).toEqual({ node: "each", invocations: 4, iterations: 1 });
    expect(last.state.record.status).toBe("completed");
  });

  it("through an output mapping, skipped items are null in each target array", ({ expect }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" }, when: "item > 1", output_mapping: { "output.values": "$.v" } } },
      { input: { items: [1, 2, 3] } },
    );
    startRun(run);
    run.succeed(run.token("each", 1), { v: 20 });
    const last = run.succeed(run.token("each", 2), { v: 30 });
    expect(last.state.record.context.output).toEqual({ values: [null, 20, 30] });
  });

  it("a foreach whose when is false for every item is skipped, and so are its dependents", ({ expect }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" }, when: "item > 10" }, after: { depends_on: ["each"] } },
      { input: { items: [1, 2] } },
    );
    const decision = startRun(run);
    expect(dispatchesOf(decision)).toEqual([]);
    expect(kindsOf(decision)).not.toContain("node.started");
    expect(bodiesOf(decision, "node.skipped")).toEqual([
      { node: "each", reason: "when is false: item > 10" },
      { node: "after", reason: "all dependencies were skipped" },
    ]);
    expect(decision.state.nodes.each).toMatchObject({ status: "skipped", invocations: [], iterations: 0 });
    expect(decision.state.record.context.state).toEqual({});
    expect(decision.state.record.status).toBe("completed");
  });

  it("a when that cannot be evaluated for an item fails the node", ({ expect }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" }, when: "item.missing.deeper" } },
      { input: { items: [{}] } },
    );
    const decision = startRun(run);
    expect(decision.state.nodes.each?.status).toBe("failed");
    expect(decision.state.record.status).toBe("failed");
    expect(dispatchesOf(decision)).toEqual([]);
  });
});

describe("repeat", () => {
  /** A counter node: each iteration sends the previous iteration's `n` (absent at first). */
  function makeCounter(maxIterations: number, until = "state.count.n >= 3"): TestRun {
    return makeRun({
      count: {
        repeat: { until, max_iterations: maxIterations },
        input_mapping: { previous: { path: "$.state.count.n", optional: true } },
      },
      after: { depends_on: ["count"] },
    });
  }

  it("re-runs the node with fresh invocations and inputs until `until` holds over the run context", ({ expect }) => {
    const run = makeCounter(5);
    const inputs: (Json | undefined)[] = [];
    const first = startRun(run);
    inputs.push(dispatchesOf(first)[0]?.input);

    for (let n = 1; n <= 2; n++) {
      const token = run.token("count");
      const result = run.succeed(token, { n });
      expect(kindsOf(result)).toEqual(["task.completed", "node.repeat", "node.started"]);
      expect(entryOf(result, "node.repeat").body).toEqual({ node: "count", iteration: n, until: "state.count.n >= 3" });
      expect(entryOf(result, "node.started").body).toEqual({
        node: "count",
        iteration: n + 1,
        invocations: 1,
        skipped: 0,
      });
      expect(result.state.nodes.count).toMatchObject({
        status: "running",
        iterations: n + 1,
        invocations: [{ status: "pending", attempts: 0, token: null, input: { previous: n } }],
      });
      expect(result.state.record.context.state.count).toEqual({ n });
      expect(result.wakeAt).toBe(NOW);

      const [payload] = dispatchesOf(run.wake());
      expect(payload).toMatchObject({ node_id: "count", retry_attempt: 0 });
      expect(payload?.token_id).not.toBe(token);
      inputs.push(payload?.input);
    }

    const done = run.succeed(run.token("count"), { n: 3 });
    expect(inputs).toEqual([{}, { previous: 1 }, { previous: 2 }]);
    expect(entryOf(done, "node.completed").body).toEqual({ node: "count", invocations: 1, iterations: 3 });
    expect(done.state.nodes.count).toMatchObject({ status: "completed", iterations: 3, attempts: 3 });
    expect(nodeIdsOf(run.wake())).toEqual(["after"]);
  });

  it("a node whose until holds after the first iteration runs once", ({ expect }) => {
    const run = makeCounter(5, "true");
    startRun(run);
    const decision = run.succeed(run.token("count"), { n: 1 });
    expect(kindsOf(decision)).toEqual(["task.completed", "node.completed", "node.started"]);
    expect(entryOf(decision, "node.started").body).toMatchObject({ node: "after" });
    expect(decision.state.nodes.count?.iterations).toBe(1);
  });

  it("fails with node.repeat_exhausted when until still does not hold after max_iterations", ({ expect }) => {
    const run = makeCounter(2, "false");
    startRun(run);
    run.succeed(run.token("count"), { n: 1 });
    run.wake();
    const last = run.succeed(run.token("count"), { n: 2 });
    expect(kindsOf(last)).toEqual(["task.completed", "node.failed", "node.cancelled", "run.status", "attest"]);
    expect(last.state.nodes.count).toMatchObject({
      status: "failed",
      iterations: 2,
      error: {
        code: "node.repeat_exhausted",
        message: "repeat.until (false) still false after 2 iterations",
        node: "count",
      },
    });
    expect(last.state.record.context.state.count).toEqual({ n: 2 });
    expect(last.state.nodes.after?.status).toBe("cancelled");
    expect(last.state.record).toMatchObject({ status: "failed", error: { code: "node.repeat_exhausted" } });
  });

  it("iterations with nothing to run repeat at once, up to max_iterations, without exhausting the stack", ({
    expect,
  }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" }, repeat: { until: "false", max_iterations: 10_000 } } },
      { input: { items: [] } },
    );
    const decision = startRun(run);
    expect(decision.state.nodes.each).toMatchObject({
      status: "failed",
      iterations: 10_000,
      error: { code: "node.repeat_exhausted", message: "repeat.until (false) still false after 10000 iterations" },
    });
    const kinds = kindsOf(decision);
    expect(kinds.filter((kind) => kind === "node.started")).toHaveLength(10_000);
    expect(kinds.filter((kind) => kind === "node.repeat")).toHaveLength(9_999);
    expect(dispatchesOf(decision)).toEqual([]);
  });

  it("an iteration with nothing to run completes the node once until holds", ({ expect }) => {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" }, repeat: { until: "size(state.each) == 0", max_iterations: 3 } } },
      { input: { items: [] } },
    );
    const decision = startRun(run);
    expect(kindsOf(decision)).toEqual(["run.status", "node.started", "node.completed", "run.status", "attest"]);
    expect(decision.state.nodes.each).toMatchObject({ status: "completed", iterations: 1 });
  });

  it("a foreach node repeats with its items and inputs evaluated again each iteration", ({ expect }) => {
    const run = makeRun({
      seed: { output_mapping: { "state.queue": "$.queue" } },
      batch: {
        depends_on: ["seed"],
        foreach: { items: "$.state.queue" },
        input_mapping: { id: "$.item" },
        output_mapping: { "state.queue": "$.next" },
        repeat: { until: "state.queue.all(q, q == 'done')", max_iterations: 5 },
      },
    });
    startRun(run);
    run.succeed(run.token("seed"), { queue: ["a", "b"] });
    expect(dispatchesOf(run.wake()).map((payload) => payload.input)).toEqual([{ id: "a" }, { id: "b" }]);
    run.succeed(run.token("batch", 0), { next: "c" });
    const second = run.succeed(run.token("batch", 1), { next: "d" });
    expect(second.state.record.context.state.queue).toEqual(["c", "d"]);
    expect(second.state.nodes.batch).toMatchObject({
      iterations: 2,
      invocations: [{ input: { id: "c" } }, { input: { id: "d" } }],
    });

    expect(dispatchesOf(run.wake()).map((payload) => [payload.item_index, payload.input])).toEqual([
      [0, { id: "c" }],
      [1, { id: "d" }],
    ]);
    run.succeed(run.token("batch", 1), { next: "done" });
    const done = run.succeed(run.token("batch", 0), { next: "done" });
    expect(done.state.nodes.batch).toMatchObject({ status: "completed", iterations: 2, attempts: 4 });
    expect(done.state.record.status).toBe("completed");
  });
});

describe("pause and resume", () => {
  it("pause stops dispatching; resume dispatches on the next wake", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } });
    startRun(run);
    const paused = run.send({ type: "pause" });
    expect(journalOf(paused).map((entry) => entry.body)).toEqual([
      { from: "running", to: "paused", reason: "paused by request" },
    ]);
    expect(paused.state.record.status).toBe("paused");

    const result = run.succeed(run.token("a"), { ok: true });
    // Nothing starts while paused: b waits, unstarted, for the resume.
    expect(kindsOf(result)).toEqual(["task.completed", "node.completed"]);
    expect(result.state.record.context.state.a).toEqual({ ok: true });
    expect(result.state.record.status).toBe("paused");
    expect(result.wakeAt).toBeNull();

    const wake = run.wake(NOW + 10);
    expect(dispatchesOf(wake)).toEqual([]);
    expect(wake.state.nodes.b).toMatchObject({ status: "pending", invocations: [] });

    const resumed = run.send({ type: "resume" });
    expect(kindsOf(resumed)).toEqual(["run.status", "node.started"]);
    expect(journalOf(resumed)[0]?.body).toEqual({ from: "paused", to: "running", reason: "resumed by request" });
    expect(dispatchesOf(resumed)).toEqual([]);
    expect(resumed.wakeAt).toBe(NOW);
    expect(nodeIdsOf(run.wake())).toEqual(["b"]);
  });

  it("a queued run can be paused before its first dispatch, and resumes into running", ({ expect }) => {
    const run = makeRun({ a: {} });
    run.send({ type: "start" });
    const paused = run.send({ type: "pause" });
    expect(entryOf(paused, "run.status").body).toEqual({ from: "queued", to: "paused", reason: "paused by request" });
    expect(dispatchesOf(run.wake())).toEqual([]);
    expect(run.state.record.status).toBe("paused");

    run.send({ type: "resume" });
    expect(run.state.record.status).toBe("running");
    expect(nodeIdsOf(run.wake())).toEqual(["a"]);
  });

  it("timers still fire while paused: a timeout schedules its retry, and the retry waits for resume", ({ expect }) => {
    const run = makeRun({ a: { timeout_ms: 5000, retry: { max_attempts: 2, initial_delay_ms: 1000, jitter: false } } });
    startRun(run);
    run.send({ type: "pause" });
    const deadline = NOW + 5000 + DEADLINE_GRACE_MS;
    expect(run.state.record.status).toBe("paused");

    const timeout = run.wake(deadline);
    expect(kindsOf(timeout)).toEqual(["task.timeout", "task.failed", "task.retry_scheduled"]);
    expect(timeout.state.record.status).toBe("paused");
    expect(timeout.wakeAt).toBe(deadline + 1000);

    const due = run.wake(deadline + 1000);
    expect(dispatchesOf(due)).toEqual([]);
    expect(due.state.nodes.a?.invocations[0]?.status).toBe("pending");

    run.send({ type: "resume" }, deadline + 2000);
    expect(dispatchesOf(run.wake(deadline + 2000))).toMatchObject([{ node_id: "a", retry_attempt: 1 }]);
  });

  it("a paused run whose last node completes goes from paused to completed", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    run.send({ type: "pause" });
    const decision = run.succeed(run.token("a"));
    expect(entryOf(decision, "run.status").body).toEqual({
      from: "paused",
      to: "completed",
      reason: "all nodes settled",
    });
    expect(lastEntry(decision).body).toMatchObject({ outcome: "completed" });
    expect(decision.wakeAt).toBeNull();
  });

  it("a paused run whose node fails goes from paused to failed", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    run.send({ type: "pause" });
    const decision = run.fail(run.token("a"));
    expect(entryOf(decision, "run.status").body).toMatchObject({ from: "paused", to: "failed" });
    expect(decision.state.record.status).toBe("failed");
  });

  it("a paused run can be cancelled", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    run.send({ type: "pause" });
    const decision = run.send({ type: "cancel", reason: "user asked" });
    expect(entryOf(decision, "run.status").body).toEqual({ from: "paused", to: "cancelled", reason: "user asked" });
    expect(decision.state.nodes.a?.status).toBe("cancelled");
  });

  it.for<{ event: "pause" | "resume"; setup: "drafting" | "running" | "paused" | "completed" }>([
    { event: "pause", setup: "drafting" },
    { event: "pause", setup: "paused" },
    { event: "pause", setup: "completed" },
    { event: "resume", setup: "drafting" },
    { event: "resume", setup: "running" },
    { event: "resume", setup: "completed" },
  ])("$event on a $setup run changes nothing", ({ event, setup }, { expect }) => {
    const run = makeRun({ a: {} });
    if (setup !== "drafting") {
      startRun(run);
    }
    if (setup === "paused") {
      run.send({ type: "pause" });
    }
    if (setup === "completed") {
      run.succeed(run.token("a"));
    }
    const before = run.state;
    const decision = run.send({ type: event });
    expect(decision.commands).toEqual([]);
    expect(decision.state).toEqual(before);
  });
});

describe("redrive", () => {
  /** a → b → c, where b fails on its first run: ends failed with a completed, b failed and c cancelled. */
  function makeFailedRun(): TestRun {
    const run = makeRun({
      a: {},
      b: { depends_on: ["a"], input_mapping: { x: "$.state.a.x" } },
      c: { depends_on: ["b"] },
    });
    startRun(run);
    run.succeed(run.token("a"), { x: 1 });
    run.wake();
    run.fail(run.token("b"), { code: "http.status", message: "503" });
    return run;
  }

  it("a failed run goes back to queued: failed and cancelled nodes reset, completed ones keep their results", ({
    expect,
  }) => {
    const run = makeFailedRun();
    expect(run.state.record.status).toBe("failed");
    const attestSeq = run.state.record.journal_seq;
    const aBefore = run.state.nodes.a;

    const decision = run.send({ type: "redrive" }, NOW + 100);
    expect(journalOf(decision)).toEqual([
      { kind: "journal", seq: attestSeq + 1, entryKind: "run.redriven", body: { redrive: 1, nodes: ["b", "c"] } },
      {
        kind: "journal",
        seq: attestSeq + 2,
        entryKind: "run.status",
        body: { from: "failed", to: "queued", reason: "redrive 1" },
      },
    ]);
    expect(decision.state.record).toMatchObject({ status: "queued", redrives: 1, error: null });
    expect(decision.state.nodes.a).toEqual(aBefore);
    expect(decision.state.record.context.state.a).toEqual({ x: 1 });
    for (const nodeId of ["b", "c"]) {
      expect(decision.state.nodes[nodeId]).toMatchObject({
        status: "pending",
        error: null,
        invocations: [],
        iterations: 0,
        settled_seq: null,
        started_at: null,
        finished_at: null,
      });
    }
    expect(decision.wakeAt).toBe(NOW + 100);
  });

  it("a redriven run re-runs only its failed nodes, and completes with the outputs kept from before", ({ expect }) => {
    const run = makeFailedRun();
    run.send({ type: "redrive" });
    const wake = run.wake();
    expect(kindsOf(wake)).toEqual(["run.status", "node.started", "task.dispatched"]);
    expect(dispatchesOf(wake)).toMatchObject([{ node_id: "b", input: { x: 1 }, retry_attempt: 0 }]);
    expect(wake.state.nodes.b?.attempts).toBe(2);

    run.succeed(run.token("b"), { y: 2 });
    expect(nodeIdsOf(run.wake())).toEqual(["c"]);
    const done = run.succeed(run.token("c"));
    expect(done.state.record.status).toBe("completed");
    expect(done.state.record.context.state).toEqual({ a: { x: 1 }, b: { y: 2 }, c: { done: true } });
    expect(done.state.nodes.a?.attempts).toBe(1);
  });

  it("a run can be redriven again after failing again, counting its redrives", ({ expect }) => {
    const run = makeFailedRun();
    run.send({ type: "redrive" });
    run.wake();
    run.fail(run.token("b"));
    expect(run.state.record.status).toBe("failed");
    const again = run.send({ type: "redrive" });
    expect(entryOf(again, "run.redriven").body).toEqual({ redrive: 2, nodes: ["b", "c"] });
    expect(again.state.record.redrives).toBe(2);
  });

  it("redriving a timed-out run gives it a fresh deadline and re-runs the cancelled nodes", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] } }, { workflow: { timeout_ms: 60_000 } });
    startRun(run);
    run.wake(NOW + 60_000);
    expect(run.state.record.error).toMatchObject({ code: "run.timeout" });

    const redrive = run.send({ type: "redrive" }, NOW + 70_000);
    expect(entryOf(redrive, "run.redriven").body).toEqual({ redrive: 1, nodes: ["a", "b"] });
    expect(redrive.state.record).toMatchObject({ deadline_at: NOW + 130_000, error: null });
    expect(nodeIdsOf(run.wake(NOW + 70_000))).toEqual(["a"]);
  });

  it.for<{ setup: "drafting" | "running" | "completed" | "cancelled" }>([
    { setup: "drafting" },
    { setup: "running" },
    { setup: "completed" },
    { setup: "cancelled" },
  ])("redrive of a $setup run changes nothing", ({ setup }, { expect }) => {
    const run = makeRun({ a: {} });
    if (setup !== "drafting") {
      startRun(run);
    }
    if (setup === "completed") {
      run.succeed(run.token("a"));
    }
    if (setup === "cancelled") {
      run.send({ type: "cancel", reason: "user asked" });
    }
    const before = run.state;
    const decision = run.send({ type: "redrive" });
    expect(decision.commands).toEqual([]);
    expect(decision.state).toEqual(before);
  });
});

describe("workflow nodes", () => {
  it("a node that runs a sub-workflow starts a child run instead of dispatching a task, and waits for it", ({
    expect,
  }) => {
    const run = makeRun({ child: { workflow: "child_flow" }, after: { depends_on: ["child"] } });
    const decision = startRun(run);
    expect(dispatchesOf(decision)).toEqual([]);
    const starts = decision.commands.filter((command) => command.kind === "start_child");
    expect(starts).toHaveLength(1);
    expect(starts[0]).toMatchObject({ kind: "start_child", depth: 1, input: {} });
    expect(decision.state.nodes.child).toMatchObject({
      status: "waiting",
      attempts: 1,
      invocations: [{ status: "suspended" }],
    });
    expect(decision.state.record.status).toBe("waiting");
  });
});

/** A result that says the task stopped at a `workflow` step and waits for a child run of `input`. */
function suspendOnChildOf(token: string, input: Json): TaskResult {
  return {
    token_id: token,
    success: false,
    suspended: {
      step_ref: "sub",
      step_index: 0,
      context: { input: {}, state: {}, output: {} },
      wait: { kind: "child", workflow: "child_flow@1", input, on_failure: "propagate" },
    },
    metrics: METRICS,
  };
}

describe("workflow steps", () => {
  const suspendOnChild = (token: string): TaskResult => suspendOnChildOf(token, { from: token });

  /** Eight items that all reach a workflow step at once. */
  function eightSuspended(): TestRun {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" } } },
      { input: { items: [0, 1, 2, 3, 4, 5, 6, 7] } },
    );
    const tokens = dispatchesOf(startRun(run)).map((payload) => payload.token_id);
    if (tokens.length !== 8) {
      throw new Error(`expected 8 dispatches, got ${tokens.length}`);
    }
    run.send({ type: "task_results", results: tokens.map(suspendOnChild) });
    return run;
  }

  const startsOf = (decision: Decision) => decision.commands.filter((command) => command.kind === "start_child");

  it("starts no child from the result that suspends: it asks for a wake", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" } } }, { input: { items: [0] } });
    const [payload] = dispatchesOf(startRun(run));
    const decision = run.send({ type: "task_result", result: suspendOnChild(payload?.token_id ?? "") });
    expect(startsOf(decision)).toEqual([]);
    expect(decision.wakeAt).toBe(NOW);
    expect(decision.state.nodes.each?.invocations[0]?.suspension?.waiting_for).toMatchObject({
      kind: "child",
      run_id: null,
      requested_at: null,
    });
  });

  it("starts at most MAX_CHILD_STARTS_PER_EVENT children per wake, the rest on the next wakes", ({ expect }) => {
    const run = eightSuspended();
    const first = run.wake(NOW, {});
    expect(startsOf(first)).toHaveLength(MAX_CHILD_STARTS_PER_EVENT);
    expect(first.wakeAt).toBe(NOW);
    // The first five are being started by this instance: they are live.
    const live = startsOf(first).map((command) => (command.kind === "start_child" ? command.key : ""));
    const second = run.wake(NOW, { childStarts: live });
    expect(startsOf(second)).toHaveLength(8 - MAX_CHILD_STARTS_PER_EVENT);
    const keys = [...startsOf(first), ...startsOf(second)].map((command) =>
      command.kind === "start_child" ? command.key : "",
    );
    expect(new Set(keys).size).toBe(8);
    const third = run.wake(NOW, { childStarts: keys });
    expect(startsOf(third)).toEqual([]);
    expect(third.wakeAt).not.toBe(NOW);
  });

  it("asks again for a child whose start was lost with a restart (requested, not live)", ({ expect }) => {
    const run = eightSuspended();
    const first = run.wake(NOW, {});
    const live = startsOf(first).map((command) => (command.kind === "start_child" ? command.key : ""));
    run.wake(NOW, { childStarts: live });
    // A restart: nothing is live any more; every child not known to have started is asked for again, five per wake.
    const again = run.wake(NOW, {});
    expect(startsOf(again)).toHaveLength(MAX_CHILD_STARTS_PER_EVENT);
  });

  it("starts no child while the run is paused, and starts them after resume", ({ expect }) => {
    const run = eightSuspended();
    run.send({ type: "pause" });
    const paused = run.wake(NOW, {});
    expect(startsOf(paused)).toEqual([]);
    run.send({ type: "resume" });
    expect(startsOf(run.wake(NOW, {}))).toHaveLength(MAX_CHILD_STARTS_PER_EVENT);
  });
});

describe("cleanup: cancels and releases are committed with the decision and sent by wakes until answered", () => {
  const suspendOnChild = (token: string): TaskResult => suspendOnChildOf(token, {});

  const commandsOf = <K extends Decision["commands"][number]["kind"]>(decision: Decision, kind: K) =>
    decision.commands.filter(
      (command): command is Extract<Decision["commands"][number], { kind: K }> => command.kind === kind,
    );
  const cancelledKeys = (decision: Decision) =>
    commandsOf(decision, "cancel_children").flatMap((command) => command.keys);
  const releasedContainers = (decision: Decision) =>
    commandsOf(decision, "release_resources").flatMap((command) => command.containers);

  /** A sub-workflow node whose child exists (`child_started` applied); returns the run and the child's key. */
  function withRunningChild(): { run: TestRun; key: string } {
    const run = makeRun({ sub: { workflow: "child_flow" } });
    const [start] = commandsOf(startRun(run), "start_child");
    const key = start?.key ?? "";
    run.send({ type: "child_started", key, run_id: "run_child" });
    return { run, key };
  }

  /** `count` foreach items suspended on child runs that all exist. */
  function withChildren(count: number): { run: TestRun; keys: string[] } {
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" } } },
      { input: { items: Array.from({ length: count }, (_, index) => index) } },
    );
    const tokens = dispatchesOf(startRun(run)).map((payload) => payload.token_id);
    run.send({ type: "task_results", results: tokens.map(suspendOnChild) });
    const keys: string[] = [];
    while (keys.length < count) {
      const started = commandsOf(run.wake(NOW, { childStarts: keys }), "start_child").map((command) => command.key);
      if (started.length === 0) {
        throw new Error(`only ${keys.length} of ${count} children were asked for`);
      }
      keys.push(...started);
    }
    keys.forEach((key, index) => run.send({ type: "child_started", key, run_id: `run_child_${index}` }));
    return { run, keys };
  }

  function withContainer(): TestRun {
    return makeRun({ a: {} }, { workflow: { resources: { dev_env: { type: "container" } } } });
  }

  it("a cancel records the children to cancel in the state it commits, journals each, sends nothing itself and asks for a wake now", ({
    expect,
  }) => {
    const { run, key } = withRunningChild();
    const cancelled = run.send({ type: "cancel", reason: "user asked" });
    expect(cancelled.state.record.status).toBe("cancelled");
    expect(cancelled.state.record.pending_cancels).toEqual([key]);
    expect(entryOf(cancelled, "child.cancel_requested").body).toEqual({
      node: "sub",
      item: null,
      step: null,
      child_run_id: "run_child",
      key,
    });
    // Before the terminal status and its attestation: the verifier accepts nothing after an attest.
    expect(kindsOf(cancelled).indexOf("child.cancel_requested")).toBeLessThan(kindsOf(cancelled).indexOf("attest"));
    expect(cancelledKeys(cancelled)).toEqual([]);
    expect(cancelled.wakeAt).toBe(NOW);
  });

  it("a wake sends the cancel; a liveness wake that finds it in flight sends nothing and writes nothing; a fresh instance sends it again", ({
    expect,
  }) => {
    const { run, key } = withRunningChild();
    run.send({ type: "cancel", reason: "user asked" });
    const sent = run.wake(NOW, {});
    expect(cancelledKeys(sent)).toEqual([key]);
    expect(sent.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    const before = run.state;
    const check = run.wake(NOW + LIVENESS_CHECK_MS, { cancels: [key] });
    expect(check.commands).toEqual([]);
    expect(check.state.record).toBe(before.record);
    // A restart lost the call: the next wake (the alarm) sends it again.
    const again = run.wake(NOW + 2 * LIVENESS_CHECK_MS, {});
    expect(cancelledKeys(again)).toEqual([key]);
    expect(again.state.record).toBe(before.record);
  });

  it("the child's confirmation clears the pending cancel, and a terminal run with nothing pending has no wake", ({
    expect,
  }) => {
    const { run, key } = withRunningChild();
    run.send({ type: "cancel", reason: "user asked" });
    run.wake(NOW, {});
    const confirmed = run.send({ type: "children_cancelled", keys: [key] });
    expect("pending_cancels" in confirmed.state.record).toBe(false);
    expect(confirmed.commands).toEqual([]);
    expect(confirmed.wakeAt).toBeNull();
    expect(run.wake(NOW + LIVENESS_CHECK_MS, {}).commands).toEqual([]);
  });

  it("a child's own report that it ended counts as its confirmation", ({ expect }) => {
    const { run, key } = withRunningChild();
    run.send({ type: "cancel", reason: "user asked" });
    const reported = run.send({
      type: "child_finished",
      outcome: {
        key,
        run_id: "run_child",
        status: "cancelled",
        output: null,
        error: null,
        attestation: { seq: 5, hash: "h" },
      },
    });
    expect("pending_cancels" in reported.state.record).toBe(false);
    expect(reported.wakeAt).toBeNull();
  });

  it("a child whose start is still in flight is cancelled once its start returned, not before", ({ expect }) => {
    const run = makeRun({ sub: { workflow: "child_flow" } });
    const [start] = commandsOf(startRun(run), "start_child");
    const key = start?.key ?? "";
    const cancelled = run.send({ type: "cancel", reason: "user asked" });
    expect(cancelled.state.record.pending_cancels).toEqual([key]);
    expect(entryOf(cancelled, "child.cancel_requested").body).toMatchObject({ child_run_id: null, key });
    // The start is live: a cancel now could reach no run yet, and the child would be created after it.
    const whileStarting = run.wake(NOW, { childStarts: [key] });
    expect(whileStarting.commands).toEqual([]);
    expect(whileStarting.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    const started = run.send({ type: "child_started", key, run_id: "run_child" });
    expect(started.wakeAt).toBe(NOW);
    expect(cancelledKeys(run.wake(NOW, {}))).toEqual([key]);
  });

  it("a child never asked for is not cancelled: it does not exist", ({ expect }) => {
    const run = makeRun({ each: { foreach: { items: "$.input.items" } } }, { input: { items: [0] } });
    const [payload] = dispatchesOf(startRun(run));
    run.send({ type: "task_result", result: suspendOnChild(payload?.token_id ?? "") });
    const cancelled = run.send({ type: "cancel", reason: "user asked" });
    expect(kindsOf(cancelled)).not.toContain("child.cancel_requested");
    expect("pending_cancels" in cancelled.state.record).toBe(false);
    expect(cancelled.wakeAt).toBeNull();
  });

  it("a node that fails cancels the children its other items wait for", ({ expect }) => {
    const { run, keys } = withChildren(2);
    const [first = "", second = ""] = keys;
    // Item 0's child fails; the step propagates it: the task is sent again and fails for good.
    run.send({
      type: "child_finished",
      outcome: {
        key: first,
        run_id: "run_child_0",
        status: "failed",
        output: null,
        error: { code: "x.failed", message: "no" },
        attestation: null,
      },
    });
    const resumed = run.wake(NOW, {});
    const [token] = dispatchesOf(resumed).map((payload) => payload.token_id);
    const failed = run.fail(token ?? "");
    expect(failed.state.nodes.each?.status).toBe("failed");
    expect(failed.state.record.pending_cancels).toEqual([second]);
    expect(entryOf(failed, "child.cancel_requested").body).toMatchObject({
      node: "each",
      item: 1,
      step: "sub",
      child_run_id: "run_child_1",
    });
    expect(failed.wakeAt).toBe(NOW);
  });

  it("sends at most MAX_CLEANUP_CALLS_PER_EVENT cancels per wake and the rest on the next one, and cleanup shares the wake's child-start budget", ({
    expect,
  }) => {
    const { run, keys } = withChildren(MAX_CLEANUP_CALLS_PER_EVENT + 2);
    run.send({ type: "cancel", reason: "user asked" });
    const first = run.wake(NOW, {});
    expect(cancelledKeys(first)).toEqual(keys.slice(0, MAX_CLEANUP_CALLS_PER_EVENT));
    expect(first.wakeAt).toBe(NOW);
    const second = run.wake(NOW, { cancels: cancelledKeys(first) });
    expect(cancelledKeys(second)).toEqual(keys.slice(MAX_CLEANUP_CALLS_PER_EVENT));
    expect(second.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
  });

  it("a wake of a running run that sends cleanup starts fewer children: a start is two calls, a cancel one", ({
    expect,
  }) => {
    // Eight items wait to start their children while three cancels are pending.
    const run = makeRun(
      { each: { foreach: { items: "$.input.items" } }, sub: { workflow: "child_flow" } },
      { input: { items: [0, 1, 2, 3, 4, 5, 6, 7] } },
    );
    const decision = startRun(run);
    const [start] = commandsOf(decision, "start_child");
    const tokens = dispatchesOf(decision).map((payload) => payload.token_id);
    run.send({ type: "child_started", key: start?.key ?? "", run_id: "run_child" });
    // A pending cancel a restart lost (staged: the record says so, nothing is live).
    run.state = { ...run.state, record: { ...run.state.record, pending_cancels: ["k1", "k2", "k3"] } };
    run.send({ type: "task_results", results: tokens.map(suspendOnChild) });
    const wake = run.wake(NOW, {});
    expect(cancelledKeys(wake)).toEqual(["k1", "k2", "k3"]);
    expect(commandsOf(wake, "start_child")).toHaveLength(MAX_CHILD_STARTS_PER_EVENT - 2);
  });

  it("a run that ends with its own container records the release with the terminal state; a wake sends it until release() answered, then no wake", ({
    expect,
  }) => {
    const run = withContainer();
    startRun(run);
    const finished = run.succeed(run.token("a"));
    expect(finished.state.record.status).toBe("completed");
    expect(finished.state.record.pending_releases).toEqual([`${RUN_ID}/dev_env`]);
    expect(releasedContainers(finished)).toEqual([]);
    expect(finished.wakeAt).toBe(NOW);
    const sent = run.wake(NOW, {});
    expect(releasedContainers(sent)).toEqual([`${RUN_ID}/dev_env`]);
    expect(sent.wakeAt).toBe(NOW + LIVENESS_CHECK_MS);
    expect(run.wake(NOW + LIVENESS_CHECK_MS, { releases: [`${RUN_ID}/dev_env`] }).commands).toEqual([]);
    expect(releasedContainers(run.wake(NOW + 2 * LIVENESS_CHECK_MS, {}))).toEqual([`${RUN_ID}/dev_env`]);
    const released = run.send({ type: "containers_released", containers: [`${RUN_ID}/dev_env`] });
    expect("pending_releases" in released.state.record).toBe(false);
    expect(released.wakeAt).toBeNull();
  });

  it("a container the parent handed down is the parent's to release", ({ expect }) => {
    const run = withContainer();
    run.state = {
      ...run.state,
      record: {
        ...run.state.record,
        inherited_resources: { dev_env: { type: "container", id: "run_parent/dev_env", owner: "run_parent" } },
      },
    };
    startRun(run);
    const finished = run.succeed(run.token("a"));
    expect("pending_releases" in finished.state.record).toBe(false);
    expect(finished.wakeAt).toBeNull();
  });

  it("a run without children or containers ends with nothing pending, no cleanup fields and no wake", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const finished = run.succeed(run.token("a"));
    expect(Object.keys(finished.state.record)).not.toContain("pending_cancels");
    expect(Object.keys(finished.state.record)).not.toContain("pending_releases");
    expect(finished.wakeAt).toBeNull();
  });

  it("cleanup that keeps failing after the run ended is tried less often as time passes, at most every MAX_CLEANUP_RETRY_MS", ({
    expect,
  }) => {
    const run = withContainer();
    startRun(run);
    run.succeed(run.token("a"));
    expect(run.wake(NOW + 10 * 60_000, {}).wakeAt).toBe(NOW + 10 * 60_000 + 60_000);
    const dayLater = NOW + 24 * 60 * 60_000;
    expect(run.wake(dayLater, {}).wakeAt).toBe(dayLater + MAX_CLEANUP_RETRY_MS);
  });

  it("a redrive drops a release still pending (the run works in its container again) and releases it when it ends again", ({
    expect,
  }) => {
    const run = makeRun({ a: {} }, { workflow: { resources: { dev_env: { type: "container" } } } });
    startRun(run);
    const failed = run.fail(run.token("a"));
    expect(failed.state.record.status).toBe("failed");
    expect(failed.state.record.pending_releases).toEqual([`${RUN_ID}/dev_env`]);
    const redriven = run.send({ type: "redrive" });
    expect("pending_releases" in redriven.state.record).toBe(false);
    const again = run.wake(NOW, {});
    expect(releasedContainers(again)).toEqual([]);
    const finished = run.succeed(run.token("a"));
    expect(finished.state.record.pending_releases).toEqual([`${RUN_ID}/dev_env`]);
  });

  it("a terminal wake does not repeat a report to the parent that is still in flight", ({ expect }) => {
    const run = withContainer();
    run.state = {
      ...run.state,
      record: { ...run.state.record, parent: { run_id: "run_parent", key: "run_parent/0/n/0/1/-", notified: false } },
    };
    startRun(run);
    const finished = run.succeed(run.token("a"));
    expect(commandsOf(finished, "notify_parent")).toHaveLength(1);
    const wake = run.wake(NOW, { notifying: true });
    expect(commandsOf(wake, "notify_parent")).toEqual([]);
    expect(releasedContainers(wake)).toEqual([`${RUN_ID}/dev_env`]);
    expect(commandsOf(run.wake(NOW + PARENT_NOTIFY_RETRY_MS, {}), "notify_parent")).toHaveLength(1);
  });

  it("cancel is idempotent on the child's side: a cancel of a run that ended changes nothing", ({ expect }) => {
    const run = makeRun({ a: {} });
    startRun(run);
    const cancelled = run.send({ type: "cancel", reason: "the parent run ended" });
    const again = run.send({ type: "cancel", reason: "the parent run ended" });
    expect(again.commands).toEqual([]);
    expect(again.state).toEqual(cancelled.state);
    expect(again.wakeAt).toBeNull();
  });
});

describe("timers", () => {
  /** A result that says the task stopped at a `sleep` step. */
  const sleepOf = (token: string, wait: { duration_ms?: number; until?: number }): TaskResult => ({
    token_id: token,
    success: false,
    suspended: {
      step_ref: "nap",
      step_index: 1,
      context: { input: {}, state: {}, output: {} },
      wait: { kind: "timer", ...wait },
    },
    metrics: METRICS,
  });

  it("set the alarm to the timer's end by the coordinator's clock, and resume the step then, once", ({ expect }) => {
    const run = makeRun({ only: {} });
    const token = dispatchesOf(startRun(run))[0]?.token_id ?? "";
    const suspended = run.send(resultOf(sleepOf(token, { duration_ms: 60_000 })), NOW + 10);
    expect(suspended.state.record.status).toBe("waiting");
    expect(suspended.wakeAt).toBe(NOW + 10 + 60_000);
    expect(bodiesOf(suspended, "timer.started")).toEqual([
      expect.objectContaining({ step: "nap", until: new Date(NOW + 60_010).toISOString() }),
    ]);
    // Early wakes (a restart's, a liveness check's) leave it sleeping.
    expect(dispatchesOf(run.wake(NOW + 30_000, {}))).toEqual([]);
    expect(run.state.nodes.only?.invocations[0]?.status).toBe("suspended");
    const woke = run.wake(NOW + 60_010, {});
    expect(kindsOf(woke)).toContain("timer.fired");
    const [resumed] = dispatchesOf(woke);
    expect(resumed?.resume).toMatchObject({
      mode: "after",
      step_index: 1,
      outcome: { ok: true, output: { slept_ms: 60_000, woke_at: new Date(NOW + 60_010).toISOString() } },
    });
    expect(kindsOf(run.wake(NOW + 60_020))).not.toContain("timer.fired");
  });

  it("end a timer already due in the event that opens it", ({ expect }) => {
    const run = makeRun({ only: {} });
    const token = dispatchesOf(startRun(run))[0]?.token_id ?? "";
    const decision = run.send(resultOf(sleepOf(token, { until: NOW - 5 })));
    expect(kindsOf(decision)).toEqual(expect.arrayContaining(["timer.started", "timer.fired"]));
    expect(decision.wakeAt).toBe(NOW);
    expect(decision.state.nodes.only?.invocations[0]?.status).toBe("pending");
  });

  it("are cancelled with the run, and leave no alarm behind", ({ expect }) => {
    const run = makeRun({ only: {} });
    const token = dispatchesOf(startRun(run))[0]?.token_id ?? "";
    run.send(resultOf(sleepOf(token, { duration_ms: 60_000 })));
    const cancelled = run.send({ type: "cancel", reason: "not needed" });
    expect(cancelled.state.record.status).toBe("cancelled");
    expect(bodiesOf(cancelled, "timer.cancelled")).toEqual([expect.objectContaining({ step: "nap" })]);
    expect(cancelled.wakeAt).toBeNull();
  });
});

describe("the draft's active nodes", () => {
  it("lists the nodes running or waiting, and follows a status this draft changes", ({ expect }) => {
    const run = makeRun({ a: {}, b: { depends_on: ["a"] }, c: { depends_on: ["b"] } });
    startRun(run);
    const context = { snapshot: run.snapshot, now: NOW, random: () => 0 };
    const token = run.token("a");
    const draft = new Draft(run.state, context);
    expect(draft.activeNodeIds()).toEqual(["a"]);
    expect(draft.findByToken(token)?.nodeId).toBe("a");

    const changed = new Draft(run.state, context);
    changed.setNode("a", { status: "completed" });
    changed.setNode("b", { status: "waiting" });
    changed.setNode("c", { status: "running" });
    expect(changed.activeNodeIds()).toEqual(["b", "c"]);
    // A token on a node no longer active is still found: the lookup falls back to every node.
    expect(changed.findByToken(token)?.nodeId).toBe("a");
    expect(changed.findByToken("no-such-token")).toBeUndefined();
  });
});
