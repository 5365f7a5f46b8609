import { describe, it } from "vitest";
import { runText } from "../../cli/format.ts";
import type { RunView, StepSummary, ToolResult } from "../../schemas/index.ts";

/** `trellis show`: how a run's nodes read (docs/cli.md). */

const step = (status: StepSummary["status"], attempts: number, extra: Partial<StepSummary> = {}): StepSummary => ({
  step: "fetch",
  status,
  attempts,
  duration_ms: 3,
  ...extra,
});

const NO_ITEMS = { pending: 0, running: 0, completed: 0, failed: 0, skipped: 0, cancelled: 0 };

function view(nodes: RunView["nodes"]): RunView {
  return {
    run_id: "run_0123456789abcdef0123456789abcdef",
    workflow: { id: "batch", version: 2 },
    status: "completed",
    mode: "auto",
    input: {},
    output: {},
    error: null,
    created_at: "2026-11-24T00:00:00.000Z",
    updated_at: "2026-11-24T00:00:01.000Z",
    start_at: null,
    trigger: { kind: "api" },
    priority: 5,
    nodes,
    gates: [],
    waiting_for: [],
    usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
    parent: null,
    children: [],
    controls: [],
  };
}

const times = { started_at: "2026-11-24T00:00:00.100Z", finished_at: "2026-11-24T00:00:00.900Z" };

describe("trellis show", () => {
  it("prints a fan-out's items and its attempts and calls per item, not the attempts summed over items", ({
    expect,
  }) => {
    const text = runText(
      view({
        fan: {
          status: "completed",
          attempts: 3,
          ...times,
          items: { ...NO_ITEMS, total: 3, completed: 3 },
          invocations: [0, 1, 2].map((index) => ({
            index,
            status: "completed" as const,
            attempts: 1,
            steps: [step("completed", 1)],
          })),
        },
      }),
    );
    expect(text.split("\n").slice(1, 3)).toEqual([
      "  completed  fan  3 items: 3 completed  attempts 1 per item",
      "      fetch  completed 3  calls 1 per item",
    ]);
    expect(text).not.toContain("attempts 3");
  });

  it("shows when items differ: a retried item, a failed one, a skipped one, a call that was retried", ({ expect }) => {
    const text = runText(
      view({
        fan: {
          status: "failed",
          attempts: 4,
          ...times,
          items: { ...NO_ITEMS, total: 4, completed: 2, failed: 1, skipped: 1 },
          invocations: [
            { index: 0, status: "completed", attempts: 1, steps: [step("completed", 1)] },
            { index: 1, status: "completed", attempts: 2, steps: [step("completed", 3)] },
            { index: 2, status: "failed", attempts: 1, steps: [step("failed", 1, { error: "http.status" })] },
            { index: 3, status: "skipped", attempts: 0, steps: [] },
          ],
        },
      }),
    );
    expect(text.split("\n").slice(1, 3)).toEqual([
      "  failed     fan  4 items: 2 completed, 1 failed, 1 skipped  attempts 1–2 per item",
      "      fetch  completed 2, failed 1  calls 1–3 per item  http.status",
    ]);
  });

  it("prints nodes in the order the run view lists them (dependency order), a plain node with its attempts", ({
    expect,
  }) => {
    const plain = (attempts: number) => ({
      status: "completed" as const,
      attempts,
      ...times,
      invocations: [{ index: 0, status: "completed" as const, attempts, steps: [step("completed", 1)] }],
    });
    const text = runText(view({ zeta: plain(1), alpha: plain(2) }));
    expect(text.split("\n").slice(1)).toEqual([
      "  completed  zeta  attempts 1",
      "      completed  fetch",
      "  completed  alpha  attempts 2",
      "      completed  fetch",
      "output: {}",
    ]);
  });
});

describe("trellis show of a plan run", () => {
  const result = (step: string, success: boolean, error?: ToolResult["error"]): ToolResult => ({
    step,
    success,
    tool: success ? "lookup" : "chat_respond",
    data: null,
    ...(error ? { error } : {}),
    metadata: { executionTime: success ? 12 : 0, timestamp: null, retries: 0 },
  });

  it("lists a fallback that had nothing to answer as skipped, not failed", ({ expect }) => {
    const text = runText({
      ...view({}),
      results: [
        result("step-01", true),
        result("step-02", false, { code: "http.status", message: "the target answered 500" }),
        result("step-09", false, { code: "plan.step_skipped", message: "the step was skipped" }),
        result("step-10", false, { code: "plan.step_cancelled", message: "the step was cancelled" }),
        result("step-11", false),
      ],
    });
    expect(text.split("\n").slice(-6)).toEqual([
      "results:",
      "  ok        step-01  lookup  12 ms",
      "  failed    step-02  chat_respond  0 ms  http.status: the target answered 500",
      "  skipped   step-09  chat_respond",
      "  cancelled step-10  chat_respond",
      "  pending   step-11  chat_respond",
    ]);
  });
});
