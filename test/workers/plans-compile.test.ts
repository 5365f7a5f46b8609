import { describe, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import { checkGraph, compilePlan, detectNotation, normalizePlan } from "../../plans/index.ts";
import { parseDependencyArg, parsePlaceholderArg, toJsonPath } from "../../plans/refs.ts";
import type { Json } from "../../schemas/index.ts";

/** The plan compiler as pure functions: references, notation detection, graph checks, the workflow it builds. */

function compiledPath(value: string): string | undefined {
  const arg = parseDependencyArg(value);
  if (arg.kind !== "ref" || arg.ref.source.kind !== "step") {
    return undefined;
  }
  return toJsonPath(`$.state['step-${String(arg.ref.source.step)}']`, arg.ref.segments);
}

function problemsOf(plan: Record<string, Json>): { code: string; details: unknown } {
  try {
    checkGraph(normalizePlan(plan));
  } catch (error) {
    if (error instanceof EngineError) {
      return { code: error.code, details: error.details };
    }
    throw error;
  }
  return { code: "none", details: [] };
}

describe("plan references", () => {
  it.for([
    ["${step[0].data}", "$.state['step-0']"],
    ["${step[0].data.field}", "$.state['step-0']['field']"],
    ["${step[2].data[0].id}", "$.state['step-2'][0]['id']"],
    ["${step[0].data[0].facility.location.city}", "$.state['step-0'][0]['facility']['location']['city']"],
    ["${step[1].data.*.id}", "$.state['step-1'][*]['id']"],
    ["${step[0].data.*.facility.id}", "$.state['step-0'][*]['facility']['id']"],
  ])("compiles %s to %s", ([reference = "", path], { expect }) => {
    expect(compiledPath(reference)).toBe(path);
  });

  it("tells literals, whole references, text with references and refused ones apart", ({ expect }) => {
    expect(parseDependencyArg("plain")).toEqual({ kind: "literal", value: "plain" });
    expect(parseDependencyArg(5)).toEqual({ kind: "literal", value: 5 });
    expect(parseDependencyArg("id=${step[0].data.id}!")).toEqual({
      kind: "template",
      parts: [
        { kind: "text", text: "id=" },
        { kind: "ref", ref: { source: { kind: "step", step: 0 }, segments: [{ kind: "name", name: "id" }] } },
        { kind: "text", text: "!" },
      ],
    });
    expect(parseDependencyArg({ nested: "${step[0].data.id}" }).kind).toBe("unsupported");
    expect(parseDependencyArg("id=${step[0].id}").kind).toBe("unsupported");
    const isStep = (id: string) => id === "step-01";
    expect(parsePlaceholderArg("$5.00", isStep)).toEqual({ kind: "literal", value: "$5.00" });
    expect(parsePlaceholderArg("$step-01.items[*].id", isStep)).toEqual({
      kind: "ref",
      ref: {
        source: { kind: "step", step: "step-01" },
        segments: [{ kind: "name", name: "items" }, { kind: "wildcard" }, { kind: "name", name: "id" }],
      },
    });
    expect(parsePlaceholderArg("$5 for $step-01.price", isStep)).toMatchObject({
      kind: "template",
      parts: [
        { kind: "text", text: "$5 for " },
        { kind: "ref", ref: { source: { kind: "step", step: "step-01" } } },
      ],
    });
    expect(parsePlaceholderArg("$input.user", isStep)).toMatchObject({
      kind: "ref",
      ref: { source: { kind: "input" } },
    });
  });

  it("detects the notation from the steps' shape", ({ expect }) => {
    expect(detectNotation({ steps: [{ tool: "a", params: {} }] })).toBe("dependency");
    expect(detectNotation({ steps: [{ id: "step-01", tool: "a" }] })).toBe("placeholder");
    expect(detectNotation({ steps: [{ tool: "a", args: {} }] })).toBe("placeholder");
  });
});

describe("plan graphs", () => {
  it("names every step of a cycle, a self-dependency included", ({ expect }) => {
    const cycle = problemsOf({
      steps: [
        { tool: "a", depends_on: [2] },
        { tool: "a", depends_on: [0] },
        { tool: "a", depends_on: [1] },
      ],
    });
    expect(cycle.code).toBe("plan.invalid");
    expect(JSON.stringify(cycle.details)).toMatch(/circular dependency: step-\d → step-\d → step-\d → step-\d/);
    const self = problemsOf({ steps: [{ id: "step-01", tool: "a", args: { x: "$step-01.x" } }] });
    expect(self.details).toEqual([expect.objectContaining({ code: "plan.cycle", path: "plan.steps.0.depends_on" })]);
  });

  it("refuses unknown steps, out-of-range positions and duplicate ids with their paths", ({ expect }) => {
    expect(problemsOf({ steps: [{ tool: "a", depends_on: [3] }] }).details).toEqual([
      expect.objectContaining({ path: "plan.steps.0.depends_on", code: "plan.invalid_reference" }),
    ]);
    expect(problemsOf({ steps: [{ id: "step-01", tool: "a", args: { x: "$step-07.x" } }] }).details).toEqual([
      expect.objectContaining({ path: "plan.steps.0.args", code: "plan.invalid_reference" }),
    ]);
    const duplicate = problemsOf({
      steps: [
        { id: "step-01", tool: "a" },
        { id: "step-01", tool: "a" },
      ],
    });
    expect(duplicate.details).toEqual([
      expect.objectContaining({ path: "plan.steps.1.id", code: "plan.invalid_step_id" }),
    ]);
  });

  it("accepts a reference to an indirect dependency", ({ expect }) => {
    const plan: Record<string, Json> = {
      steps: [
        { tool: "a", params: {} },
        { tool: "a", params: {}, depends_on: [0] },
        { tool: "a", params: { x: "${step[0].data.id}" }, depends_on: [1] },
      ],
    };
    expect(problemsOf(plan).code).toBe("none");
  });
});

describe("compiled workflows", () => {
  it("maps the notation's config onto max_parallel, timeouts, retries and on_failure", ({ expect }) => {
    const plan = normalizePlan({
      steps: [{ tool: "tool:list_artifacts", params: { prefix: "$literal" } }],
      config: { maxParallelExecutions: 7, toolTimeout: 5000, maxRetries: 2, retryDelay: 250, failFast: true },
    });
    const { workflow } = compilePlan(plan, ["tool:list_artifacts"], {});
    expect(workflow).toMatchObject({ id: "plan", max_parallel: 7, fail_fast: true, tools: ["tool:list_artifacts"] });
    expect(workflow.nodes["step-0"]).toMatchObject({
      // Three calls of 5 s and the delays between them (250 + 500 ms), plus 5 s for the task.
      timeout_ms: 3 * 5000 + 750 + 5000,
      on_failure: "fail",
      // A literal starting with `$` stays a literal: a CEL string, not a JSONPath.
      input_mapping: { prefix: { expr: '"$literal"' } },
      task: {
        steps: [
          {
            action: {
              kind: "tool",
              implementation: { tool: "list_artifacts" },
              execution: {
                timeout_ms: 5000,
                retry_policy: { max_attempts: 3, initial_delay_ms: 250, backoff_coefficient: 2, jitter: false },
              },
            },
          },
        ],
      },
    });
  });

  it("defaults to the dependency notation's config: 5 parallel, 30 s, 3 retries, 1 s, go on past failures", ({
    expect,
  }) => {
    const { workflow } = compilePlan(normalizePlan({ steps: [{ tool: "x" }] }), ["x"], {});
    expect(workflow.max_parallel).toBe(5);
    expect(workflow.nodes["step-0"]).toMatchObject({ timeout_ms: 4 * 30_000 + 7000 + 5000, on_failure: "continue" });
    expect(workflow.nodes["step-0"]?.task).toEqual({
      steps: [{ ref: "call", action: "x", output_mapping: { "output.data": "$" } }],
    });
  });

  it("reads one child of an expanded step by its id, and fans out over the others", ({ expect }) => {
    const plan = normalizePlan({
      steps: [
        { id: "step-01", tool: "x", args: {} },
        { id: "step-02", tool: "x", args: { id: "$step-01.items[*].id" } },
        { id: "step-03", tool: "x", args: { first: "$step-02-1.name" } },
        { id: "step-04", tool: "x", args: { each: "$step-02.name" } },
      ],
    });
    checkGraph(plan);
    const { workflow, expansions } = compilePlan(plan, ["x"], {});
    expect(workflow.nodes["step-03"]).toMatchObject({
      depends_on: ["step-02"],
      input_mapping: { first: "$.state['step-02'][1]['name']" },
    });
    expect(workflow.nodes["step-03"]?.foreach).toBeUndefined();
    expect(workflow.nodes["step-04"]).toMatchObject({
      foreach: { items: "$.state['step-02'][*]" },
      input_mapping: { each: "$.item['name']" },
    });
    expect(expansions.map((expansion) => [expansion.step, expansion.implicit])).toEqual([
      ["step-02", false],
      ["step-04", true],
    ]);
  });
});
