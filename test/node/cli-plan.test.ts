import { describe, it } from "vitest";
import { CliError } from "../../cli/api.ts";
import { graphText, planRequest } from "../../cli/plan.ts";
import type { PlanGraph } from "../../schemas/index.ts";

/** `trellis plan` without a server: how it builds the request, and how a preview reads (docs/cli.md). */

const steps = [{ tool: "lookup", params: { id: "ada" } }];

describe("trellis plan", () => {
  it("wraps a plan alone in a request, with the flags", ({ expect }) => {
    expect(planRequest({ steps }, { tools: "lookup, notify", mode: "preview", input: '{"a": 1}' }, "p.json")).toEqual({
      plan: { steps },
      tools: ["lookup", "notify"],
      mode: "preview",
      input: { a: 1 },
    });
  });

  it("takes a file with a plan key as the request, the flags replacing its fields", ({ expect }) => {
    const file = { plan: { steps }, tools: ["lookup"], mode: "auto", approved_steps: ["step-0"] };
    expect(planRequest(file, { approveSteps: "step-1,step-2" }, "p.yaml")).toEqual({
      ...file,
      approved_steps: ["step-1", "step-2"],
    });
  });

  it("asks for --tools when the file has none", ({ expect }) => {
    const thrown = (() => {
      try {
        planRequest({ steps }, {}, "p.json");
      } catch (error) {
        return error;
      }
      return undefined;
    })();
    expect(thrown).toBeInstanceOf(CliError);
    expect(thrown instanceof CliError ? [thrown.code, thrown.message] : []).toEqual([
      "cli.missing_tools",
      "p.json has no \"tools\": give the plan's allowlist with --tools a,b (every step's tool must be on it)",
    ]);
  });

  it("prints a preview's layers, steps, args and high-risk steps", ({ expect }) => {
    const graph: PlanGraph = {
      notation: "placeholder",
      layers: [["step-01"], ["step-02"]],
      steps: [
        { id: "step-01", tool: "lookup", depends_on: [], risk: "low", expands_over: null, args: { id: "ada" } },
        {
          id: "step-02",
          tool: "notify",
          depends_on: ["step-01"],
          risk: "high",
          expands_over: "$.state['step-01']['repos'][*]",
          args: { text: { concat: ["repo ", "$.item"] } },
        },
      ],
      expansions: [{ step: "step-02", over: "$.state['step-01']['repos'][*]", implicit: false }],
      high_risk: ["step-02"],
      inputs_gate: false,
      fallback: null,
      config: { maxParallelExecutions: 5, toolTimeout: 30000, maxRetries: 3, retryDelay: 1000, failFast: false },
      approvals: { preapproval_allowed: false, approved_steps: [] },
    };
    expect(graphText(graph)).toBe(
      [
        "preview: placeholder plan, 2 step(s) in 2 layer(s)",
        "  layer 1: step-01",
        "  layer 2: step-02",
        "  step-01  lookup  risk low",
        '      id ← "ada"',
        "  step-02  notify  risk high  after step-01  once per item of $.state['step-01']['repos'][*]",
        '      text ← {"concat":["repo ","$.item"]}',
        "high-risk: step-02",
        "  approved ahead: none",
        "  will wait for approval: step-02",
        "config: 5 parallel, 30000 ms per call, 3 retries after 1000 ms, failFast false",
      ].join("\n"),
    );
  });
});
