import { env } from "cloudflare:workers";
import { afterEach, describe, it, vi, type ExpectStatic } from "vitest";
import { runTask } from "../../executor/run-task.ts";
import type { Clock } from "../../executor/invoke.ts";
import type { ResolvedAction, ResolvedStep, TaskPayload, TaskResult } from "../../schemas/index.ts";

/**
 * The executor's step loop, driven directly (no Durable Object, no service
 * binding) with a fake clock: conditions, `on_failure`, and an action's own
 * retries and timeouts inside a step. Failures come from the real `http`
 * action against a scripted `fetch`, so retries and timeouts go through the
 * same registry and `invokeAction` as in production; time never passes for
 * real.
 */

/** A clock whose time moves only when the test (or a sleep, or a slow fake server) moves it. */
class FakeClock implements Clock {
  private time = 1_000_000;
  private readonly deadlines: { at: number; controller: AbortController }[] = [];
  /** Every sleep asked for, in ms: the retry delays. */
  readonly sleeps: number[] = [];

  now(): number {
    return this.time;
  }

  random(): number {
    return 0.5;
  }

  timeout(ms: number): AbortSignal {
    const controller = new AbortController();
    this.deadlines.push({ at: this.time + ms, controller });
    return controller.signal;
  }

  async sleep(ms: number, signal: AbortSignal): Promise<void> {
    this.sleeps.push(ms);
    this.advance(ms);
    if (signal.aborted) {
      throw signal.reason;
    }
  }

  /** Moves time on, aborting every deadline it passes as `AbortSignal.timeout` would. */
  advance(ms: number): void {
    this.time += ms;
    for (const deadline of this.deadlines) {
      if (deadline.at <= this.time && !deadline.controller.signal.aborted) {
        deadline.controller.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError"));
      }
    }
  }
}

/** One scripted answer: a status (with headers and a JSON body), after `afterMs` of fake time. */
interface Reply {
  status: number;
  body?: string;
  headers?: Record<string, string>;
  afterMs?: number;
}

/** A `fetch` that answers from a script, one reply per call, and aborts as a real one does. */
function scriptedFetch(clock: FakeClock, replies: Reply[]): { fetch: typeof fetch; calls: () => number } {
  let calls = 0;
  const fake = async (_input: RequestInfo | URL, init?: RequestInit): Promise<Response> => {
    const reply = replies[Math.min(calls, replies.length - 1)] ?? { status: 200 };
    calls += 1;
    // Time passes while the request is in flight, never before the caller is listening for its abort.
    await Promise.resolve();
    clock.advance(reply.afterMs ?? 0);
    if (init?.signal?.aborted) {
      throw init.signal.reason;
    }
    const headers = { "content-type": "application/json", ...reply.headers };
    return new Response(reply.body ?? '{"ok":true}', { status: reply.status, headers });
  };
  return { fetch: fake, calls: () => calls };
}

function contextStep(ref: string, expr: string, extra: Partial<ResolvedStep> = {}): ResolvedStep {
  return {
    ref,
    action: { id: `t/${ref}`, version: 0, kind: "context", implementation: { updates: [{ path: "v", expr }] } },
    ...extra,
  };
}

function httpStep(ref: string, action: Partial<ResolvedAction> = {}, extra: Partial<ResolvedStep> = {}): ResolvedStep {
  const http = {
    id: `t/${ref}`,
    version: 0,
    kind: "http",
    implementation: { method: "GET", url_template: "https://api.test/thing" },
    ...action,
  } as ResolvedAction;
  return { ref, action: http, ...extra };
}

function payload(steps: ResolvedStep[], extra: Partial<TaskPayload> = {}): TaskPayload {
  return {
    token_id: "tok",
    workflow_run_id: "run_loop",
    workflow_id: "wf",
    workflow_version: 0,
    node_id: "n",
    item_index: null,
    iteration: 1,
    task_id: "t",
    task_version: 0,
    task: { id: "t", version: 0, steps },
    input: { n: 2 },
    resources: {},
    timeout_ms: 60_000,
    retry_attempt: 0,
    tools: [],
    ...extra,
  };
}

/** Runs a task with the fake clock and a scripted `fetch`. */
async function run(
  task: TaskPayload,
  replies: Reply[] = [],
  clock = new FakeClock(),
): Promise<{ result: TaskResult; clock: FakeClock; calls: number }> {
  const scripted = scriptedFetch(clock, replies);
  const result = await runTask(task, { context: { env, fetch: scripted.fetch }, clock });
  return { result, clock, calls: scripted.calls() };
}

/**
 * The one place that knows the result error's field names: a failed result
 * with this code, step, retryability (and, when given, retry delay, message
 * fragment and state in its context snapshot).
 */
function expectFailure(
  expect: ExpectStatic,
  result: TaskResult,
  want: { code: string; step: string | null; retryable: boolean; retryAfterMs?: number; message?: string },
  state?: Record<string, unknown>,
): void {
  expect(result.success).toBe(false);
  expect(result.error).toMatchObject({ code: want.code, retryable: want.retryable });
  expect(result.error?.step ?? null).toBe(want.step);
  if (want.retryAfterMs !== undefined) {
    expect(result.error?.retry_after_ms).toBe(want.retryAfterMs);
  }
  if (want.message !== undefined) {
    expect(result.error?.message).toContain(want.message);
  }
  if (state !== undefined) {
    expect(result.error?.context_snapshot?.state).toEqual(state);
  }
}

const RETRY_3 = { max_attempts: 3, initial_delay_ms: 500, backoff_coefficient: 2, max_delay_ms: 10_000, jitter: false };

afterEach(() => {
  vi.restoreAllMocks();
});

describe("step conditions", () => {
  it("runs a step whose condition holds and skips one whose condition is false (else defaults to skip)", async ({
    expect,
  }) => {
    const { result } = await run(
      payload([
        contextStep("a", "input.n * 10", { condition: { if: "input.n > 1" }, output_mapping: { "output.a": "$.v" } }),
        contextStep("b", "'never'", { condition: { if: "input.n > 5" }, output_mapping: { "output.b": "$.v" } }),
        contextStep("c", "input.b_ran", {
          input_mapping: { b_ran: { expr: "has(output.b)" } },
          output_mapping: { "output.c": "$.v" },
        }),
      ]),
    );
    expect(result).toMatchObject({ success: true });
    expect(result.output).toEqual({ a: 20, c: false });
    expect(result.metrics.steps_executed).toBe(2);
  });

  it("ends the task successfully with the output so far when a false condition says else: succeed", async ({
    expect,
  }) => {
    const { result } = await run(
      payload([
        contextStep("a", "1", { output_mapping: { "output.a": "$.v" } }),
        contextStep("stop", "2", {
          condition: { if: "false", else: "succeed" },
          output_mapping: { "output.b": "$.v" },
        }),
        contextStep("after", "3", { output_mapping: { "output.c": "$.v" } }),
      ]),
    );
    expect(result).toMatchObject({ success: true, output: { a: 1 } });
    expect(result.metrics.steps_executed).toBe(1);
  });

  it("fails the task, not retryable, when a false condition says else: fail", async ({ expect }) => {
    const { result } = await run(
      payload([contextStep("a", "1"), contextStep("gate", "2", { condition: { if: "input.n > 5", else: "fail" } })]),
    );
    expectFailure(
      expect,
      result,
      { code: "step.condition_failed", step: "gate", retryable: false, message: "input.n > 5" },
      { a: { v: 1 } },
    );
  });

  it("fails the task when a condition does not yield a bool, whatever on_failure says", async ({ expect }) => {
    const { result } = await run(
      payload([contextStep("a", "1", { condition: { if: "input.n" }, on_failure: "continue" })]),
    );
    expectFailure(expect, result, { code: "expr.not_boolean", step: "a", retryable: false });
    expect(result.metrics.steps_executed).toBe(0);
  });
});

describe("on_failure", () => {
  it("abort (the default) fails the task not retryable, even for a retryable error", async ({ expect }) => {
    const { result, calls } = await run(payload([contextStep("a", "1"), httpStep("call")]), [{ status: 503 }]);
    expectFailure(expect, result, { code: "http.status", step: "call", retryable: false }, { a: { v: 1 } });
    expect(calls).toBe(1);
  });

  it("retry fails the task as retryable, with the server's Retry-After", async ({ expect }) => {
    const { result } = await run(payload([httpStep("call", {}, { on_failure: "retry" })]), [
      { status: 503, headers: { "retry-after": "7" } },
    ]);
    expectFailure(expect, result, { code: "http.status", step: "call", retryable: true, retryAfterMs: 7000 });
  });

  it("retry leaves a failure that the same input reproduces not retryable", async ({ expect }) => {
    const { result } = await run(payload([httpStep("call", {}, { on_failure: "retry" })]), [
      { status: 200, body: '{"bad":"\\ud800"}' },
    ]);
    expectFailure(expect, result, { code: "action.unsignable_output", step: "call", retryable: false });
  });

  it("retry makes a terminal error retryable too: the coordinator may re-run the whole task", async ({ expect }) => {
    const { result, calls } = await run(payload([httpStep("call", {}, { on_failure: "retry" })]), [{ status: 404 }]);
    expectFailure(expect, result, { code: "http.status", step: "call", retryable: true });
    expect(calls).toBe(1);
  });

  it("continue records each failure in state._errors and runs the next step", async ({ expect }) => {
    const { result } = await run(
      payload([
        httpStep("first", {}, { on_failure: "continue" }),
        httpStep("second", {}, { on_failure: "continue" }),
        contextStep("report", "input.errors", {
          input_mapping: { errors: "$.state._errors" },
          output_mapping: { "output.errors": "$.v" },
        }),
      ]),
      [{ status: 400 }, { status: 500 }],
    );
    expect(result).toMatchObject({
      success: true,
      output: {
        errors: [
          { step: "first", error: { code: "http.status", message: expect.stringContaining("400") } },
          { step: "second", error: { code: "http.status", message: expect.stringContaining("500") } },
        ],
      },
    });
    expect(result.metrics.steps_executed).toBe(3);
  });
});

describe("retries inside a step", () => {
  it("retries retryable failures by the action's retry_policy, sleeping its backoff, then succeeds", async ({
    expect,
  }) => {
    const { result, clock, calls } = await run(
      payload([
        httpStep("call", { execution: { retry_policy: RETRY_3 } }, { output_mapping: { "output.s": "$.status" } }),
      ]),
      [{ status: 503 }, { status: 502 }, { status: 200 }],
    );
    expect(result).toMatchObject({ success: true, output: { s: 200 } });
    expect(calls).toBe(3);
    expect(clock.sleeps).toEqual([500, 1000]);
    expect(result.metrics).toMatchObject({ duration_ms: 1500, steps_executed: 1 });
  });

  it("waits at least a server's Retry-After before the next attempt", async ({ expect }) => {
    const { result, clock } = await run(payload([httpStep("call", { execution: { retry_policy: RETRY_3 } })]), [
      { status: 429, headers: { "retry-after": "4" } },
      { status: 200 },
    ]);
    expect(result.success).toBe(true);
    expect(clock.sleeps).toEqual([4000]);
  });

  it("hands the last error to on_failure once the attempts are spent", async ({ expect }) => {
    const { result, clock, calls } = await run(
      payload([httpStep("call", { execution: { retry_policy: RETRY_3 } }, { on_failure: "retry" })]),
      [{ status: 503 }],
    );
    expectFailure(expect, result, { code: "http.status", step: "call", retryable: true, message: "503" });
    expect(calls).toBe(3);
    expect(clock.sleeps).toEqual([500, 1000]);
  });

  it("does not retry a failure that is not retryable", async ({ expect }) => {
    const { result, clock, calls } = await run(payload([httpStep("call", { execution: { retry_policy: RETRY_3 } })]), [
      { status: 403 },
    ]);
    expectFailure(expect, result, { code: "http.status", step: "call", retryable: false });
    expect(calls).toBe(1);
    expect(clock.sleeps).toEqual([]);
  });
});

describe("timeouts", () => {
  it("fails a call that outlives the action's timeout_ms with action.timeout, and retries it", async ({ expect }) => {
    const clock = new FakeClock();
    const action = { execution: { timeout_ms: 1000, retry_policy: RETRY_3 } };
    const slow = { status: 200, afterMs: 5000 };
    const { result, calls } = await run(
      payload([httpStep("call", action, { output_mapping: { "output.s": "$.status" } })]),
      [slow, { status: 200, afterMs: 200 }],
      clock,
    );
    expect(result).toMatchObject({ success: true, output: { s: 200 } });
    expect(calls).toBe(2);
    expect(clock.sleeps).toEqual([500]);

    const spent = await run(payload([httpStep("call", action)]), [slow], clock);
    expectFailure(expect, spent.result, { code: "action.timeout", step: "call", retryable: false, message: "1000 ms" });
    expect(spent.calls).toBe(3);
  });

  it("fails with task.timeout (retryable) when the task's time runs out in a step, whatever on_failure says", async ({
    expect,
  }) => {
    const { result } = await run(
      payload([contextStep("a", "1"), httpStep("call", {}, { on_failure: "continue" }), contextStep("b", "2")], {
        timeout_ms: 2000,
      }),
      [{ status: 200, afterMs: 3000 }],
    );
    expectFailure(expect, result, { code: "task.timeout", step: "call", retryable: true }, { a: { v: 1 } });
    expect(result.metrics.duration_ms).toBe(3000);
  });

  it("stops retrying when the task's time runs out during a backoff", async ({ expect }) => {
    const policy = { ...RETRY_3, initial_delay_ms: 10_000 };
    const { result, calls, clock } = await run(
      payload([httpStep("call", { execution: { retry_policy: policy } })], { timeout_ms: 5000 }),
      [{ status: 503 }, { status: 200 }],
    );
    expectFailure(expect, result, { code: "task.timeout", step: "call", retryable: true });
    expect(calls).toBe(1);
    expect(clock.sleeps).toEqual([10_000]);
  });
});

describe("where a task starts", () => {
  it("fails before any step when the input does not match input_schema", async ({ expect }) => {
    const task = payload([contextStep("a", "1")]);
    const { result } = await run({ ...task, task: { ...task.task, input_schema: { required: ["missing"] } } });
    expectFailure(expect, result, { code: "task.invalid_input", step: null, retryable: false }, {});
    expect(result.metrics.steps_executed).toBe(0);
  });

  it("suspends at a high-risk step, runs it once approved, and goes on after it", async ({ expect }) => {
    const risky = contextStep("risky", "input.n + 1", { output_mapping: { "output.r": "$.v" } });
    const steps = [
      contextStep("a", "1", { output_mapping: { "output.a": "$.v" } }),
      { ...risky, action: { ...risky.action, risk: "high" } } as ResolvedStep,
      contextStep("b", "3", { output_mapping: { "output.b": "$.v" } }),
    ];
    const first = await run(payload(steps));
    expect(first.result.suspended).toMatchObject({ step_ref: "risky", step_index: 1, wait: { gate_kind: "approval" } });
    const context = first.result.suspended?.context;
    expect(context?.output).toEqual({ a: 1 });
    if (context === undefined) {
      return;
    }
    const approved = await run(payload(steps, { resume: { step_index: 1, context, mode: "approved" } }));
    expect(approved.result).toMatchObject({ success: true, output: { a: 1, r: 3, b: 3 } });
    expect(approved.result.metrics.steps_executed).toBe(2);

    const rejected = await run(payload(steps, { resume: { step_index: 1, context, mode: "rejected", reason: "no" } }));
    expectFailure(expect, rejected.result, {
      code: "approval.rejected",
      step: "risky",
      retryable: false,
      message: "no",
    });
  });

  it("writes a resumed step's outcome as its output, or hands its failure to on_failure", async ({ expect }) => {
    const steps = [
      contextStep("wait", "0", { output_mapping: { "output.answer": "$.answer" }, on_failure: "continue" }),
      contextStep("after", "1", { output_mapping: { "output.after": "$.v" } }),
    ];
    const context = { input: { n: 2 }, state: {}, output: {} };
    const answered = await run(
      payload(steps, {
        resume: { step_index: 0, context, mode: "after", outcome: { ok: true, output: { answer: 42 } } },
      }),
    );
    expect(answered.result).toMatchObject({ success: true, output: { answer: 42, after: 1 } });

    const failed = await run(
      payload(steps, {
        resume: {
          step_index: 0,
          context,
          mode: "after",
          outcome: { ok: false, error: { code: "child.failed", message: "x" } },
        },
      }),
    );
    expect(failed.result).toMatchObject({ success: true, output: { after: 1 } });
    expect(failed.result.metrics.steps_executed).toBe(1);
    // The waiting step is on record first: finished here, with no call of its own in this dispatch.
    const statuses = (result: TaskResult) =>
      result.steps?.map((step) => [step.step, step.status, step.attempts.length]);
    expect(statuses(answered.result)).toEqual([
      ["wait", "completed", 0],
      ["after", "completed", 1],
    ]);
    expect(statuses(failed.result)).toEqual([
      ["wait", "continued", 0],
      ["after", "completed", 1],
    ]);
    expect(failed.result.steps?.[0]?.error?.code).toBe("child.failed");
  });
});

describe("step records", () => {
  it("records each call of a fail-fail-succeed step, with its error, its wait and why", async ({ expect }) => {
    const action = { execution: { retry_policy: RETRY_3 } };
    const { result } = await run(payload([httpStep("call", action)]), [
      { status: 503 },
      { status: 503, headers: { "retry-after": "3" } },
      { status: 200 },
    ]);
    expect(result.success).toBe(true);
    expect(result.steps).toEqual([
      {
        step: "call",
        action: "http t/call@0",
        status: "completed",
        duration_ms: expect.any(Number),
        attempts: [
          {
            attempt: 1,
            duration_ms: expect.any(Number),
            call: { method: "GET", url: "https://api.test/thing", status: 503 },
            error: expect.objectContaining({ code: "http.status", retryable: true }),
            retry_in_ms: 500,
            retry_reason: "backoff",
          },
          {
            attempt: 2,
            duration_ms: expect.any(Number),
            call: { method: "GET", url: "https://api.test/thing", status: 503 },
            error: expect.objectContaining({ code: "http.status", retryable: true, retry_after_ms: 3000 }),
            retry_in_ms: 3000,
            retry_reason: "retry_after",
          },
          {
            attempt: 3,
            duration_ms: expect.any(Number),
            call: { method: "GET", url: "https://api.test/thing", status: 200 },
          },
        ],
      },
    ]);
  });

  it("records skipped steps, a continued failure and the failing step, in order", async ({ expect }) => {
    const { result } = await run(
      payload([
        contextStep("skip", "1", { condition: { if: "false" } }),
        httpStep("soft", {}, { on_failure: "continue" }),
        contextStep("ok", "2"),
        httpStep("hard"),
      ]),
      [{ status: 404 }, { status: 500 }],
    );
    expect(result.success).toBe(false);
    expect(
      result.steps?.map((step) => [step.step, step.status, step.error?.code ?? null, step.attempts.length]),
    ).toEqual([
      ["skip", "skipped", null, 0],
      ["soft", "continued", "http.status", 1],
      ["ok", "completed", null, 1],
      ["hard", "failed", "http.status", 1],
    ]);
    expect(result.steps?.[0]?.else).toBe("skip");
  });

  it("records the step that waits as suspended, after the steps before it", async ({ expect }) => {
    const human = { prompt_template: "ok?", input_schema: { type: "object" } };
    const wait = { ref: "ask", action: { id: "t/ask", version: 0, kind: "human", implementation: human } };
    const { result } = await run(payload([contextStep("a", "1"), wait as ResolvedStep]));
    expect(result.suspended).toBeDefined();
    expect(result.steps?.map((step) => [step.step, step.status])).toEqual([
      ["a", "completed"],
      ["ask", "suspended"],
    ]);
  });
});
