import { describe, it } from "vitest";
import { z } from "zod";
import { EngineError } from "../../lib/errors.ts";
import { applyOutputMapping, buildInput, MAX_CONCAT_CHARS } from "../../lib/expr/mapping.ts";
import { JsonValue, type Json } from "../../schemas/index.ts";
import { api, detailsOf, httpStep, httpTarget, register, resultsOf, thrown, uniqueId, waitForRun } from "./helpers.ts";

/**
 * References embedded in longer strings, in both plan notations
 * (docs/plans.md "References"): the arg becomes a string with each reference
 * replaced by its value, arrays joined with ",".
 */

/** `echo` (POST /echo, the input as body) and `search` (GET /echo?q=…&ids=…: the args reach the target as its query). */
async function registerActions(): Promise<{ echo: string; search: string }> {
  const ids = { echo: uniqueId("echo"), search: uniqueId("search") };
  await register({
    actions: [
      {
        id: ids.echo,
        kind: "http",
        implementation: { method: "POST", url_template: `${httpTarget()}/echo`, body_template: "{{json this}}" },
      },
      {
        id: ids.search,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/echo?q={{q}}&label={{label}}` },
        requires: { type: "object", required: ["q", "label"], properties: { q: { type: "string" } } },
      },
    ],
  });
  return ids;
}

async function runPlan(body: Record<string, unknown>): Promise<{ status: string; results: unknown }> {
  const response = await api("POST", "/v1/plans", body);
  if (response.status !== 201) {
    throw new Error(JSON.stringify(response.json));
  }
  return waitForRun(String(response.json.run_id));
}

/** What the echo target received: the body of a POST, the query of a GET. */
const Echoed = z.object({ body: JsonValue, query: z.record(z.string(), JsonValue) });
const echoed = (data: unknown) => Echoed.parse(data);

const FACILITIES = [
  { id: "F1", name: "Berlin Plant" },
  { id: "F2", name: "Munich Center" },
  { id: "F3", name: "Hamburg Port" },
];

describe("references embedded in text: dependency notation", () => {
  it("replaces each reference, joins a * wildcard with commas into a URL query parameter", async ({ expect }) => {
    const { echo, search } = await registerActions();
    const plan = {
      steps: [
        { tool: echo, params: { facilities: FACILITIES, count: 3, open: true } },
        {
          tool: search,
          params: {
            q: "facility_id in (${step[0].data.body.facilities.*.id})",
            label: "${ step[0].data.body.count } open=${step[0].data.body.open}",
          },
          depends_on: [0],
        },
        {
          tool: echo,
          params: {
            title: "Shipments of ${step[0].data.body.facilities[0].name}",
            // A whole reference keeps the value's type.
            ids: "${step[0].data.body.facilities.*.id}",
            price: "$5 for ${step[0].data.body.facilities[1].id}",
          },
          depends_on: [0],
        },
      ],
    };
    const run = await runPlan({ plan, tools: [echo, search] });
    const results = resultsOf(run);
    expect(results.map((result) => result.success)).toEqual([true, true, true]);
    expect(echoed(results[1]?.data).query).toEqual({ q: "facility_id in (F1,F2,F3)", label: "3 open=true" });
    expect(echoed(results[2]?.data).body).toEqual({
      title: "Shipments of Berlin Plant",
      ids: ["F1", "F2", "F3"],
      price: "$5 for F2",
    });
  });

  it("fails the step with mapping.not_text when text references an object", async ({ expect }) => {
    const { echo } = await registerActions();
    const plan = {
      steps: [
        { tool: echo, params: { facilities: FACILITIES } },
        { tool: echo, params: { title: "About ${step[0].data.body.facilities[0]}" }, depends_on: [0] },
      ],
    };
    const results = resultsOf(await runPlan({ plan, tools: [echo] }));
    expect(results[1]).toMatchObject({ success: false, error: { code: "mapping.not_text" } });
    expect(results[1]?.error?.message).toContain("is an object");
  });

  it("refuses, with 400, text referencing a step that is not a dependency", async ({ expect }) => {
    const { echo } = await registerActions();
    const { status, json } = await api("POST", "/v1/plans", {
      plan: {
        steps: [
          { tool: echo, params: { a: 1 } },
          { tool: echo, params: { title: "Report for ${step[0].data.body.a}" } },
        ],
      },
      tools: [echo],
    });
    expect(status).toBe(400);
    expect(json.error.code).toBe("plan.invalid");
    expect(json.error.details).toMatchObject([{ path: "plan.steps.1.params.title", code: "plan.invalid_reference" }]);
  });

  it("refuses, with 400, a reference inside an object arg and a ${step[…]} written wrong", async ({ expect }) => {
    const { echo } = await registerActions();
    const { status, json } = await api("POST", "/v1/plans", {
      plan: {
        steps: [
          { tool: echo, params: { a: 1 } },
          {
            tool: echo,
            params: { filter: { id: "${step[0].data.body.a}" }, title: "x ${step[0].body.a}" },
            depends_on: [0],
          },
        ],
      },
      tools: [echo],
    });
    expect(status).toBe(400);
    expect(detailsOf(json).map((detail) => detail.path)).toEqual([
      "plan.steps.1.params.filter",
      "plan.steps.1.params.title",
    ]);
    expect(json.error.details.every((detail: { code: string }) => detail.code === "plan.unsupported_reference")).toBe(
      true,
    );
  });
});

describe("references embedded in text: placeholder notation", () => {
  it("replaces placeholders in text, substitutes the item of a [*] expansion, joins an array", async ({ expect }) => {
    const { echo } = await registerActions();
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { id: 1, name: "north", items: [{ id: 7 }, { id: 8 }], tags: ["a", "b"] } },
        { id: "step-02", tool: echo, args: { ref: "id-$step-01.body.id", tags: "tags: $step-01.body.tags; $HOME" } },
        { id: "step-03", tool: echo, args: { label: "item $step-01.body.items[*].id of $step-01.body.name" } },
      ],
    };
    const run = await runPlan({ plan, tools: [echo] });
    const results = resultsOf(run);
    expect(run.status).toBe("completed");
    expect(echoed(results[1]?.data).body).toEqual({ ref: "id-1", tags: "tags: a,b; $HOME" });
    const children = z.array(Echoed).parse(results[2]?.data);
    expect(children.map((child) => child.body)).toEqual([{ label: "item 7 of north" }, { label: "item 8 of north" }]);
    // Two children, one call each: no retries (the node's attempts count one per child).
    expect(results[2]?.metadata.retries).toBe(0);
  });

  it("routes to the fallback when a placeholder in text does not resolve", async ({ expect }) => {
    const { echo } = await registerActions();
    const plan = {
      steps: [
        { id: "step-01", tool: echo, args: { a: 1 } },
        { id: "step-02", tool: echo, args: { x: "value: $step-01.body.missing!" } },
        { id: "step-99", tool: echo, args: { apology: "could not finish" } },
      ],
      fallback: "step-99",
    };
    const run = await runPlan({ plan, tools: [echo] });
    const results = resultsOf(run);
    expect(run.status).toBe("completed");
    expect(results[1]).toMatchObject({ success: false, error: { code: "plan.args_unresolved" } });
    expect(results[1]?.error?.message).toContain("concat.1: $.state['step-01']['body']['missing'] selects nothing");
    expect(echoed(results[2]?.data).body).toEqual({ apology: "could not finish" });
  });

  it("shows the template in a preview as a concat of text and paths", async ({ expect }) => {
    const { echo } = await registerActions();
    const { status, json } = await api("POST", "/v1/plans", {
      plan: {
        steps: [
          { id: "step-01", tool: echo, args: { a: 1 } },
          { id: "step-02", tool: echo, args: { x: "$5 and $step-01.body.a" } },
        ],
      },
      tools: [echo],
      mode: "preview",
    });
    expect(status).toBe(200);
    expect(json.graph.steps[1].args).toEqual({
      x: { concat: [{ expr: '"$5 and "' }, "$.state['step-01']['body']['a']"] },
    });
  });
});

describe("concat mapping source", () => {
  const doc: Record<string, Json> = { input: { n: 2.5, flag: false, list: ["x", 1, true], none: null, deep: [[1]] } };

  it("builds text from strings, numbers, booleans and arrays of those", ({ expect }) => {
    const input = buildInput({ s: { concat: ["n=", "$.input.n", " ", "$.input.flag", " ", "$.input.list"] } }, doc);
    expect(input).toEqual({ s: "n=2.5 false x,1,true" });
  });

  it("in an output mapping, writes the text; a bare part that selects nothing fails, an optional one adds nothing", ({
    expect,
  }) => {
    const target = { state: {}, output: {} };
    const output = { id: 7, tags: ["a", "b"] };
    const written = applyOutputMapping(
      {
        "state.line": { concat: ["$.id", ": ", "$.tags"] },
        "state.short": { concat: ["$.id", { path: "$.missing", optional: true }] },
      },
      output,
      target,
    );
    expect(written.state).toEqual({ line: "7: a,b", short: "7" });
    const missing = thrown(() =>
      applyOutputMapping({ "state.gone": { concat: ["$.id", "$.missing"] } }, output, target),
    );
    expect(missing instanceof EngineError && missing.code).toBe("mapping.unresolved");
  });

  it("refuses null and nested arrays, and text past its size limit", ({ expect }) => {
    const codeOf = (error: unknown) => (error instanceof EngineError ? error.code : "not an EngineError");
    expect(codeOf(thrown(() => buildInput({ s: { concat: ["$.input.none"] } }, doc)))).toBe("mapping.not_text");
    expect(codeOf(thrown(() => buildInput({ s: { concat: ["$.input.deep"] } }, doc)))).toBe("mapping.not_text");
    const big = { input: { text: "x".repeat(MAX_CONCAT_CHARS) } };
    expect(codeOf(thrown(() => buildInput({ s: { concat: ["$.input.text", "y"] } }, big)))).toBe("mapping.too_large");
  });

  it("is checked at registration: a bad path inside a concat is refused with its path", async ({ expect }) => {
    const id = uniqueId("concat");
    const { status, json } = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id,
          nodes: {
            main: {
              task: { steps: [httpStep("a", `${httpTarget()}/echo`)] },
              input_mapping: { s: { concat: ["a", "$.input[?"] } },
            },
          },
        },
      ],
    });
    expect(status).toBe(400);
    expect(detailsOf(json).map((detail) => detail.path)).toContain("workflows.0.nodes.main.input_mapping.s.concat.1");
  });
});
