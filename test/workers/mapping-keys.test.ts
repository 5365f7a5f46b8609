import { describe, it } from "vitest";
import { buildInput, setTargetPath } from "../../lib/expr/mapping.ts";
import { api, uniqueId } from "./helpers.ts";
import { catalogStub } from "./durable-helpers.ts";

/** A one-node workflow whose node maps `mapping` into its task's input, written as JSON text so `__proto__` stays a plain key. */
function workflowWith(id: string, mappingJson: string, outputMappingJson = "{}"): unknown {
  const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
  return JSON.parse(
    `{ "workflows": [{ "id": "${id}", "nodes": { "main": { "task": { "steps": [${JSON.stringify(step)}] }, "input_mapping": ${mappingJson}, "output_mapping": ${outputMappingJson} } } }] }`,
  );
}

describe("reserved keys in mappings", () => {
  for (const key of ["__proto__", "constructor", "prototype"]) {
    it(`refuses "${key}" as an input_mapping field and as a target path segment, naming the path`, async ({
      expect,
    }) => {
      const response = await api(
        "POST",
        "/v1/definitions",
        workflowWith(uniqueId("proto"), `{ "${key}": "$.input" }`, `{ "state.${key}.x": "$.x" }`),
      );
      expect(response.status).toBe(400);
      const details = response.json.error.details as { path: string; message: string }[];
      const paths = details.map((detail) => detail.path);
      expect(paths, JSON.stringify(details)).toContain(`workflows.0.nodes.main.input_mapping.${key}`);
      if (key !== "__proto__") {
        // The API refuses a "__proto__" key anywhere in a body at once, naming the first it meets.
        expect(paths, JSON.stringify(details)).toContain(`workflows.0.nodes.main.output_mapping.state.${key}.x`);
      }
      expect(details.map((detail) => detail.message).join(" ")).toMatch(/reserved/);
    });
  }

  it("refuses a __proto__ mapping field that reaches the catalog without passing the HTTP API", async ({ expect }) => {
    const body = workflowWith(uniqueId("rpc"), '{ "__proto__": "$.input" }', '{ "state.__proto__.x": "$.x" }');
    const result = await catalogStub().register(body);
    expect(result.ok).toBe(false);
    const details = (result as { ok: false; error: { details?: { path: string }[] } }).error.details ?? [];
    expect(details.map((detail) => detail.path).sort()).toEqual([
      "workflows.0.nodes.main.input_mapping.__proto__",
      "workflows.0.nodes.main.output_mapping.state.__proto__.x",
    ]);
  });

  it("writes a __proto__ field of a stored mapping as plain data, leaving the prototype alone", ({ expect }) => {
    const mapping = JSON.parse('{ "__proto__": { "polluted": true }, "a": 1 }') as Record<string, unknown>;
    const input = buildInput(mapping, { input: {} });
    expect(Object.getPrototypeOf(input)).toBe(Object.prototype);
    expect((input as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(input)).toBe('{"__proto__":{"polluted":true},"a":1}');
    const written = setTargetPath({ state: {}, output: {} }, "state.__proto__.polluted", true);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(JSON.stringify(written.state)).toBe('{"__proto__":{"polluted":true}}');
  });
});
