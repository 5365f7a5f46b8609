import { describe, it } from "vitest";
import { api, uniqueId } from "./helpers.ts";

const contextStep = (expr = "1") => ({
  ref: "s",
  action: { kind: "context", implementation: { updates: [{ path: "v", expr }] } },
});
const simpleWorkflow = (id: string, expr = "1") => ({ id, nodes: { main: { task: { steps: [contextStep(expr)] } } } });

/** Registers a bundle and returns the details of its 400, asserting nothing was stored. */
async function rejected(
  bundle: Record<string, unknown>,
): Promise<{ code: string; details: { path: string; message: string; code?: string }[] }> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 400) {
    throw new Error(`expected 400, got ${response.status}: ${JSON.stringify(response.json)}`);
  }
  return { code: response.json.error.code, details: response.json.error.details ?? [] };
}

describe("registration", () => {
  it("creates version 1, returns it again for identical content, and version 2 for new content", async ({ expect }) => {
    const id = uniqueId("wf");
    const first = await api("POST", "/v1/definitions", { workflows: [simpleWorkflow(id)] });
    expect(first.status).toBe(201);
    expect(first.json.created).toEqual([{ kind: "workflows", id, version: 1, existing: false }]);
    // Key order does not make content different.
    const reordered = { nodes: simpleWorkflow(id).nodes, id };
    const again = await api("POST", "/v1/definitions", { workflows: [reordered] });
    expect(again.json.created).toEqual([{ kind: "workflows", id, version: 1, existing: true }]);
    const changed = await api("POST", "/v1/definitions", { workflows: [simpleWorkflow(id, "2")] });
    expect(changed.json.created[0]).toMatchObject({ version: 2, existing: false });

    const latest = await api("GET", `/v1/workflows/${id}`);
    expect(latest.status).toBe(200);
    expect(latest.json).toMatchObject({ kind: "workflows", id, version: 2 });
    expect(latest.json.definition.nodes.main.task.steps[0].action.implementation.updates[0].expr).toBe("2");
    const pinned = await api("GET", `/v1/workflows/${id}/versions/1`);
    expect(pinned.json.definition.nodes.main.task.steps[0].action.implementation.updates[0].expr).toBe("1");
  });

  it("serves kinds written with a hyphen, such as mcp-servers", async ({ expect }) => {
    const id = uniqueId("srv");
    await api("POST", "/v1/definitions", { mcp_servers: [{ id, url: "http://127.0.0.1:1/mcp" }] });
    const response = await api("GET", `/v1/mcp-servers/${id}`);
    expect(response.status).toBe(200);
    expect(response.json.definition.url).toBe("http://127.0.0.1:1/mcp");
  });

  it("answers 404 with a dotted code for unknown ids, versions and kinds", async ({ expect }) => {
    const id = uniqueId("wf");
    await api("POST", "/v1/definitions", { workflows: [simpleWorkflow(id)] });
    for (const path of [`/v1/workflows/${uniqueId("nope")}`, `/v1/workflows/${id}/versions/9`, `/v1/gadgets/${id}`]) {
      const response = await api("GET", path);
      expect(response.status, path).toBe(404);
      expect(response.json.error.code).toBe("definition.not_found");
    }
  });

  it("resolves references to definitions in the same bundle, and pins stored versions with id@n", async ({
    expect,
  }) => {
    const action = uniqueId("act");
    const task = uniqueId("task");
    const first = await api("POST", "/v1/definitions", {
      actions: [{ id: action, kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } }],
      tasks: [{ id: task, steps: [{ ref: "s", action }] }],
    });
    expect(first.status).toBe(201);
    expect(first.json.created.map((c: { kind: string }) => c.kind)).toEqual(["tasks", "actions"]);
    const pinned = await api("POST", "/v1/definitions", {
      workflows: [{ id: uniqueId("wf"), nodes: { main: { task: `${task}@1` } } }],
    });
    expect(pinned.status).toBe(201);
  });
});

describe("registration rejects bad definitions with every problem and its path", () => {
  it("reports schema violations with dotted paths", async ({ expect }) => {
    const { code, details } = await rejected({
      workflows: [
        {
          id: "Bad Id",
          nodes: { main: { task: { steps: [] } }, other: { workflow: "x", task: "y", on_failure: "explode" } },
        },
      ],
    });
    expect(code).toBe("definition.invalid");
    const paths = details.map((detail) => detail.path);
    expect(paths).toContain("workflows.0.id");
    expect(paths).toContain("workflows.0.nodes.main.task.steps");
    expect(paths).toContain("workflows.0.nodes.other.on_failure");
  });

  it("rejects unknown fields rather than ignoring a typo", async ({ expect }) => {
    const { details } = await rejected({ workflows: [{ ...simpleWorkflow(uniqueId("wf")), max_paralel: 3 }] });
    expect(details[0]?.path).toBe("workflows.0");
    expect(details[0]?.message).toMatch(/max_paralel/);
  });

  it("rejects invalid JSON Schemas, CEL, JSONPath and Handlebars in one answer", async ({ expect }) => {
    const id = uniqueId("wf");
    const { details } = await rejected({
      workflows: [
        {
          id,
          input_schema: { type: "objekt" },
          nodes: {
            main: {
              when: "input.x +",
              input_mapping: { a: "$.input[", b: { template: "{{#if x}}unclosed" } },
              task: {
                steps: [
                  {
                    ref: "s",
                    action: { kind: "http", implementation: { method: "GET", url_template: "http://x/{{#each}}" } },
                  },
                ],
              },
            },
          },
        },
      ],
    });
    const byPath = Object.fromEntries(details.map((detail) => [detail.path, detail.code]));
    expect(byPath).toMatchObject({
      [`workflows.0.input_schema.type`]: "schema.invalid",
      [`workflows.0.nodes.main.when`]: "definition.invalid_cel",
      [`workflows.0.nodes.main.input_mapping.a`]: "definition.invalid_jsonpath",
      [`workflows.0.nodes.main.input_mapping.b.template`]: "definition.invalid_template",
      [`workflows.0.nodes.main.task.steps.0.action.implementation.url_template`]: "definition.invalid_template",
    });
  });

  it("rejects references to unknown ids and versions", async ({ expect }) => {
    const known = uniqueId("task");
    await api("POST", "/v1/definitions", { tasks: [{ id: known, steps: [contextStep()] }] });
    const { details } = await rejected({
      workflows: [
        {
          id: uniqueId("wf"),
          nodes: { a: { task: uniqueId("missing") }, b: { task: `${known}@7` }, c: { workflow: uniqueId("child") } },
        },
      ],
    });
    expect(details.map((detail) => [detail.path, detail.code])).toEqual([
      ["workflows.0.nodes.a.task", "definition.unknown_reference"],
      ["workflows.0.nodes.b.task", "definition.unknown_reference"],
      ["workflows.0.nodes.c.workflow", "definition.unknown_reference"],
    ]);
  });

  it("rejects cycles and unknown nodes in depends_on", async ({ expect }) => {
    const task = { steps: [contextStep()] };
    const { details } = await rejected({
      workflows: [
        {
          id: uniqueId("wf"),
          nodes: {
            a: { task, depends_on: ["c"] },
            b: { task, depends_on: ["a"] },
            c: { task, depends_on: ["b", "ghost"] },
          },
        },
      ],
    });
    expect(details.find((detail) => detail.code === "workflow.cycle")?.message).toMatch(
      /a → c → b → a|c → b → a → c|b → a → c → b/,
    );
    expect(details.find((detail) => detail.code === "workflow.unknown_node")?.path).toBe(
      "workflows.0.nodes.c.depends_on.1",
    );
  });

  it("rejects literal secrets where $env: is required", async ({ expect }) => {
    const { details } = await rejected({
      models: [{ id: uniqueId("m"), provider: "openai", model_id: "gpt", api_key: "sk-live-123" }],
      mcp_servers: [{ id: uniqueId("s"), url: "http://127.0.0.1:1/mcp", headers: { Authorization: "Bearer abc" } }],
      actions: [
        {
          id: uniqueId("a"),
          kind: "http",
          implementation: { method: "GET", url_template: "http://x", headers: { "x-api-key": "literal" } },
        },
      ],
    });
    expect(details.map((detail) => detail.code)).toEqual([
      "definition.literal_secret",
      "definition.literal_secret",
      "definition.literal_secret",
    ]);
    expect(JSON.stringify(details)).not.toMatch(/sk-live-123|Bearer abc|\\"literal\\"/);
  });

  it("accepts $env: credentials of declared workflow secrets, including a scheme before them", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      models: [{ id: uniqueId("m"), provider: "openai", model_id: "gpt", api_key: "$env:LLM_API_KEY" }],
      mcp_servers: [
        { id: uniqueId("s"), url: "http://127.0.0.1:1/mcp", headers: { Authorization: "Bearer $env:MCP_TOKEN" } },
      ],
    });
    expect(response.status).toBe(201);
  });

  it("stores nothing from a bundle that has one bad definition", async ({ expect }) => {
    const good = uniqueId("good");
    await rejected({
      workflows: [simpleWorkflow(good), { ...simpleWorkflow(uniqueId("bad")), nodes: { x: { task: "nope-missing" } } }],
    });
    expect((await api("GET", `/v1/workflows/${good}`)).status).toBe(404);
  });

  it("accepts all ten action kinds at registration", async ({ expect }) => {
    const server = uniqueId("srv");
    const child = uniqueId("child");
    const response = await api("POST", "/v1/definitions", {
      mcp_servers: [{ id: server, url: "http://127.0.0.1:1/mcp" }],
      workflows: [simpleWorkflow(child)],
      actions: [
        {
          id: uniqueId("a"),
          kind: "llm",
          implementation: {
            prompt: { messages: [{ role: "user", template: "Hi {{name}}" }] },
            model: { provider: "openai-compatible", model_id: "m", base_url: "http://127.0.0.1:1/v1" },
          },
        },
        { id: uniqueId("a"), kind: "mcp", implementation: { server, tool: "echo" } },
        {
          id: uniqueId("a"),
          kind: "http",
          implementation: {
            method: "POST",
            url_template: "http://127.0.0.1/{{id}}",
            body_template: '{"a": {{json a}} }',
          },
        },
        { id: uniqueId("a"), kind: "tool", implementation: { tool: "read_file" } },
        { id: uniqueId("a"), kind: "shell", implementation: { command_template: "echo {{x}}" } },
        { id: uniqueId("a"), kind: "workflow", implementation: { workflow: child, on_failure: "return" } },
        {
          id: uniqueId("a"),
          kind: "human",
          implementation: {
            prompt_template: "ok?",
            input_schema: { type: "object" },
            on_timeout: { default: { ok: true } },
          },
        },
        { id: uniqueId("a"), kind: "vector", implementation: { index: "docs", query_template: "{{q}}", top_k: 3 } },
        { id: uniqueId("a"), kind: "metric", implementation: { metric_name: "n", value: { expr: "input.n * 2" } } },
        { id: uniqueId("a"), kind: "context", implementation: { updates: [{ path: "a.b", expr: "1" }] } },
      ],
    });
    expect(response.json.error?.details ?? []).toEqual([]);
    expect(response.status).toBe(201);
    expect(response.json.created.length).toBe(12);
  });

  it("answers 400 for a body that is not JSON and 413 for one too large", async ({ expect }) => {
    const notJson = await api("POST", "/v1/definitions", "{nope");
    expect(notJson.status).toBe(400);
    expect(notJson.json.error.code).toBe("request.invalid_json");
    const huge = await api("POST", "/v1/definitions", {
      workflows: [{ id: "x", description: "y".repeat(1_100_000), nodes: {} }],
    });
    expect(huge.status).toBe(413);
    expect(huge.json.error.code).toBe("request.too_large");
  });
});

describe("YAML", () => {
  async function postYaml(path: string, yaml: string): Promise<{ status: number; json: any }> {
    const { exports } = await import("cloudflare:workers");
    const response = await exports.default.fetch(`http://trellis.test${path}`, {
      method: "POST",
      headers: { "authorization": "Bearer test-token", "content-type": "application/yaml" },
      body: yaml,
    });
    return { status: response.status, json: await response.json() };
  }

  it("accepts a definition bundle written in YAML, identical to its JSON", async ({ expect }) => {
    const id = uniqueId("yaml");
    const yaml = `workflows:\n  - id: ${id}\n    nodes:\n      main:\n        task:\n          steps:\n            - ref: s\n              action:\n                kind: context\n                implementation:\n                  updates:\n                    - { path: v, expr: "1" }\n`;
    const registered = await postYaml("/v1/definitions", yaml);
    expect(registered.status).toBe(201);
    const again = await api("POST", "/v1/definitions", { workflows: [simpleWorkflow(id)] });
    expect(again.json.created[0]).toMatchObject({ id, version: 1, existing: true });
  });

  it("rejects YAML that does not parse, and alias bombs, with 400", async ({ expect }) => {
    const broken = await postYaml("/v1/definitions", "workflows: [ {id: x\n");
    expect(broken.status).toBe(400);
    expect(broken.json.error.code).toBe("request.invalid_yaml");
    const bomb = [
      "a: &a [x, x, x, x, x, x, x, x, x, x]",
      ...Array.from(
        { length: 8 },
        (_, i) =>
          `${String.fromCharCode(98 + i)}: &${String.fromCharCode(98 + i)} [*${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}, *${String.fromCharCode(97 + i)}]`,
      ),
    ].join("\n");
    const exploded = await postYaml("/v1/definitions", bomb);
    expect(exploded.status).toBe(400);
    expect(exploded.json.error.code).toBe("request.invalid_yaml");
  });

  it("answers YAML sent without a YAML content type with 400 saying to send Content-Type: application/yaml", async ({
    expect,
  }) => {
    const { exports } = await import("cloudflare:workers");
    const yaml = "workflows:\n  - id: untyped\n    nodes: {}\n";
    // Bytes, so fetch adds no Content-Type of its own; curl's -d sends a form.
    for (const contentType of [undefined, "text/plain", "application/x-www-form-urlencoded", "application/json"]) {
      const response = await exports.default.fetch("http://trellis.test/v1/definitions", {
        method: "POST",
        headers: { authorization: "Bearer test-token", ...(contentType ? { "content-type": contentType } : {}) },
        body: new TextEncoder().encode(yaml),
      });
      const sent = contentType === undefined ? "no Content-Type" : `Content-Type: ${contentType}`;
      expect(response.status, sent).toBe(400);
      const { error } = (await response.json()) as { error: { code: string; message: string } };
      expect(error.code, sent).toBe("request.invalid_json");
      expect(error.message, sent).toMatch(/^the body is not JSON: /);
      expect(
        error.message.endsWith(`; it reads as YAML, sent with ${sent}: send YAML with Content-Type: application/yaml`),
        error.message,
      ).toBe(true);
    }
    // Text that is neither JSON nor a YAML mapping gets no such hint.
    for (const body of ["just words", "{ unclosed", "- a\n- b\n"]) {
      const plain = await exports.default.fetch("http://trellis.test/v1/definitions", {
        method: "POST",
        headers: { "authorization": "Bearer test-token", "content-type": "text/plain" },
        body,
      });
      expect(plain.status, body).toBe(400);
      const { error } = (await plain.json()) as { error: { code: string; message: string } };
      expect(error.code, body).toBe("request.invalid_json");
      expect(error.message, body).not.toContain("YAML");
    }
  });
});
