import { describe, it } from "vitest";
import { compileCel } from "../../lib/expr/cel.ts";
import { api, uniqueId } from "./helpers.ts";

/**
 * References that cannot fail silently: a CEL expression that reads a
 * variable its context does not bind (`inputs.flag` where `input` is meant)
 * is refused at registration, naming the variable and the ones that are bound.
 */

interface Detail {
  path: string;
  message: string;
  code?: string;
}

async function register(bundle: Record<string, unknown>): Promise<{ status: number; details: Detail[] }> {
  const response = await api("POST", "/v1/definitions", bundle);
  return { status: response.status, details: response.json.error?.details ?? [] };
}

const contextStep = (expr: string) => ({
  ref: "set",
  action: { kind: "context", implementation: { updates: [{ path: "x", expr }] } },
});

/** A workflow of one node whose task runs one `context` step. */
const workflow = (node: Record<string, unknown>, step = contextStep("1")) => ({
  workflows: [{ id: uniqueId("wf"), nodes: { a: { task: { steps: [step] }, ...node } } }],
});

describe("the variables a CEL expression reads", () => {
  it.for([
    ["input.items.all(x, x > 0) && input.items.exists(y, y == 2)", ["input"]],
    ["[1, 2].all(x, [x].exists(y, y == x))", []],
    ["[1, 2].map(n, n * state.factor)", ["state"]],
    ["type(input.x) == int && strings.quote(output.s) != ''", ["input", "output"]],
    ["has(item.name) ? item.name : index", ["item", "index"]],
    ["inputs.flag || input.flag", ["inputs", "input"]],
  ] as const)("%s reads %j", ([source, variables], { expect }) => {
    const compiled = compileCel(source);
    expect(compiled.ok).toBe(true);
    expect(compiled.ok && [...compiled.program.variables].sort()).toEqual([...variables].sort());
  });
});

describe("registration refuses CEL that reads an unbound variable", () => {
  it("names the variable and the bound ones, at the expression's path", async ({ expect }) => {
    const { status, details } = await register(workflow({ when: "inputs.flag == true" }));
    expect(status).toBe(400);
    expect(details).toEqual([
      {
        path: "workflows.0.nodes.a.when",
        code: "definition.invalid_cel",
        message:
          'CEL reads the variable "inputs", which is not bound here; the variables here are input, state, output',
      },
    ]);
  });

  it.for([
    ["a node's when outside a foreach reads item", { when: "item > 1" }, "workflows.0.nodes.a.when", "item"],
    [
      "a node's repeat.until reads item",
      { foreach: { items: "$.input.xs" }, repeat: { until: "item > 1", max_iterations: 2 } },
      "workflows.0.nodes.a.repeat.until",
      "item",
    ],
    [
      "a node's output_mapping reads input",
      { output_mapping: { "state.y": { expr: "input.x" } } },
      "workflows.0.nodes.a.output_mapping.state.y.expr",
      "input",
    ],
  ] as const)("%s", async ([, node, path, name], { expect }) => {
    const { status, details } = await register(workflow(node));
    expect(status).toBe(400);
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([[path, "definition.invalid_cel"]]);
    expect(details[0]?.message).toContain(`"${name}"`);
  });

  it("checks a step's condition and mappings against the task context, and a context action against its input", async ({
    expect,
  }) => {
    const step = {
      ...contextStep("state.x + 1"),
      condition: { if: "run.ok" },
      input_mapping: { x: { expr: "item" } },
      output_mapping: { "state.y": { expr: "state.z" } },
    };
    const { status, details } = await register(workflow({}, step));
    expect(status).toBe(400);
    const at = "workflows.0.nodes.a.task.steps.0";
    expect(details.map((detail) => [detail.path, detail.message.split('"')[1]])).toEqual([
      [`${at}.action.implementation.updates.0.expr`, "state"],
      [`${at}.condition.if`, "run"],
      [`${at}.input_mapping.x.expr`, "item"],
      [`${at}.output_mapping.state.y.expr`, "state"],
    ]);
  });

  it("accepts what each context binds: item and index in a foreach node, comprehension and type names", async ({
    expect,
  }) => {
    const { status } = await register(
      workflow({
        foreach: { items: "$.input.xs" },
        when: "index < 10 && item.all(v, v > 0) && type(item) == list",
        input_mapping: { first: { expr: "item[0]" } },
        output_mapping: { "state.y": { expr: "output.x" } },
      }),
    );
    expect(status).toBe(201);
  });
});
