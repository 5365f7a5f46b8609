/**
 * JSON Schemas that definitions carry, against hostile schemas and values:
 * registration refuses what validation cannot run (patterns outside the linear-time
 * engine, `$ref`s that do not resolve or come back without consuming the value), and
 * validation never throws and never runs unbounded (patterns on a linear-time engine,
 * every application charged to a budget, nesting bounded), so bad input is a 4xx or a
 * failed step, never a 500 or a hung run.
 */
import { describe, it } from "vitest";
import { validateJson } from "../../lib/json-schema.ts";
import { api, uniqueId, waitForRun } from "./helpers.ts";

const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
const task = { steps: [step] };

async function register(workflow: Record<string, unknown>) {
  return api("POST", "/v1/definitions", { workflows: [workflow] });
}

/** Registers a workflow with this input_schema and previews a run with `input` (validated, nothing created). */
async function preview(inputSchema: unknown, input: unknown) {
  const id = uniqueId("schema");
  const registered = await register({ id, input_schema: inputSchema, nodes: { a: { task } } });
  if (registered.status !== 201) {
    throw new Error(`registration answered ${registered.status}: ${JSON.stringify(registered.json)}`);
  }
  return api("POST", `/v1/workflows/${id}/runs`, { input, mode: "preview" });
}

/** `$defs` a0…a{levels-1} each applying the next twice: 2^levels applications, no cycle. */
function fanOutDefs(levels: number): Record<string, unknown> {
  const defs: Record<string, unknown> = { [`a${levels}`]: { type: "integer" } };
  for (let i = 0; i < levels; i += 1) {
    defs[`a${i}`] = { allOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
  }
  return defs;
}

function fanOut(levels: number) {
  return { $defs: fanOutDefs(levels), $ref: "#/$defs/a0" };
}

/** The output schema of a run or task whose `x` fans out to 2^30 applications. */
const FAN_OUT_OUTPUT = { $defs: fanOutDefs(30), type: "object", properties: { x: { $ref: "#/$defs/a0" } } };

/** `path code` of each problem, long paths cut (a failed assertion prints them). */
const summary = (details: { path: string; code: string }[]) =>
  details.map(({ path, code }) => `${path.length > 40 ? `${path.slice(0, 20)}…` : path} ${code}`).sort();

describe("registering JSON Schemas", () => {
  it("refuses a patternProperties key that is not a regular expression, naming it, and never answers 500 at run start", async ({
    expect,
  }) => {
    const id = uniqueId("pp");
    const registered = await register({
      id,
      input_schema: { type: "object", patternProperties: { "(": {} } },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details[0]).toMatchObject({
      path: "workflows.0.input_schema.patternProperties.(",
      code: "schema.invalid_pattern",
    });
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: { a: 1 } });
    expect(started.status).toBe(404);
  });

  it("refuses a workflow output_schema whose patternProperties key is not a regular expression (its run used to hang)", async ({
    expect,
  }) => {
    const registered = await register({
      id: uniqueId("outpp"),
      output_schema: { type: "object", patternProperties: { "]": false } },
      nodes: {
        a: {
          task: { steps: [{ ...step, output_mapping: { "output.x": "$.x" } }] },
          output_mapping: { "output.x": "$.x" },
        },
      },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details[0]).toMatchObject({
      path: "workflows.0.output_schema.patternProperties.]",
      code: "schema.invalid_pattern",
    });
  });

  it("refuses lookaround, backreferences and over-long patterns with a message saying what is not supported", async ({
    expect,
  }) => {
    const registered = await register({
      id: uniqueId("unsupported"),
      input_schema: {
        properties: {
          ahead: { type: "string", pattern: "^(?!admin)\\w+$" },
          back: { type: "string", pattern: "(a)\\1" },
          long: { type: "string", pattern: "a".repeat(5_000) },
          counted: { type: "string", pattern: "(x{100}){200}" },
        },
      },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    const byPath = Object.fromEntries(
      registered.json.error.details.map((detail: { path: string }) => [detail.path, detail]),
    );
    expect(byPath["workflows.0.input_schema.properties.ahead.pattern"]).toMatchObject({
      code: "schema.unsupported_pattern",
      message: expect.stringContaining("lookaround"),
    });
    expect(byPath["workflows.0.input_schema.properties.back.pattern"]).toMatchObject({
      code: "schema.unsupported_pattern",
      message: expect.stringContaining("backreference"),
    });
    expect(byPath["workflows.0.input_schema.properties.long.pattern"]).toMatchObject({
      code: "schema.pattern_too_large",
    });
    expect(byPath["workflows.0.input_schema.properties.counted.pattern"]).toMatchObject({
      code: "schema.pattern_too_large",
    });
  });

  it("refuses a $ref cycle that consumes nothing of the value, naming the reference (it used to overflow the stack at run start)", async ({
    expect,
  }) => {
    const id = uniqueId("refloop");
    const registered = await register({
      id,
      input_schema: { if: { type: "null" }, else: { $ref: "#" } },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details[0]).toMatchObject({
      path: "workflows.0.input_schema.else.$ref",
      code: "schema.ref_cycle",
    });
    const viaDefs = await register({
      id: uniqueId("refloop"),
      input_schema: {
        $defs: { a: { anyOf: [{ $ref: "#/$defs/b" }] }, b: { not: { $ref: "#/$defs/a" } } },
        $ref: "#/$defs/a",
      },
      nodes: { a: { task } },
    });
    expect(viaDefs.status).toBe(400);
    expect(viaDefs.json.error.details[0]).toMatchObject({
      code: "schema.ref_cycle",
      message: expect.stringContaining("workflows.0.input_schema.$defs.a"),
    });
  });

  it("accepts recursion through properties and items, and validates values nested through it", async ({ expect }) => {
    const tree = {
      $defs: {
        node: {
          type: "object",
          required: ["name"],
          properties: { name: { type: "string" }, children: { type: "array", items: { $ref: "#/$defs/node" } } },
        },
      },
      $ref: "#/$defs/node",
    };
    let value: Record<string, unknown> = { name: "leaf" };
    for (let depth = 0; depth < 25; depth += 1) {
      value = { name: `n${depth}`, children: [value] };
    }
    expect((await preview(tree, value)).status).toBe(200);
    let broken: Record<string, unknown> = { name: 7 };
    for (let depth = 0; depth < 25; depth += 1) {
      broken = { name: `n${depth}`, children: [broken] };
    }
    const refused = await preview(tree, broken);
    expect(refused.status).toBe(400);
    expect(refused.json.error.details[0]).toMatchObject({
      path: `input${".children.0".repeat(25)}.name`,
      code: "schema.type",
    });
  });

  it("refuses a $ref that does not resolve, even where validating null does not reach it (it used to be a 500 at run start)", async ({
    expect,
  }) => {
    const registered = await register({
      id: uniqueId("unresolved"),
      input_schema: { additionalProperties: { $ref: "#/$defs/a" } },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details[0]).toMatchObject({
      path: "workflows.0.input_schema.additionalProperties.$ref",
      code: "schema.unresolved_ref",
    });
    const external = await register({
      id: uniqueId("external"),
      input_schema: { $ref: "https://example.com/schema.json" },
      nodes: { a: { task } },
    });
    expect(external.status).toBe(400);
    expect(external.json.error.details[0]).toMatchObject({ code: "schema.unresolved_ref" });
  });

  it("checks a schema reached only through a $ref into a place no keyword describes", async ({ expect }) => {
    const registered = await register({
      id: uniqueId("hidden"),
      input_schema: { x: { allOf: "no", pattern: "(" }, $ref: "#/x" },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    const paths = registered.json.error.details.map((detail: { path: string }) => detail.path);
    expect(paths).toEqual(
      expect.arrayContaining(["workflows.0.input_schema.x.allOf", "workflows.0.input_schema.x.pattern"]),
    );
  });

  it("refuses $recursiveRef and $dynamicRef (the validator re-entered its own schema forever on $recursiveRef)", async ({
    expect,
  }) => {
    const registered = await register({
      id: uniqueId("recursive"),
      input_schema: { properties: { a: { $recursiveRef: "#" }, b: { $dynamicRef: "#node" } } },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details.map((detail: { code: string }) => detail.code)).toEqual([
      "schema.unsupported_keyword",
      "schema.unsupported_keyword",
    ]);
  });

  it("refuses dependentRequired and dependencies that are not lists of names or schemas (a run start used to answer 500)", async ({
    expect,
  }) => {
    const registered = await register({
      id: uniqueId("deps"),
      input_schema: { dependentRequired: { a: 5 }, dependencies: { b: null } },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details).toEqual([
      expect.objectContaining({ path: "workflows.0.input_schema.dependentRequired.a", code: "schema.invalid" }),
      expect.objectContaining({ path: "workflows.0.input_schema.dependencies.b", code: "schema.invalid" }),
    ]);
  });

  it("refuses subschemas chained on one value deeper than validation may nest", async ({ expect }) => {
    const defs: Record<string, unknown> = { a300: { type: "string" } };
    for (let i = 0; i < 300; i += 1) {
      defs[`a${i}`] = { $ref: `#/$defs/a${i + 1}` };
    }
    const registered = await register({
      id: uniqueId("chain"),
      input_schema: { $defs: defs, $ref: "#/$defs/a0" },
      nodes: { a: { task } },
    });
    expect(registered.status).toBe(400);
    expect(registered.json.error.details[0]).toMatchObject({ code: "schema.too_deep" });
  });
});

describe("validating values against JSON Schemas", () => {
  it("runs patterns on a linear-time engine: ^(a|aa)+$ against 100,000 characters is answered (backtracking took seconds at 42)", async ({
    expect,
  }) => {
    const schema = { type: "object", properties: { s: { type: "string", pattern: "^(a|aa)+$" } } };
    const short = await preview(schema, { s: `${"a".repeat(42)}b` });
    expect(short.status).toBe(400);
    expect(short.json.error.details[0]).toMatchObject({ path: "input.s", code: "schema.pattern" });
    const long = await preview(schema, { s: `${"a".repeat(100_000)}b` });
    expect(long.status).toBe(400);
    expect(long.json.error.details[0]).toMatchObject({ path: "input.s", code: "schema.pattern" });
    expect((await preview(schema, { s: "a".repeat(100_000) })).status).toBe(200);
  });

  it("runs patternProperties keys on the same engine, and ECMAScript escapes (\\d, \\p{L}, \\b, \\u{…}) as V8 reads them", async ({
    expect,
  }) => {
    const schema = {
      type: "object",
      patternProperties: {
        "^(a|aa)+$": { type: "integer" },
        "^\\p{Lu}\\d{2}\\b": { type: "string" },
        "^\\u{1F600}$": { const: true },
      },
      additionalProperties: false,
    };
    expect((await preview(schema, { "aaaa": 1, "Ä12": "x", "😀": true })).status).toBe(200);
    const refused = await preview(schema, { aaaa: "no", Ä123: "x", [`${"a".repeat(50_000)}b`]: 1 });
    expect(refused.status).toBe(400);
    // A property that additionalProperties: false refuses is reported at the object and at the property (schema.false).
    expect(summary(refused.json.error.details)).toEqual([
      "input schema.additionalProperties",
      "input schema.additionalProperties",
      "input.aaaa schema.type",
      "input.aaaaaaaaaaaaaa… schema.false",
      "input.Ä123 schema.false",
    ]);
  });

  it("answers format url without backtracking: 5,000 characters with no top-level domain are refused (28 took 2 s)", async ({
    expect,
  }) => {
    const schema = { type: "string", format: "url" };
    const refused = await preview(schema, `http://${"a".repeat(5_000)}`);
    expect(refused.status).toBe(400);
    expect(refused.json.error.details[0]).toMatchObject({ code: "schema.format" });
    expect((await preview(schema, "https://user:pw@example.com:8080/a@b/c?d#e")).status).toBe(200);
    expect((await preview(schema, "http://10.0.0.1/")).status).toBe(400);
  });

  it("treats format names as names only: format __proto__ checks nothing (a run start used to answer 500)", async ({
    expect,
  }) => {
    expect((await preview({ type: "string", format: "__proto__" }, "anything")).status).toBe(200);
    expect((await preview({ type: "string", format: "constructor" }, "anything")).status).toBe(200);
  });

  it("checks uniqueItems over 75,000 objects in one pass (comparing every pair took 4.3 s for 3,000 small ones) and names the first duplicate", async ({
    expect,
  }) => {
    const items = Array.from({ length: 75_000 }, (_, i) => ({ a: i }));
    expect((await preview({ type: "array", uniqueItems: true }, items)).status).toBe(200);
    const duplicated = await preview({ type: "array", uniqueItems: true }, [
      0,
      { a: 1, b: [2] },
      2,
      0,
      { b: [2], a: 1 },
    ]);
    expect(duplicated.status).toBe(400);
    expect(duplicated.json.error.details[0]).toMatchObject({
      code: "schema.uniqueItems",
      message: "Duplicate items at indexes 0 and 3.",
    });
  });

  it("lists 20 problems and counts the rest when 150,000 items are wrong under an allOf (their errors used to overflow the stack: 500)", async ({
    expect,
  }) => {
    const response = await preview(
      { allOf: [{ type: "array", items: { type: "string" } }] },
      Array.from({ length: 150_000 }, () => 0),
    );
    expect(response.status).toBe(400);
    const details = response.json.error.details;
    expect(details).toHaveLength(21);
    expect(details[0]).toMatchObject({ path: "input.0", code: "schema.type" });
    expect(details[20]).toMatchObject({ path: "input", code: "schema.more_problems" });
  });

  it("stops a schema whose $refs fan out to 2^30 applications with schema.budget_exceeded", async ({ expect }) => {
    const response = await preview(fanOut(30), 5);
    expect(response.status).toBe(400);
    expect(response.json.error.details[0]).toMatchObject({ path: "input", code: "schema.budget_exceeded" });
    expect((await preview(fanOut(8), 5)).status).toBe(200);
  });

  it("fails a run whose output does not fit the budget of its output_schema with run.invalid_output, instead of hanging", async ({
    expect,
  }) => {
    const id = uniqueId("outbudget");
    const registered = await register({
      id,
      output_schema: FAN_OUT_OUTPUT,
      nodes: {
        a: {
          task: { steps: [{ ...step, output_mapping: { "output.x": "$.x" } }] },
          output_mapping: { "output.x": "$.x" },
        },
      },
    });
    expect(registered.status).toBe(201);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    const run = await waitForRun(started.json.run_id);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({
      code: "run.invalid_output",
      message: expect.stringContaining("JSON Schema validation exceeded"),
    });
  });

  it("fails a task whose output_schema exceeds its budget with task.invalid_output, not retried", async ({
    expect,
  }) => {
    const id = uniqueId("taskbudget");
    const registered = await register({
      id,
      nodes: {
        a: {
          task: { output_schema: FAN_OUT_OUTPUT, steps: [{ ...step, output_mapping: { "output.x": "$.x" } }] },
          retry: { max_attempts: 3, initial_delay_ms: 10 },
        },
      },
    });
    expect(registered.status).toBe(201);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    const run = await waitForRun(started.json.run_id);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "task.invalid_output", node: "a" });
    expect(run.nodes.a.attempts).toBe(1);
  });
});

describe("validateJson never throws", () => {
  // Schemas that registration refuses now, as a definition stored before these checks may still hold them.
  it.for([
    ["a $ref cycle that consumes nothing", { if: { type: "null" }, else: { $ref: "#" } }, {}, "schema.too_deep"],
    ["a $recursiveRef", { $recursiveRef: "#" }, 1, "schema.too_deep"],
    ["a pattern that is not a regular expression", { pattern: "(" }, "x", "schema.invalid_pattern"],
    [
      "a patternProperties key with lookahead",
      { patternProperties: { "(?=a)": {} } },
      { a: 1 },
      "schema.unsupported_pattern",
    ],
    ["a $ref that does not resolve", { additionalProperties: { $ref: "#/$defs/a" } }, { n: 0 }, "schema.not_validated"],
    ["dependentRequired that is not a list", { dependentRequired: { a: 5 } }, { a: 1 }, "schema.not_validated"],
    ["a value that is not JSON", { type: "object" }, undefined, "schema.not_validated"],
  ] as const)("%s is a %s problem at the base path", ([, schema, value, code], { expect }) => {
    const problems = validateJson(schema, value, "input");
    expect(problems).toHaveLength(1);
    expect(problems[0]).toMatchObject({ path: "input", code });
  });
});
