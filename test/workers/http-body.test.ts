import { describe, it } from "vitest";
import { MAX_HTTP_BODY_CHARS, MAX_HTTP_RESPONSE_BYTES } from "../../executor/actions/http.ts";
import { buildValue } from "../../lib/expr/mapping.ts";
import { MAX_TEMPLATE_OUTPUT } from "../../lib/expr/template.ts";
import { api, hits, httpTarget, runWorkflow, uniqueId } from "./helpers.ts";

/**
 * What an http action sends as its body: JSON built by the engine from a
 * structured `body`, or a `body_template`'s text, which never goes out as
 * broken JSON. Every call goes to the HTTP target's /echo, which answers with
 * the request it received; `?key=` counts the requests that reached it.
 */

const QUOTED = 'He said "ship it"';

/** One run of an http POST to /echo with these implementation fields; the echo's answer is the output. */
async function post(implementation: Record<string, unknown>, input: unknown) {
  const key = uniqueId("body");
  const id = uniqueId("http-body");
  const step = {
    ref: "call",
    action: {
      kind: "http",
      implementation: { method: "POST", url_template: `${httpTarget()}/echo?key=${key}`, ...implementation },
      // Retryable failures would be tried again: a refused body must be refused once, not retried.
      execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10 } },
    },
    output_mapping: { "output.echo": "$.body" },
  };
  const node = { task: { steps: [step] }, output_mapping: { "output.echo": "$.echo" } };
  const run = await runWorkflow({ id, nodes: { main: node } }, input);
  return { run, received: await hits(key), echo: run.output?.echo };
}

/** Registers one http action with these implementation fields; the answer's status and problem details. */
async function register(implementation: Record<string, unknown>) {
  const action = {
    id: uniqueId("act"),
    kind: "http",
    implementation: { method: "POST", url_template: `${httpTarget()}/echo`, ...implementation },
  };
  const response = await api("POST", "/v1/definitions", { actions: [action] });
  const details: { path: string; code: string; message: string }[] = response.json.error?.details ?? [];
  return { status: response.status, details };
}

describe("a body_template meant as JSON", () => {
  it("fails the step with http.invalid_body, sending nothing, when a value's quotes break the JSON", async ({
    expect,
  }) => {
    const { run, received } = await post({ body_template: '{"title": "{{title}}"}' }, { title: QUOTED });
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "http.invalid_body", step: "call" });
    expect(run.error.retryable ?? false).toBe(false);
    expect(run.error.message).toMatch(/not JSON.*nothing was sent/);
    expect(run.error.message).toContain(`position 20 ends ${JSON.stringify(`{"title": "He said "`)}`);
    expect(run.error.message).toContain("{{json value}}");
    expect(received).toBe(0);
  });

  it("fails the same way under a declared JSON content type, whatever the template's text starts with", async ({
    expect,
  }) => {
    for (const type of ["application/json", "application/vnd.api+json; charset=utf-8"]) {
      const { run, received } = await post(
        { headers: { "Content-Type": type }, body_template: '"{{title}}"' },
        { title: QUOTED },
      );
      expect(run.error, type).toMatchObject({ code: "http.invalid_body" });
      expect(received, type).toBe(0);
    }
  });

  it("sends the text as it is under a declared non-JSON content type, and plain text as text", async ({ expect }) => {
    const declared = await post(
      { headers: { "Content-Type": "text/plain" }, body_template: '{"title": "{{title}}"}' },
      { title: QUOTED },
    );
    expect(declared.run.status).toBe("completed");
    expect(declared.echo.body).toBe('{"title": "He said "ship it""}');
    const text = await post({ body_template: "[{{level}}] {{title}}" }, { title: QUOTED, level: 1 });
    expect(text.run.status).toBe("failed"); // starts with "[": meant as JSON
    const plain = await post({ body_template: "Note: {{title}}" }, { title: QUOTED });
    expect(plain.run.status).toBe("completed");
    expect(plain.echo.headers["content-type"]).toMatch(/^text\/plain/);
    expect(plain.echo.body).toBe(`Note: ${QUOTED}`);
  });

  it("sends JSON that ends with a helper, quotes escaped, without a space before the closing brace", async ({
    expect,
  }) => {
    const { run, echo } = await post({ body_template: '{"title": {{json title}}}' }, { title: QUOTED });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(echo.headers["content-type"]).toBe("application/json");
    expect(echo.body).toEqual({ title: QUOTED });
  });

  it("fails a typo inside a helper with template.unresolved, sending nothing", async ({ expect }) => {
    const { run, received } = await post({ body_template: '{"title": {{json titel}} }' }, { title: QUOTED });
    expect(run.error).toMatchObject({ code: "template.unresolved", step: "call" });
    expect(run.error.message).toContain("titel (an argument of json) selects nothing");
    expect(received).toBe(0);
  });
});

describe("a structured body", () => {
  it("is built from its sources over { input } and sent as application/json", async ({ expect }) => {
    const body = {
      title: "$.input.title",
      tags: ["$.input.tag", { path: "$.input.none", optional: true }, "literal"],
      count: { expr: "input.n + 1" },
      greeting: { template: "Hi {{input.title}}" },
      line: { concat: ["n=", "$.input.n"] },
      nested: { ok: true, nothing: null, deeper: ["$.input.n"] },
      note: { path: "$.input.note", default: "" },
      skipped: { path: "$.input.absent", optional: true },
    };
    const { run, echo } = await post({ body }, { title: QUOTED, tag: "t", n: 2 });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(echo.headers["content-type"]).toBe("application/json");
    expect(echo.body).toEqual({
      title: QUOTED,
      tags: ["t", "literal"],
      count: 3,
      greeting: `Hi ${QUOTED}`,
      line: "n=2",
      nested: { ok: true, nothing: null, deeper: [2] },
      note: "",
    });
  });

  it("keeps a content type the definition sets, and sends a literal body as it is", async ({ expect }) => {
    const { run, echo } = await post(
      { headers: { "Content-Type": "application/vnd.api+json" }, body: [1, "two", { three: 3 }] },
      {},
    );
    expect(run.status).toBe("completed");
    expect(echo.headers["content-type"]).toBe("application/vnd.api+json");
    expect(echo.body).toEqual([1, "two", { three: 3 }]);
  });

  it("fails a $ path that selects nothing with mapping.unresolved, naming where, sending nothing", async ({
    expect,
  }) => {
    const { run, received } = await post({ body: { item: { title: "$.input.titel" } } }, { title: QUOTED });
    expect(run.error).toMatchObject({ code: "mapping.unresolved", step: "call" });
    expect(run.error.message).toContain("body.item.title: $.input.titel selects nothing");
    expect(received).toBe(0);
  });

  it("renders its templates strictly, as a body_template", async ({ expect }) => {
    const { run, received } = await post({ body: { greeting: { template: "Hi {{input.nmae}}" } } }, { name: "a" });
    expect(run.error).toMatchObject({ code: "template.unresolved", step: "call" });
    expect(run.error.message).toContain("body.greeting:");
    expect(received).toBe(0);
  });

  it("bounds the JSON its sources compute as a response body is bounded, so a step can send on what another received", ({
    expect,
  }) => {
    expect(MAX_HTTP_BODY_CHARS).toBe(MAX_HTTP_RESPONSE_BYTES);
    expect(MAX_HTTP_BODY_CHARS).toBeGreaterThanOrEqual(MAX_TEMPLATE_OUTPUT);
    const doc = { input: { s: "x".repeat(100) } };
    expect(buildValue(["$.input.s", "$.input.s"], doc, "body", 204)).toEqual({
      found: true,
      value: [doc.input.s, doc.input.s],
    });
    expect(() => buildValue(["$.input.s", "$.input.s"], doc, "body", 203)).toThrowError(
      expect.objectContaining({ code: "mapping.too_large", retryable: false }),
    );
  });
});

describe("registration of an http body", () => {
  it("refuses body and body_template together, at the body's path", async ({ expect }) => {
    const { status, details } = await register({ body: { a: 1 }, body_template: "{}" });
    expect(status).toBe(400);
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([
      ["actions.0.implementation.body", "definition.invalid_http_body"],
    ]);
  });

  it("checks the body's JSONPath, CEL and templates where they sit; CEL sees only input", async ({ expect }) => {
    const { status, details } = await register({
      body: {
        a: "$.input[",
        b: [{ expr: "state.x" }],
        c: { d: { template: "{{#if}}" } },
        e: { concat: [{ expr: "1 +" }] },
        literal: { expr: "input.ok", other: true },
      },
    });
    expect(status).toBe(400);
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([
      ["actions.0.implementation.body.a", "definition.invalid_jsonpath"],
      ["actions.0.implementation.body.b.0.expr", "definition.invalid_cel"],
      ["actions.0.implementation.body.c.d.template", "definition.invalid_template"],
      ["actions.0.implementation.body.e.concat.0.expr", "definition.invalid_cel"],
    ]);
  });
});
