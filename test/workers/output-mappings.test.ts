import { describe, it } from "vitest";
import { applyOutputMapping } from "../../lib/expr/mapping.ts";
import { hits, httpTarget, register, runWorkflow, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Output mappings are as strict as input mappings: a `$` path that selects
 * nothing from the callee's output fails with `mapping.unresolved` (a typo
 * must not write nothing and surface in a later node), unless the source is
 * marked optional with `{ "path", "optional": true }` or `{ "path", "default" }`.
 */

const empty = () => ({ state: {}, output: {} });

/** A `context` action that sets `summary` (and `tokens`) in its output. */
const summarize = {
  kind: "context",
  implementation: {
    updates: [
      { path: "summary", expr: "'short'" },
      { path: "tokens", expr: "3" },
    ],
  },
};

describe("an output mapping whose $ path selects nothing", () => {
  it("fails with mapping.unresolved, naming the target, the path and the output's keys", ({ expect }) => {
    expect(() => applyOutputMapping({ "output.summary": "$.sumary" }, { summary: "s", tokens: 3 }, empty())).toThrow(
      expect.objectContaining({
        code: "mapping.unresolved",
        retryable: false,
        message: expect.stringContaining(
          "output_mapping.output.summary: $.sumary selects nothing (the output's top-level keys are summary, tokens)",
        ),
      }),
    );
  });

  it("names the keys where the selection stopped, or what stands there instead of an object", ({ expect }) => {
    const output = { body: { id: 7, name: "x" }, status: 200, text: "hi" };
    expect(() => applyOutputMapping({ "state.id": "$.body.ID" }, output, empty())).toThrow(
      expect.objectContaining({ message: expect.stringContaining("; $.body has id, name)") }),
    );
    expect(() => applyOutputMapping({ "state.id": "$.text.id" }, output, empty())).toThrow(
      expect.objectContaining({ message: expect.stringContaining("; $.text is a string)") }),
    );
    expect(() => applyOutputMapping({ "state.id": "$.id" }, "plain", empty())).toThrow(
      expect.objectContaining({ message: expect.stringContaining("(the output is a string)") }),
    );
  });

  it("fails a concat whose bare part selects nothing; an optional part adds nothing", ({ expect }) => {
    const output = { a: "x" };
    expect(() => applyOutputMapping({ "state.t": { concat: ["$.a", "$.b"] } }, output, empty())).toThrow(
      expect.objectContaining({ code: "mapping.unresolved", message: expect.stringContaining("concat.1: $.b") }),
    );
    const written = applyOutputMapping(
      { "state.t": { concat: ["$.a", { path: "$.b", optional: true }] } },
      output,
      empty(),
    );
    expect(written.state).toEqual({ t: "x" });
  });

  it("marked optional, leaves its target unwritten, or writes its default", ({ expect }) => {
    const written = applyOutputMapping(
      {
        "state.a": { path: "$.missing", optional: true },
        "state.b": { path: "$.missing", default: 0 },
        "state.c": { path: "$.x", default: 0 },
        "state.d": "$.x",
      },
      { x: 7 },
      empty(),
    );
    expect(written.state).toEqual({ b: 0, c: 7, d: 7 });
  });
});

describe("a step's output mapping that selects nothing", () => {
  it("fails the step, and the run error names the step, the target, the path and the keys", async ({ expect }) => {
    const step = { ref: "sum", action: summarize, output_mapping: { "output.summary": "$.sumary" } };
    const workflow = { id: uniqueId("wf"), nodes: { main: { task: { steps: [step] } } } };
    const run = await runWorkflow(workflow);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "mapping.unresolved", node: "main", step: "sum" });
    expect(run.error.message).toContain(
      "output_mapping.output.summary: $.sumary selects nothing (the output's top-level keys are summary, tokens)",
    );
  });

  it("follows the step's on_failure: continue records it in state._errors and goes on", async ({ expect }) => {
    const report = {
      ref: "report",
      action: { kind: "context", implementation: { updates: [{ path: "codes", expr: "input.codes" }] } },
      input_mapping: { codes: { expr: "state._errors.map(e, e.step + ' ' + e.error.code)" } },
      output_mapping: { "output.errors": "$.codes" },
    };
    const steps = [
      { ref: "sum", action: summarize, output_mapping: { "output.summary": "$.sumary" }, on_failure: "continue" },
      report,
    ];
    const workflow = {
      id: uniqueId("wf"),
      nodes: { main: { task: { steps }, output_mapping: { "output.errors": "$.errors" } } },
    };
    const run = await runWorkflow(workflow);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ errors: ["sum mapping.unresolved"] });
  });
});

describe("a node's output mapping that selects nothing", () => {
  it("fails the node, and the run error names the node, the target, the path and the keys", async ({ expect }) => {
    const step = { ref: "sum", action: summarize, output_mapping: { "output.summary": "$.summary" } };
    const node = { task: { steps: [step] }, output_mapping: { "output.summary": "$.sumary" } };
    const workflow = {
      id: uniqueId("wf"),
      nodes: { main: node, after: { task: { steps: [step] }, depends_on: ["main"] } },
    };
    const run = await runWorkflow(workflow);
    expect(run.status).toBe("failed");
    expect(run.nodes.main.status).toBe("failed");
    expect(run.nodes.after.status).toBe("cancelled");
    expect(run.error).toMatchObject({ code: "mapping.unresolved", node: "main" });
    expect(run.error.message).toContain(
      "output_mapping.output.summary: $.sumary selects nothing (the output's top-level keys are summary)",
    );
  });

  it("in a foreach, fails on the item whose path selects nothing, naming it", async ({ expect }) => {
    const run = await runWorkflow(
      { id: uniqueId("wf"), nodes: { fan: foreachNode({ "output.vs": "$.v" }) } },
      { items },
    );
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "mapping.unresolved", node: "fan" });
    expect(run.error.message).toContain(
      "output_mapping.output.vs (item 1): $.v selects nothing (the output's top-level keys are none)",
    );
  });

  it("in a foreach, marked optional, gives null (or the default) in that item's place; a skipped item is null", async ({
    expect,
  }) => {
    const mapping = { "output.vs": { path: "$.v", optional: true }, "output.ds": { path: "$.v", default: -1 } };
    const run = await runWorkflow({ id: uniqueId("wf"), nodes: { fan: foreachNode(mapping) } }, { items });
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ vs: [1, null, null, 3], ds: [1, -1, null, 3] });
  });
});

/** Items 0 and 3 write `v`; item 1's step is skipped (its task output is `{}`); item 2 is skipped by `when`. */
const items = [{ v: 1 }, { w: 2 }, { v: 0 }, { v: 3 }];

function foreachNode(outputMapping: Record<string, unknown>) {
  const step = {
    ref: "pick",
    action: { kind: "context", implementation: { updates: [{ path: "v", expr: "input.v" }] } },
    condition: { if: "has(input.v)", else: "skip" },
    output_mapping: { "output.v": "$.v" },
  };
  return {
    task: { steps: [step] },
    foreach: { items: "$.input.items" },
    when: "!has(item.v) || item.v != 0",
    output_mapping: outputMapping,
  };
}

describe("a step whose call completed but whose output mapping selects nothing", () => {
  it("fails, and its action's undo stays enqueued: the run's compensation undoes the call", async ({ expect }) => {
    const undoKey = uniqueId("undone");
    const remove = {
      id: uniqueId("remove"),
      kind: "http",
      implementation: { method: "GET", url_template: `${httpTarget()}/mark/${undoKey}` },
    };
    const make = {
      id: uniqueId("make"),
      kind: "http",
      implementation: { method: "GET", url_template: `${httpTarget()}/json?id=7` },
      undo: { action: remove.id },
    };
    const workflow = {
      id: uniqueId("saga"),
      nodes: { a: { task: { steps: [{ ref: "make", action: make.id, output_mapping: { "state.id": "$.bdy.id" } }] } } },
    };
    await register({ actions: [remove, make], workflows: [workflow] });
    const run = await waitForRun(await start(workflow.id), (view) => view.compensation?.status === "completed");
    expect(run.status).toBe("failed");
    expect(run.error.message).toContain("$.bdy.id selects nothing");
    expect(run.compensation.undos).toEqual([expect.objectContaining({ step: "make", status: "completed" })]);
    expect(await hits(undoKey)).toBe(1);
  });
});
