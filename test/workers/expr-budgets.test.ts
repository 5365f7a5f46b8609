import { describe, it } from "vitest";
import { api, uniqueId, singleTaskWorkflow, runWorkflow } from "./helpers.ts";

/** A step of a `context` action that stores `expr` (CEL over the action input) at `v`. */
const contextStep = (expr: string, input: Record<string, unknown> = {}) => ({
  ref: "compute",
  action: { kind: "context", implementation: { updates: [{ path: "v", expr }] } },
  input_mapping: input,
  output_mapping: { "output.v": "$.v" },
});

describe("expression budgets in runs and registration", () => {
  it("does not retry a spent budget even when the step says on_failure: retry and the node has a retry policy", async ({
    expect,
  }) => {
    const items = Array.from({ length: 1_000 }, (_, i) => i);
    const workflow = singleTaskWorkflow(uniqueId("noretry"), [
      { ...contextStep("input.l.map(x, input.l.map(y, x * y))", { l: "$.input.items" }), on_failure: "retry" },
    ]);
    const main = (workflow.nodes as Record<string, Record<string, unknown>>).main as Record<string, unknown>;
    main.retry = { max_attempts: 3, initial_delay_ms: 10 };
    const failed = await runWorkflow(workflow, { items });
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({ code: "expr.budget_exceeded" });
    expect(failed.nodes.main.attempts).toBe(1);
  });

  it("fails the step with expr.budget_exceeded, not retryable, when CEL spends its budget on run input", async ({
    expect,
  }) => {
    const items = Array.from({ length: 1_000 }, (_, i) => i);
    const workflow = singleTaskWorkflow(uniqueId("celbudget"), [
      contextStep("input.l.map(x, input.l.map(y, x * y))", { l: "$.input.items" }),
    ]);
    const failed = await runWorkflow(workflow, { items });
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({ code: "expr.budget_exceeded", retryable: false });
  });

  it("fails the step with expr.budget_exceeded when a JSONPath regex taken from run input spends its steps", async ({
    expect,
  }) => {
    const text = "ab".repeat(10_000);
    const workflow = singleTaskWorkflow(uniqueId("rebudget"), [
      contextStep("input.hits", { hits: "$.input.texts[?search(@, $.input.re)]" }),
    ]);
    const failed = await runWorkflow(workflow, {
      re: "[ab]*a[ab]{250}[cd]",
      texts: Array.from({ length: 5 }, () => text),
    });
    expect(failed.status).toBe("failed");
    // The budget's code passes through the mapping layer, which adds where it happened.
    expect(failed.error).toMatchObject({ code: "expr.budget_exceeded", retryable: false });
    expect(failed.error.message).toContain("input_mapping.hits");
    expect(failed.error.message).toMatch(/JSONPath selection exceeded its budget of 10000000 steps/);
  });

  it("keeps code points whole: a CEL substring of an emoji is the emoji, and the run completes", async ({ expect }) => {
    const workflow = singleTaskWorkflow(uniqueId("emoji"), [
      contextStep("input.s.substring(0, 1) + '|' + string(input.s.indexOf('smile'))", { s: "$.input.s" }),
    ]);
    const done = await runWorkflow(workflow, { s: "😀 smile" });
    expect(done.status, JSON.stringify(done.error)).toBe("completed");
    expect(done.output.result.v).toBe("😀|2");
  });

  it("refuses at registration a regex literal that is not I-Regexp and a template nested deeper than 64", async ({
    expect,
  }) => {
    const deep = `${"{{#if a}}".repeat(4_000)}x${"{{/if}}".repeat(4_000)}`;
    const workflow = {
      id: uniqueId("refused"),
      nodes: {
        main: {
          task: { steps: [contextStep("1")] },
          input_mapping: { a: "$.items[?match(@, 'a\\\\d')]", b: { template: deep } },
        },
      },
    };
    const { status, json } = await api("POST", "/v1/definitions", { workflows: [workflow] });
    expect(status).toBe(400);
    const byPath = Object.fromEntries(
      (json.error.details as { path: string; code: string; message: string }[]).map((d) => [d.path, d]),
    );
    expect(byPath["workflows.0.nodes.main.input_mapping.a"]).toMatchObject({ code: "definition.invalid_jsonpath" });
    expect(byPath["workflows.0.nodes.main.input_mapping.a"]?.message).toMatch(/not a valid I-Regexp/);
    expect(byPath["workflows.0.nodes.main.input_mapping.b.template"]).toMatchObject({
      code: "definition.template_too_deep",
    });
    expect(byPath["workflows.0.nodes.main.input_mapping.b.template"]?.message).toMatch(/nests deeper than 64/);
  });
});
