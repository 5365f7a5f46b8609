import { describe, it } from "vitest";
import { EngineError, toTaskError } from "../../lib/errors.ts";
import { attemptErrorOf, Failure, TaskError, toErrorSummary, toFailure, TaskResult } from "../../schemas/index.ts";

const METRICS = { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };

describe("the one failure vocabulary", () => {
  it("turns an executor's EngineError into the task result's error, with the step, the delay asked for and the details in the message", ({
    expect,
  }) => {
    const error = new EngineError("action.invalid_input", "bad input", {
      retryable: true,
      retryAfterMs: 250,
      details: [{ path: "input.x", message: "required" }],
    });
    const taskError = toTaskError(error, "call", null);
    expect(TaskError.parse(taskError)).toEqual({
      code: "action.invalid_input",
      message: "bad input (input.x: required)",
      retryable: true,
      retry_after_ms: 250,
      step: "call",
      context_snapshot: null,
    });
    expect(toTaskError(EngineError.terminal("executor.internal", "boom"), null, null)).toEqual({
      code: "executor.internal",
      message: "boom",
      retryable: false,
      context_snapshot: null,
    });
  });

  it("records a failed result on its node, and a result that names no error as a plain task.failed", ({ expect }) => {
    const failed: TaskResult = {
      token_id: "t",
      success: false,
      error: {
        code: "http.status",
        message: "503",
        retryable: true,
        retry_after_ms: 10,
        step: "s",
        context_snapshot: null,
      },
      metrics: METRICS,
    };
    const attempt = attemptErrorOf(failed);
    expect(attempt).toEqual({ code: "http.status", message: "503", retryable: true, retry_after_ms: 10, step: "s" });
    expect(toFailure(attempt, "main")).toEqual({
      code: "http.status",
      message: "503",
      node: "main",
      retryable: true,
      step: "s",
    });
    expect(attemptErrorOf({ token_id: "t", success: false, metrics: METRICS })).toEqual({
      code: "task.failed",
      message: "the task failed",
      retryable: false,
    });
  });

  it("says nothing of retrying for a failure that was not an attempt's, and summarises any failure as code and message", ({
    expect,
  }) => {
    expect(toFailure({ code: "mapping.failed", message: "no such path" }, "n")).toEqual({
      code: "mapping.failed",
      message: "no such path",
      node: "n",
    });
    const failure: Failure = { code: "a.b", message: "m", node: "n", retryable: false };
    expect(toErrorSummary(failure)).toEqual({ code: "a.b", message: "m" });
  });

  it("still loads failures stored before retryable was recorded, and no longer takes the old wire names", ({
    expect,
  }) => {
    expect(Failure.safeParse({ code: "x.y", message: "m", node: "n" }).success).toBe(true);
    expect(
      TaskError.safeParse({ type: "x.y", step_ref: null, message: "m", retryable: false, context_snapshot: null })
        .success,
    ).toBe(false);
  });

  it("reads a task result in the wire names of the version before (a deploy rolling out)", ({ expect }) => {
    const earlier = {
      token_id: "t",
      success: false,
      error: { type: "http.status", step_ref: "call", message: "503", retryable: true, context_snapshot: null },
      metrics: { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
    };
    expect(TaskResult.parse(earlier).error).toEqual({
      code: "http.status",
      step: "call",
      message: "503",
      retryable: true,
      context_snapshot: null,
    });
    const noStep = { ...earlier, error: { ...earlier.error, step_ref: null } };
    expect(TaskResult.parse(noStep).error).not.toHaveProperty("step");
  });
});
