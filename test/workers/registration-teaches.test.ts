import { describe, it } from "vitest";
import { api, uniqueId } from "./helpers.ts";

/**
 * Registration that teaches (docs/definitions.md, "What registration rejects"):
 * unknown fields get the field that was likely meant, schema and expression
 * problems come back in one answer, and a source that reads like a JSONPath
 * without its `$` is a warning in the 201.
 */

const contextStep = (ref: string, expr = "1") => ({
  ref,
  action: { kind: "context", implementation: { updates: [{ path: "x", expr }] } },
});

type Detail = { path: string; message: string; code: string };

async function problems(bundle: unknown): Promise<Detail[]> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 400) {
    throw new Error(`expected a 400, got ${response.status}: ${JSON.stringify(response.json)}`);
  }
  return response.json.error.details;
}

describe("registration that teaches", () => {
  it("names the field a typo meant, at every level", async ({ expect }) => {
    const details = await problems({
      workflows: [
        { id: uniqueId("wf"), nodez: { a: { task: { steps: [contextStep("s")] } } } },
        {
          id: uniqueId("wf"),
          nodes: { a: { task: { steps: [{ ...contextStep("s"), input_maping: {} }] }, dependson: [] } },
        },
      ],
    });
    const byPath = Object.fromEntries(details.map((detail) => [detail.path, detail.message]));
    expect(byPath["workflows.0"]).toContain('"nodez": did you mean "nodes"?');
    expect(byPath["workflows.1.nodes.a"]).toContain('"dependson": did you mean "depends_on"?');
    expect(byPath["workflows.1.nodes.a.task.steps.0"]).toContain('"input_maping": did you mean "input_mapping"?');
    // A field nothing is near gets no guess, but the fields that are known there.
    const far = await problems({
      workflows: [{ id: uniqueId("wf"), nodes: { a: { task: { steps: [contextStep("s")] } } }, zzzzzzzz: 1 }],
    });
    expect(far).toHaveLength(1);
    expect(far[0]?.message).not.toContain("did you mean");
    expect(far[0]?.message).toContain("Known fields here:");
    expect(far[0]?.message).toContain("max_parallel");
  });

  it("reports a typo'd field and a bad CEL expression of the same bundle in one answer", async ({ expect }) => {
    const details = await problems({
      workflows: [
        {
          id: uniqueId("wf"),
          descripton: "typo",
          nodes: { a: { task: { steps: [contextStep("s", "input.x +")] } } },
        },
      ],
    });
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([
      ["workflows.0", "schema.unrecognized_keys"],
      ["workflows.0.nodes.a.task.steps.0.action.implementation.updates.0.expr", "definition.invalid_cel"],
    ]);
  });

  it("registers a source that reads like a JSONPath without its $, and warns about it", async ({ expect }) => {
    const id = uniqueId("wf");
    const response = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id,
          nodes: {
            each: {
              foreach: { items: "$.input.list" },
              input_mapping: { value: "item", name: "input.name", greeting: "hello world", ok: "$.item" },
              task: { steps: [{ ...contextStep("s"), input_mapping: { from: "state.x", label: "item" } }] },
            },
          },
        },
      ],
    });
    expect(response.status).toBe(201);
    expect(response.json.warnings.map((warning: Detail) => [warning.path, warning.code])).toEqual([
      ["workflows.0.nodes.each.input_mapping.name", "mapping.looks_like_path"],
      ["workflows.0.nodes.each.input_mapping.value", "mapping.looks_like_path"],
      ["workflows.0.nodes.each.task.steps.0.input_mapping.from", "mapping.looks_like_path"],
    ]);
    expect(response.json.warnings[1].message).toContain('write "$.item" to read that value');
    // A clean bundle has no warnings field at all.
    const clean = await api("POST", "/v1/definitions", {
      workflows: [{ id: uniqueId("wf"), nodes: { a: { task: { steps: [contextStep("s")] } } } }],
    });
    expect(clean.json.warnings).toBeUndefined();
  });
});
