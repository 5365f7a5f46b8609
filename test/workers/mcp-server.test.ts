import { describe, it } from "vitest";
import type { RunView } from "../../schemas/api.ts";
import type { JsonSchema } from "../../schemas/common.ts";
import { EngineError } from "../../lib/errors.ts";
import { elicitedGate } from "../../src/mcp/elicitation.ts";
import { errorResult, RUN_META_KEY, runResult } from "../../src/mcp/results.ts";
import {
  toElicitationSchema,
  toRunInput,
  toStructured,
  toToolInputSchema,
  toToolOutputSchema,
} from "../../src/mcp/schema-map.ts";
import { createSessionId, sessionTraits, toolCallKey } from "../../src/mcp/session.ts";
import { api, uniqueId } from "./helpers.ts";

/**
 * The MCP server's pure parts (src/mcp/): how workflow schemas become tool
 * schemas, which gate schemas an elicitation form can ask, what a session id
 * carries, and how a run becomes a tool's answer. test/e2e/mcp-server.test.mjs
 * drives the whole server through the SDK's client against wrangler dev.
 */

describe("tool schemas from workflow schemas", () => {
  it("keeps an object schema as it is, and wraps any other as the one property of an object", ({ expect }) => {
    const object = { type: "object", properties: { n: { type: "integer" } }, required: ["n"] };
    expect(toToolInputSchema(object)).toEqual({ schema: object, wrapped: false });
    expect(toToolInputSchema(undefined)).toEqual({ schema: { type: "object" }, wrapped: false });
    expect(toToolInputSchema({ type: "string", minLength: 1 })).toEqual({
      schema: { type: "object", properties: { input: { type: "string", minLength: 1 } }, required: ["input"] },
      wrapped: true,
    });
    expect(toToolInputSchema(true)).toEqual({
      schema: { type: "object", properties: { input: true }, required: ["input"] },
      wrapped: true,
    });
    expect(toToolOutputSchema(undefined)).toBeUndefined();
    expect(toToolOutputSchema({ type: "array" })?.schema).toEqual({
      type: "object",
      properties: { output: { type: "array" } },
      required: ["output"],
    });
  });

  it("lifts a wrapped schema's $defs to the wrapper, so its references still resolve; one with $id keeps them", ({
    expect,
  }) => {
    const schema: JsonSchema = {
      $schema: "https://json-schema.org/draft/2020-12/schema",
      $defs: { id: { type: "string" } },
      type: "array",
      items: { $ref: "#/$defs/id" },
    };
    expect(toToolInputSchema(schema).schema).toEqual({
      type: "object",
      properties: { input: { type: "array", items: { $ref: "#/$defs/id" } } },
      required: ["input"],
      $defs: { id: { type: "string" } },
    });
    const own = { $id: "urn:ids", $defs: { id: { type: "string" } }, type: "array" };
    expect(toToolInputSchema(own).schema.properties).toEqual({ input: own });
  });

  it("maps arguments to the run's input and the run's output to structured content by the same rule", ({ expect }) => {
    const wrapped = toToolInputSchema({ type: "string" });
    expect(toRunInput({ input: "hello" }, wrapped)).toBe("hello");
    expect(toRunInput({ n: 1 }, toToolInputSchema(undefined))).toEqual({ n: 1 });
    expect(toStructured({ v: 1 }, toToolOutputSchema({ type: "object" }))).toEqual({ v: 1 });
    expect(toStructured([1, 2], toToolOutputSchema({ type: "array" }))).toEqual({ output: [1, 2] });
    expect(toStructured({ v: 1 }, toToolOutputSchema({ anyOf: [{ type: "object" }] }))).toEqual({ output: { v: 1 } });
    expect(toStructured("done", undefined)).toEqual({ output: "done" });
    expect(toStructured({ v: 1 }, undefined)).toEqual({ v: 1 });
  });
});

describe("elicitation forms from gate schemas", () => {
  it("asks a flat object of primitive properties as it is", ({ expect }) => {
    const approval = {
      type: "object",
      properties: { approved: { type: "boolean" }, reason: { type: "string", maxLength: 500 } },
      required: ["approved"],
      additionalProperties: false,
    };
    expect(toElicitationSchema(approval)).toEqual({
      type: "object",
      properties: approval.properties,
      required: ["approved"],
    });
    const choice = { type: "object", properties: { size: { type: "string", enum: ["s", "m"], title: "Size" } } };
    expect(toElicitationSchema(choice)).toEqual(choice);
  });

  it("refuses what the form cannot say in full rather than loosening it", ({ expect }) => {
    const cases: JsonSchema[] = [
      true,
      { type: "string" },
      { type: "object", properties: { at: { type: "object" } } },
      { type: "object", properties: { tags: { type: "array", items: { type: "string" } } } },
      { type: "object", properties: { code: { type: "string", pattern: "^[A-Z]+$" } } },
      { type: "object", properties: { n: { $ref: "#/$defs/n" } }, $defs: { n: { type: "integer" } } },
      { type: "object", properties: { n: { type: "integer" } }, anyOf: [{ required: ["n"] }] },
      { type: "object", properties: { on: { type: "string", format: "ipv4" } } },
      { type: "object", properties: { n: { type: "integer" } }, required: ["m"] },
    ];
    for (const schema of cases) {
      expect(toElicitationSchema(schema), JSON.stringify(schema)).toBeNull();
    }
  });

  it("names the run and the gate in an elicitation's id, and nothing else parses as one", ({ expect }) => {
    expect(elicitedGate("trellis.gate/run_0123/gate_1/0123456789abcdef")).toEqual({
      runId: "run_0123",
      gateId: "gate_1",
    });
    for (const id of [1, "trellis.gate/run_0123/gate_1", "other/run_0123/gate_1/0123456789abcdef", null]) {
      expect(elicitedGate(id)).toBeNull();
    }
  });
});

describe("sessions", () => {
  it("carries whether the client declared form elicitation, and nothing for an id it did not make", ({ expect }) => {
    const random = () => new Uint8Array(16).fill(0xab);
    const form = createSessionId({ elicitation: {} }, random);
    expect(form).toBe(`trellis-mcp.f.${"ab".repeat(16)}`);
    expect(sessionTraits(form)).toEqual({ id: form, elicitation: true });
    expect(sessionTraits(createSessionId({ elicitation: { form: {} } }, random)).elicitation).toBe(true);
    expect(sessionTraits(createSessionId({ elicitation: { url: {} } }, random)).elicitation).toBe(false);
    expect(sessionTraits(createSessionId({}, random)).elicitation).toBe(false);
    expect(sessionTraits("some-other-server-session")).toEqual({ id: null, elicitation: false });
    expect(sessionTraits(null)).toEqual({ id: null, elicitation: false });
  });

  it("derives one idempotency key per session and request id, takes the client's own, and makes none without a session", async ({
    expect,
  }) => {
    const key = await toolCallKey(undefined, "trellis-mcp.f.00", 7);
    expect(key).toMatch(/^mcp:[0-9a-f]{64}$/);
    expect(await toolCallKey(undefined, "trellis-mcp.f.00", 7)).toBe(key);
    expect(await toolCallKey(undefined, "trellis-mcp.f.01", 7)).not.toBe(key);
    expect(await toolCallKey(undefined, "trellis-mcp.f.00", "7")).not.toBe(key);
    expect(await toolCallKey({ "trellis/idempotency_key": "refund-42" }, null, 7)).toBe("refund-42");
    expect(await toolCallKey(undefined, null, 7)).toBeUndefined();
  });
});

/** A run view with the fields the answers read. */
function view(overrides: Partial<RunView>): RunView {
  return {
    run_id: "run_1",
    workflow: { id: "w", version: 1 },
    status: "running",
    mode: "auto",
    input: {},
    output: null,
    error: null,
    created_at: "2026-01-01T00:00:00.000Z",
    updated_at: "2026-01-01T00:00:00.000Z",
    start_at: null,
    nodes: {},
    gates: [],
    waiting_for: [],
    usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
    trigger: { kind: "api" },
    priority: 5,
    parent: null,
    children: [],
    controls: [],
    ...overrides,
  } as RunView;
}

describe("tool answers", () => {
  const origin = "https://trellis.example";
  const outputSchema = toToolOutputSchema({ type: "object" });
  const context = { origin, waitedSeconds: 25, asked: [] };

  it("answers an ended run's output as structured content, with its handle in _meta", ({ expect }) => {
    const result = runResult(view({ status: "completed", output: { v: 2 } }), { ...context, outputSchema });
    expect(result.structuredContent).toEqual({ v: 2 });
    expect(result.isError).toBeUndefined();
    expect(result._meta?.[RUN_META_KEY]).toEqual({
      run_id: "run_1",
      status: "completed",
      url: "https://trellis.example/runs/run_1",
    });
  });

  it("answers a run still going with its handle: structured without an output schema, an error result with one", ({
    expect,
  }) => {
    const bare = runResult(view({ status: "running" }), { ...context, outputSchema: undefined });
    expect(bare.isError).toBeUndefined();
    expect(bare.structuredContent).toMatchObject({ run_id: "run_1", status: "running" });
    const typed = runResult(view({ status: "running" }), { ...context, outputSchema });
    expect(typed.isError).toBe(true);
    expect(typed.structuredContent).toBeUndefined();
    expect(typed.content[0]).toMatchObject({ text: expect.stringContaining("it has not failed") });
    expect(typed._meta?.[RUN_META_KEY]).toMatchObject({ run_id: "run_1" });
  });

  it("answers a failed run as an error result with the run's error", ({ expect }) => {
    const error = { code: "http.status", message: "502 from the target" };
    const result = runResult(view({ status: "failed", error }), { ...context, outputSchema: undefined });
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toMatchObject({ status: "failed", error });
  });

  it("answers an API error with its code, message and problems", ({ expect }) => {
    const details = [{ path: "input.n", message: "expected integer", code: "schema.type" }];
    const result = errorResult(EngineError.terminal("run.invalid_input", "the input is invalid", details), false);
    expect(result.isError).toBe(true);
    expect(result.structuredContent).toEqual({
      error: { code: "run.invalid_input", message: "the input is invalid", details },
    });
    expect(result.content[0]).toMatchObject({ text: expect.stringContaining("input.n: expected integer") });
  });
});

describe("registering an exposed workflow", () => {
  const workflow = (id: string, mcp: unknown) => ({
    id,
    mcp,
    nodes: {
      a: {
        task: {
          steps: [{ ref: "a", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } }],
        },
      },
    },
  });

  it("takes mcp: { expose, description } and refuses an exposed id the server's own tools use", async ({ expect }) => {
    const ok = await api("POST", "/v1/definitions", {
      workflows: [workflow(uniqueId("exposed"), { expose: true, description: "Does a." })],
    });
    expect(ok.status).toBe(201);
    const reserved = await api("POST", "/v1/definitions", {
      workflows: [workflow("trellis_get_run", { expose: true })],
    });
    expect(reserved.status).toBe(400);
    expect(reserved.json.error.details).toContainEqual(
      expect.objectContaining({ path: "workflows.0.mcp.expose", code: "workflow.mcp_reserved_name" }),
    );
    const hidden = await api("POST", "/v1/definitions", { workflows: [workflow("trellis_x", { expose: false })] });
    expect(hidden.status).toBe(201);
    const bad = await api("POST", "/v1/definitions", { workflows: [workflow(uniqueId("bad"), { expose: "yes" })] });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json.error.details)).toContain("mcp.expose");
  });
});
