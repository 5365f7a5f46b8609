import { describe, it } from "vitest";
import { api, uniqueId } from "./helpers.ts";

/** Bad plans are 4xx with a dotted code (and paths where there is a path), never a 500. */
describe("bad plans", () => {
  const missing = uniqueId("nope");
  it.for([
    ["no body fields", {}],
    ["no steps", { plan: {}, tools: [] }],
    ["steps not a list", { plan: { steps: "x" }, tools: [] }],
    ["an empty tool", { plan: { steps: [{ tool: "" }] }, tools: [] }],
    ["an unknown kind of tool", { plan: { steps: [{ tool: "Not A Tool!" }] }, tools: ["Not A Tool!"] }],
    ["an unregistered action", { plan: { steps: [{ tool: missing }] }, tools: [missing] }],
    ["an unknown standard tool", { plan: { steps: [{ tool: "tool:no_such_tool" }] }, tools: ["tool:no_such_tool"] }],
    ["an unregistered MCP server", { plan: { steps: [{ tool: `mcp:${missing}/echo` }] }, tools: [`mcp:${missing}/*`] }],
    [
      "a fallback that is no step",
      { plan: { steps: [{ id: "step-01", tool: "x" }], fallback: "step-02" }, tools: ["x"] },
    ],
    ["a reserved step id", { plan: { steps: [{ id: "inputs", tool: "x" }] }, tools: ["x"] }],
    [
      "a reference inside a string",
      {
        plan: { steps: [{ tool: "x" }, { tool: "x", params: { q: "id=${step[0].data.id}" }, depends_on: [0] }] },
        tools: ["x"],
      },
    ],
    [
      "two lists to expand",
      {
        plan: {
          steps: [
            { id: "a", tool: "x" },
            { id: "b", tool: "x", args: { p: "$a.l[*]", q: "$a.m[*]" } },
          ],
        },
        tools: ["x"],
      },
    ],
    [
      "input against its schema",
      {
        plan: { inputs: { type: "object", properties: { n: { type: "integer" } } }, steps: [{ tool: "x" }] },
        tools: ["x"],
        input: { n: "many" },
      },
    ],
    ["a reserved arg name", { plan: { steps: [{ tool: "x", params: { constructor: 1 } }] }, tools: ["x"] }],
    ["a reserved step id as a target", { plan: { steps: [{ id: "prototype", tool: "x" }] }, tools: ["x"] }],
    ["an unknown mode", { plan: { steps: [{ tool: "x" }] }, tools: ["x"], mode: "sometimes" }],
  ])("refuses %s", async ([, body], { expect }) => {
    const { status, json } = await api("POST", "/v1/plans", body);
    expect(status).toBeGreaterThanOrEqual(400);
    expect(status).toBeLessThan(500);
    expect(json.error.code).toMatch(/^[a-z_]+\.[a-z_]+$/);
  });

  it("names the step whose tool the catalog cannot resolve", async ({ expect }) => {
    const { status, json } = await api("POST", "/v1/plans", {
      plan: { steps: [{ tool: "tool:list_artifacts" }, { tool: `mcp:${missing}/echo` }] },
      tools: ["tool:list_artifacts", `mcp:${missing}/echo`],
    });
    expect(status).toBe(400);
    expect(json.error.details).toEqual([
      expect.objectContaining({ path: "plan.steps.1.tool", code: "definition.unknown_reference" }),
    ]);
  });
});
