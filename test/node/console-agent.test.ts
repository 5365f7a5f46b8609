// The console's pure parts for runs of agents (console/src): how each call of
// a step is told (its error, the wait before the next call, an llm call's
// model, prompt, answer, tokens and cost), bars on a time axis, a plan run's
// graph and step names, a cancel's reason, and the /gates page's route. The
// pages themselves are driven in a real browser by test/e2e/console-agent.test.mjs.
import { describe, expect, test } from "vitest";
import { answerText, budgetLines, callFacts, conversationOf, turnLine } from "../../console/src/agent.ts";
import { callLines, formatMs, formatUsd, toLlmCall } from "../../console/src/calls.ts";
import { cancelReasonOf, summarizeEntry } from "../../console/src/journal-summary.ts";
import { planStepsOf, stepName } from "../../console/src/plan-graph.ts";
import { parseRoute } from "../../console/src/routes.ts";
import { scaleBars, sequentialBars } from "../../console/src/time-axis.ts";
import type { AgentView } from "../../schemas/api.ts";
import type { StepRecord } from "../../schemas/payload.ts";

const flakyHttp: StepRecord = {
  step: "get",
  action: "http get_user@1",
  status: "completed",
  duration_ms: 260,
  attempts: [
    {
      attempt: 1,
      duration_ms: 12,
      error: { code: "http.status", message: "GET http://t/flaky answered 503", retryable: true },
      retry_in_ms: 200,
      retry_reason: "backoff",
      call: { method: "GET", url: "http://t/flaky", status: 503 },
    },
    {
      attempt: 2,
      duration_ms: 8,
      error: { code: "http.status", message: "GET http://t/flaky answered 429", retryable: true, retry_after_ms: 1000 },
      retry_in_ms: 1000,
      retry_reason: "retry_after",
      call: { method: "GET", url: "http://t/flaky", status: 429 },
    },
    { attempt: 3, duration_ms: 9, call: { method: "GET", url: "http://t/flaky", status: 200 } },
  ],
};

describe("callLines", () => {
  test("tells each call of a step: its outcome, error, what it did and the wait before the next", () => {
    expect(callLines(flakyHttp)).toEqual([
      {
        attempt: 1,
        ok: false,
        durationMs: 12,
        error: "http.status: GET http://t/flaky answered 503",
        retry: "waited 200 ms (backoff) before call 2",
        llm: null,
        detail: "GET http://t/flaky → 503",
      },
      {
        attempt: 2,
        ok: false,
        durationMs: 8,
        error: "http.status: GET http://t/flaky answered 429",
        retry: "waited 1.0 s (the peer's Retry-After) before call 3",
        llm: null,
        detail: "GET http://t/flaky → 429",
      },
      { attempt: 3, ok: true, durationMs: 9, error: null, retry: null, llm: null, detail: "GET http://t/flaky → 200" },
    ]);
  });

  test("tells an llm step's fallback to the next model and its repair, which follow at once", () => {
    const error = { code: "llm.status", message: "model answered 503", retryable: true };
    const lines = callLines({
      step: "ask",
      action: "llm inline@0",
      status: "completed",
      duration_ms: 30,
      attempts: [
        { attempt: 1, duration_ms: 5, error, retry_in_ms: 0, retry_reason: "fallback" },
        {
          attempt: 2,
          duration_ms: 9,
          error: { code: "llm.invalid_output", message: "no match", retryable: false },
          retry_in_ms: 0,
          retry_reason: "repair",
        },
        { attempt: 3, duration_ms: 9 },
      ],
    });
    expect(lines.map((line) => line.retry)).toEqual([
      "call 2 went to the next model at once (fallback)",
      "call 3 asked the model to repair its answer",
      null,
    ]);
  });

  test("reads an llm call's model, prompt messages, answer, tokens, cost and finish reason", () => {
    const [line] = callLines({
      step: "ask",
      action: "llm inline@0",
      status: "completed",
      duration_ms: 30,
      attempts: [
        {
          attempt: 1,
          duration_ms: 30,
          call: {
            provider: "openai-compatible",
            model: "local",
            messages: [
              { role: "system", content: "You name things." },
              { role: "user", content: "Name the sea" },
            ],
            tokens: { input: 5, output: 3 },
            cost_usd: 0.000011,
            finish_reason: "stop",
            answer: '{"name":"Name the sea"}',
          },
        },
      ],
    });
    expect(line?.llm).toEqual({
      provider: "openai-compatible",
      model: "local",
      messages: [
        { role: "system", content: "You name things." },
        { role: "user", content: "Name the sea" },
      ],
      messagesCut: null,
      answer: '{"name":"Name the sea"}',
      tokens: { input: 5, output: 3 },
      costUsd: 0.000011,
      finishReason: "stop",
      toolCalls: [],
    });
    expect(line?.detail).toBeNull();
  });

  test("shows a prompt or an answer kept as a digest by its preview and size", () => {
    const recorded = { sha256: "ab".repeat(32), chars: 9000, preview: '[{"role":"user"' };
    const llm = toLlmCall({ provider: "openai", model: "m", messages: recorded, answer: recorded });
    expect(llm?.messages).toEqual([]);
    expect(llm?.messagesCut).toBe('[{"role":"user"… (9000 characters, sha256 abababababab…)');
    expect(llm?.answer).toBe(llm?.messagesCut);
    expect(llm?.tokens).toBeNull();
    expect(toLlmCall(undefined)).toBeNull();
    // An agent's turn that asked for tools names them (its answer is empty).
    const turn = toLlmCall({
      provider: "anthropic",
      model: "m",
      answer: "",
      tool_calls: [
        { id: "c0", name: "lookup" },
        { id: "c1", name: "page" },
      ],
    });
    expect(turn?.toolCalls).toEqual(["lookup", "page"]);
    expect(toLlmCall({ provider: "openai", model: "m", answer: "done" })?.toolCalls).toEqual([]);
  });

  test("formats durations and costs", () => {
    expect([formatMs(850), formatMs(1_250), formatMs(42_000), formatMs(125_000)]).toEqual([
      "850 ms",
      "1.3 s",
      "42 s",
      "2 min 5 s",
    ]);
    expect([formatUsd(0), formatUsd(0.000011), formatUsd(1.5)]).toEqual(["$0", "$0.000011", "$1.50"]);
  });
});

describe("time axis", () => {
  test("places bars by start and end over the common span; a running one runs to now", () => {
    const axis = scaleBars(
      [
        { id: "a", start: 1_000, end: 1_500 },
        { id: "b", start: 1_500, end: null },
        { id: "c", start: null, end: null },
      ],
      3_000,
    );
    expect(axis.spanMs).toBe(2_000);
    expect(axis.bars).toEqual([
      { id: "a", leftPct: 0, widthPct: 25, durationMs: 500, running: false },
      { id: "b", leftPct: 25, widthPct: 75, durationMs: 1_500, running: true },
    ]);
    expect(axis.ticks.map((tick) => tick.label)).toEqual(["0 ms", "500 ms", "1.0 s", "1.5 s", "2.0 s"]);
  });

  test("lays steps end to end from the dispatch's start", () => {
    const axis = sequentialBars([
      { id: "0", durationMs: 30 },
      { id: "1", durationMs: 10 },
      { id: "2", durationMs: 60 },
    ]);
    expect(axis.bars.map((bar) => [bar.leftPct, bar.widthPct])).toEqual([
      [0, 30],
      [30, 10],
      [40, 60],
    ]);
  });
});

describe("plan runs", () => {
  const created = {
    kind: "run.created",
    body: {
      workflow: { id: "plan", version: 1 },
      plan: {
        notation: "dependency",
        graph: {
          layers: [["step-1"], ["step-2"]],
          steps: [
            { id: "step-1", tool: "facilities_list", depends_on: [], risk: "low" },
            { id: "step-2", tool: "shipments_list", depends_on: ["step-1"], risk: "high" },
          ],
        },
      },
    },
  };

  test("reads the plan's steps, tools and dependencies from the run's first entry", () => {
    expect(planStepsOf([created])).toEqual([
      { id: "step-1", tool: "facilities_list", dependsOn: [] },
      { id: "step-2", tool: "shipments_list", dependsOn: ["step-1"] },
    ]);
    expect(planStepsOf([{ kind: "run.created", body: { workflow: { id: "w", version: 1 } } }])).toBeNull();
  });

  test("names a plan node's compiled call step by its plan step and tool", () => {
    const plan = planStepsOf([created]);
    expect(stepName("call", "step-2", plan)).toBe("step-2 (shipments_list)");
    expect(stepName("call", "step-2", null)).toBe("call");
    expect(stepName("fetch", "main", plan)).toBe("fetch");
  });
});

test("a cancelled run's reason comes from its run.status entry to cancelled", () => {
  const entries = [
    { kind: "run.status", body: { from: "queued", to: "running", reason: "dispatching" } },
    { kind: "run.status", body: { from: "running", to: "cancelled", reason: "wrong input" } },
  ];
  expect(cancelReasonOf(entries)).toBe("wrong input");
  expect(cancelReasonOf(entries.slice(0, 1))).toBeNull();
});

test("/gates is the open gates page", () => {
  expect(parseRoute("/gates", "")).toEqual({ page: "gates" });
  expect(parseRoute("/gates/x", "")).toEqual({ page: "not_found", path: "/gates/x" });
});

test("/schedules is the schedules page", () => {
  expect(parseRoute("/schedules", "")).toEqual({ page: "schedules" });
  expect(parseRoute("/schedules/nightly", "")).toEqual({ page: "not_found", path: "/schedules/nightly" });
});

test("compensation entries have timeline summaries of their own", () => {
  const lines = [
    summarizeEntry("compensation.started", { trigger: "manual", pending: [1, 0] }),
    summarizeEntry("undo.dispatched", { undo: 1, attempt: 1, action: "http refund@1", node: "pay", step: "charge" }),
    summarizeEntry("undo.failed", { undo: 1, attempt: 2, error: { code: "http.status", message: "answered 500" } }),
    summarizeEntry("undo.completed", { undo: 0, attempt: 1, duration_ms: 4 }),
    summarizeEntry("compensation.finished", { status: "failed", undone: 1, undos: 2 }),
  ].map((line) => line.summary);
  expect(lines).toEqual([
    "manual: 2 undo(s) to run",
    "undo 1, attempt 1: http refund@1",
    "undo 1, attempt 2: http.status: answered 500",
    "undo 0, attempt 1 in 4 ms",
    "failed: 1 of 2 undone",
  ]);
});

describe("an agent's loop", () => {
  const turn = (n: number, extra: Partial<AgentView["turns"][number]> = {}): AgentView["turns"][number] => ({
    turn: n,
    model: "gpt-4o",
    provider: "openai",
    tokens: { input: 300, output: 40 },
    cost_usd: 0.0015,
    finish_reason: "tool-calls",
    ...extra,
  });
  const call = (turnNo: number, index: number, name: string): AgentView["tool_calls"][number] => ({
    turn: turnNo,
    index,
    name,
    call: `call_${turnNo}_${index}`,
    input: {},
    status: "completed",
    attempts: 1,
    duration_ms: 41,
  });
  const agent: AgentView = {
    step: "agent",
    turns: [turn(1), turn(2), turn(3, { repair: true }), turn(4, { finish_reason: "stop", answer: "done" })],
    tool_calls: [call(2, 1, "echo"), call(1, 0, "lookup"), call(2, 0, "lookup")],
    tool_calls_total: 3,
    usage: { tokens: { input: 512, output: 300 }, cost_usd: 0.0021 },
    budget: { tokens: 5_000, cost_usd: 0.5 },
    max_turns: 8,
  };

  test("is told as a conversation: each turn, then the calls it asked for in their order", () => {
    expect(
      conversationOf(agent).map(({ turn: t, calls }) => [t.turn, calls.map((c) => `${c.name}#${c.index}`)]),
    ).toEqual([
      [1, ["lookup#0"]],
      [2, ["lookup#0", "echo#1"]],
      [3, []],
      [4, []],
    ]);
  });

  test("says what it spent against its limits, repairs not counted as turns", () => {
    expect(budgetLines(agent)).toEqual(["3 of 8 turns", "812 of 5,000 tokens", "$0.0021 of $0.50"]);
    const { budget: _budget, ...unbounded } = agent;
    expect(budgetLines(unbounded)).toEqual(["3 of 8 turns", "812 tokens", "$0.0021"]);
  });

  test("tells each turn and call at a glance, and a long answer by its preview", () => {
    expect(turnLine(turn(1))).toBe("gpt-4o (openai) · 300 in · 40 out · $0.0015 · tool-calls");
    expect(callFacts(call(1, 0, "lookup"))).toBe("1 attempt · 41 ms");
    expect(callFacts({ ...call(1, 0, "lookup"), attempts: 0, duration_ms: undefined })).toBe("0 attempts");
    expect(answerText(turn(4, { answer: "done" }))).toBe("done");
    const recorded = { sha256: "ab".repeat(32), chars: 9000, preview: "It was" };
    expect(answerText(turn(4, { answer: recorded }))).toBe("It was… (9000 characters, sha256 abababababab…)");
    expect(answerText(turn(1))).toBeNull();
  });
});
