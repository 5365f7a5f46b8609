import { describe, it } from "vitest";
import { mergeStepSummaries, withChild } from "../../coordinator/summaries.ts";
import type { StepRecord } from "../../schemas/index.ts";

const record = (step: string, status: StepRecord["status"], attempts: StepRecord["attempts"] = []): StepRecord => ({
  step,
  action: `context wf/main/${step}@0`,
  status,
  duration_ms: 3,
  attempts,
});

describe("step summaries on an invocation", () => {
  it("a continuation keeps the steps before the one it resumed; a fresh attempt replaces them all", ({ expect }) => {
    const first = mergeStepSummaries(undefined, [record("a", "completed"), record("gate", "suspended")]);
    expect(first.map((step) => `${step.step}:${step.status}`)).toEqual(["a:completed", "gate:suspended"]);
    const continued = mergeStepSummaries(first, [record("gate", "completed"), record("b", "failed")]);
    expect(continued.map((step) => `${step.step}:${step.status}`)).toEqual([
      "a:completed",
      "gate:completed",
      "b:failed",
    ]);
    const retried = mergeStepSummaries(continued, [record("a", "completed"), record("gate", "suspended")]);
    expect(retried.map((step) => `${step.step}:${step.status}`)).toEqual(["a:completed", "gate:suspended"]);
  });

  it("sums an llm step's tokens and cost over its attempts, and names the error that failed a step", ({ expect }) => {
    const call = (input: number, output: number, cost: number) => ({ tokens: { input, output }, cost_usd: cost });
    const [llm] = mergeStepSummaries(undefined, [
      record("ask", "completed", [
        {
          attempt: 1,
          duration_ms: 1,
          call: call(5, 0, 0.1),
          error: { code: "llm.bad_output", message: "no", retryable: true },
        },
        { attempt: 2, duration_ms: 1, call: call(5, 3, 0.2) },
      ]),
    ]);
    expect(llm).toEqual({
      step: "ask",
      status: "completed",
      attempts: 2,
      duration_ms: 3,
      tokens: { input: 10, output: 3 },
      cost_usd: 0.3,
    });
    const [failed] = mergeStepSummaries(undefined, [
      { ...record("get", "failed"), error: { code: "http.status", message: "404", retryable: false } },
    ]);
    expect(failed).toEqual({ step: "get", status: "failed", attempts: 0, duration_ms: 3, error: "http.status" });
  });

  it("adds a child once and updates how it ended", ({ expect }) => {
    const started = withChild(undefined, { run_id: "run_1", step: "call", workflow: "w@1", status: null });
    const again = withChild(started, { run_id: "run_2", step: "call", workflow: "w@1", status: null });
    expect(withChild(again, { run_id: "run_1", step: "call", workflow: "w@1", status: "failed" })).toEqual([
      { run_id: "run_1", step: "call", workflow: "w@1", status: "failed" },
      { run_id: "run_2", step: "call", workflow: "w@1", status: null },
    ]);
  });
});
