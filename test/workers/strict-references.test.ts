import { describe, it } from "vitest";
import { compileCel } from "../../lib/expr/cel.ts";
import { buildInput } from "../../lib/expr/mapping.ts";
import { renderShellCommand } from "../../lib/expr/shell-template.ts";
import { renderTemplate } from "../../lib/expr/template.ts";
import { api, httpTarget, singleTaskWorkflow, uniqueId, waitForRun } from "./helpers.ts";

/**
 * References that cannot fail silently: a CEL expression that reads a
 * variable its context does not bind (`inputs.flag` where `input` is meant)
 * is refused at registration, naming the variable and the ones that are bound;
 * a template that builds a request or a command fails its render when a
 * `{{path}}` selects nothing, naming it.
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
          'CEL reads the variable "inputs", which is not bound here; the variables here are input, state, output, run',
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
      condition: { if: "runs.ok" },
      input_mapping: { x: { expr: "item" } },
      output_mapping: { "state.y": { expr: "state.z" } },
    };
    const { status, details } = await register(workflow({}, step));
    expect(status).toBe(400);
    const at = "workflows.0.nodes.a.task.steps.0";
    expect(details.map((detail) => [detail.path, detail.message.split('"')[1]])).toEqual([
      [`${at}.action.implementation.updates.0.expr`, "state"],
      [`${at}.condition.if`, "runs"],
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

describe("templates that build requests and commands are strict", () => {
  const data = { user: { name: "ada" }, items: [{ id: 1 }, { id: 2 }] };

  it("renders what is there, and what is marked optional, as before", ({ expect }) => {
    const source =
      '{{user.name}}/{{#each items}}{{id}},{{/each}}{{default user.mail "none"}}{{#if user.mail}}{{user.mail}}{{/if}}';
    expect(renderTemplate(source, data, { strict: true })).toBe("ada/1,2,none");
  });

  it("fails on a path that selects nothing, naming it and the data's top-level keys", ({ expect }) => {
    expect(() => renderTemplate("/users/{{usr.name}}", data, { strict: true })).toThrowError(
      expect.objectContaining({
        code: "template.unresolved",
        retryable: false,
        message: expect.stringMatching(/\{\{usr\.name\}\} selects nothing .*top-level keys are user, items/),
      }),
    );
    // A prompt or a message is not strict: there an absent value renders as nothing, as before.
    expect(renderTemplate("/users/{{usr.name}}", data)).toBe("/users/");
  });

  it("fails on an absent path given to a helper that renders it, as on a bare one", ({ expect }) => {
    for (const source of ['{"name": {{json usr.name}} }', "{{lowercase nme}}", "{{join tgas}}", "{{length itmes}}"]) {
      expect(() => renderTemplate(source, data, { strict: true }), source).toThrowError(
        expect.objectContaining({ code: "template.unresolved", retryable: false }),
      );
    }
    expect(() => renderTemplate("{{json (lowercase usr.name)}}", data, { strict: true })).toThrowError(
      expect.objectContaining({
        message: expect.stringMatching(
          /usr\.name \(an argument of lowercase\) selects nothing .*top-level keys are user, items/,
        ),
      }),
    );
    expect(() => renderTemplate("{{json titel}}", data, { strict: true })).toThrowError(
      expect.objectContaining({ message: expect.stringContaining("{{json (default titel null)}}") }),
    );
    // Not strict (a prompt): the helper gets undefined, as before.
    expect(renderTemplate("{{json titel}}", data)).toBe("null");
  });

  it("lets helpers that test a value take an absent one", ({ expect }) => {
    const source =
      '{{json (default user.mail null)}} {{#if (eq user.mail "x")}}x{{/if}}{{#unless (and user.mail)}}none{{/unless}} {{not user.mail}}{{#each user.mails}}m{{/each}}';
    expect(renderTemplate(source, data, { strict: true })).toBe("null none true");
  });

  it("a shell command_template and its env are strict", ({ expect }) => {
    expect(() => renderShellCommand("echo {{user.nmae}}", data)).toThrowError(
      expect.objectContaining({ code: "template.unresolved" }),
    );
    expect(() => renderShellCommand("echo hi", data, { WHO: "{{who}}" })).toThrowError(
      expect.objectContaining({ code: "template.unresolved" }),
    );
  });

  it("an http step whose url_template names an absent value fails without a request, saying which", async ({
    expect,
  }) => {
    const key = uniqueId("typo");
    const id = uniqueId("wf");
    const step = {
      ref: "call",
      action: {
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/echo/{{itme}}?key=${key}` },
      },
    };
    expect((await api("POST", "/v1/definitions", { workflows: [singleTaskWorkflow(id, [step])] })).status).toBe(201);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: { item: "x" } });
    const run = await waitForRun(started.json.run_id);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "template.unresolved", step: "call" });
    expect(run.error.message).toContain("{{itme}}");
    expect(run.error.message).toContain("top-level keys are item");
    const hits = (await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number };
    expect(hits.count).toBe(0);
  });
});

describe("input mappings are strict about $ paths", () => {
  const doc = { input: { item: "x", count: 2 }, state: {}, output: {} };

  it("fails a path that selects nothing, naming the field, the path and what is there", ({ expect }) => {
    expect(() => buildInput({ id: "$.input.itme" }, doc)).toThrowError(
      expect.objectContaining({
        code: "mapping.unresolved",
        retryable: false,
        message: expect.stringContaining(
          "input_mapping.id: $.input.itme selects nothing (the document's top-level keys are input, state, output; $.input has item, count)",
        ),
      }),
    );
  });

  it("takes a default, or leaves the field out, where the mapping says the value may be absent", ({ expect }) => {
    const mapping = {
      note: { path: "$.input.note", default: "" },
      extra: { path: "$.input.extra", optional: true },
      item: { path: "$.input.item", default: "unused" },
      literal: { path: "$.input.item", default: 1, other: true },
    };
    expect(buildInput(mapping, doc)).toEqual({
      note: "",
      item: "x",
      // Any other object is a literal, as before.
      literal: { path: "$.input.item", default: 1, other: true },
    });
  });

  it("a step whose mapping has a typo fails, and the run error names the step and the path", async ({ expect }) => {
    const id = uniqueId("wf");
    const step = { ...contextStep("input.v"), ref: "use", input_mapping: { v: "$.input.vlaue" } };
    expect((await api("POST", "/v1/definitions", { workflows: [singleTaskWorkflow(id, [step])] })).status).toBe(201);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: { value: 1 } });
    const run = await waitForRun(started.json.run_id);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "mapping.unresolved", step: "use" });
    expect(run.error.message).toContain("$.input.vlaue selects nothing");
    expect(run.error.message).toContain("$.input has value");
  });

  it("registration checks the JSONPath of an optional path", async ({ expect }) => {
    const { status, details } = await register(workflow({ input_mapping: { x: { path: "$.input[", default: null } } }));
    expect(status).toBe(400);
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([
      ["workflows.0.nodes.a.input_mapping.x.path", "definition.invalid_jsonpath"],
    ]);
  });
});
