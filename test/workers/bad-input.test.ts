import { exports } from "cloudflare:workers";
import { describe, it, type ExpectStatic } from "vitest";
import { runIdFor } from "../../lib/ids.ts";
import { MAX_BODY_DEPTH } from "../../lib/json-limits.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import { oneStepWorkflow, TOKEN, api, uniqueId, TERMINAL, waitForRun } from "./helpers.ts";

/** Bodies a client might send by mistake: wrong types, wrong shapes, hostile keys. */
const MALFORMED: unknown[] = [
  "not json {",
  "null",
  "[]",
  "42",
  '"text"',
  {},
  { workflows: "x" },
  { workflows: [null] },
  { workflows: [{ id: 5 }] },
  { workflows: [{ id: "a", nodes: [] }] },
  { workflows: [{ id: "a", nodes: { b: { task: { steps: [{ ref: "s", action: { kind: "nope" } }] } } } }] },
  { input: { a: 1 }, version: -1 },
  { input: {}, mode: 7 },
  { response: undefined },
  { __proto__: { polluted: true }, constructor: { prototype: { polluted: true } } },
  { reason: { nested: ["deep"] } },
];

function statusOk(status: number): boolean {
  return status >= 400 && status < 500;
}

describe("bad input never gets a 500", () => {
  it("answers every malformed body on every POST route with a 4xx and a dotted error code", async ({ expect }) => {
    const id = uniqueId("target");
    await api("POST", "/v1/definitions", {
      workflows: [
        oneStepWorkflow(id, "a", {
          ref: "ask",
          action: {
            kind: "human",
            implementation: { prompt_template: "?", input_schema: { type: "object", required: ["ok"] } },
          },
        }),
      ],
    });
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    const runId: string = started.json.run_id;
    const run = await waitForRun(runId, (view) => view.gates.length > 0);
    const gateId: string = run.gates[0].gate_id;
    const routes = [
      "/v1/definitions",
      "/v1/plans",
      `/v1/workflows/${id}/runs`,
      `/v1/workflows/${uniqueId("missing")}/runs`,
      `/v1/runs/${runId}/gates/${gateId}`,
      `/v1/runs/${runId}/gates/gate_999`,
      `/v1/runs/${runId}/approve`,
      `/v1/runs/${runId}/resume`,
      `/v1/runs/${runId}/redrive`,
      "/v1/runs/run_nope/cancel",
    ];
    for (const route of routes) {
      for (const body of MALFORMED) {
        const response = await api("POST", route, typeof body === "string" ? body : body);
        const label = `POST ${route} ${typeof body === "string" ? body : JSON.stringify(body)}`;
        if (response.status < 400) {
          continue; // Some bodies are acceptable to some routes (e.g. {} starts a run).
        }
        expect(statusOk(response.status), `${label} → ${response.status} ${JSON.stringify(response.json)}`).toBe(true);
        expect(response.json.error.code, label).toMatch(/^[a-z][a-z0-9_]*(\.[a-z0-9_]+)+$/);
      }
    }
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    // The run survived all of it: its gate still answers.
    const answered = await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: true } });
    expect(answered.status).toBe(200);
    expect((await waitForRun(runId)).status).toBe("completed");
  });
});

/** POSTs a raw text body (JSON by default) and reads the answer. */
async function post(
  path: string,
  text: string,
  contentType = "application/json",
): Promise<{ status: number; json: any }> {
  const response = await exports.default.fetch(`http://trellis.test${path}`, {
    method: "POST",
    headers: { "authorization": `Bearer ${TOKEN}`, "content-type": contentType },
    body: text,
  });
  const body = await response.text();
  return { status: response.status, json: body ? JSON.parse(body) : null };
}

/** `levels` arrays nested around `leaf`, as JSON text (built without recursion). */
function nestedArrays(levels: number, leaf = '"leaf"'): string {
  return `${"[".repeat(levels)}${leaf}${"]".repeat(levels)}`;
}

/** `levels` JSON Schemas nested through `items`, as JSON text. */
function nestedSchema(levels: number): string {
  let schema = '{"type":"array"}';
  for (let level = 1; level < levels; level++) {
    schema = `{"type":"array","items":${schema}}`;
  }
  return schema;
}

/** A workflow whose one node waits at a human gate that takes any object, then outputs the answer. */
async function gatedRun(): Promise<{ runId: string; gateId: string; workflowId: string }> {
  const workflowId = uniqueId("limits");
  const registered = await api("POST", "/v1/definitions", {
    workflows: [
      {
        id: workflowId,
        nodes: {
          ask: {
            task: {
              steps: [
                {
                  ref: "ask",
                  action: { kind: "human", implementation: { prompt_template: "?", input_schema: { type: "object" } } },
                  output_mapping: { "output.answer": "$.response" },
                },
              ],
            },
            output_mapping: { "output.answer": "$.answer" },
          },
        },
      },
    ],
  });
  if (registered.status !== 201) {
    throw new Error(JSON.stringify(registered.json));
  }
  const started = await api("POST", `/v1/workflows/${workflowId}/runs`, { input: {} });
  const runId: string = started.json.run_id;
  const run = await waitForRun(runId, (view) => view.gates?.length > 0);
  return { runId, gateId: run.gates[0].gate_id, workflowId };
}

function expectLimitError(
  expect: ExpectStatic,
  response: { status: number; json: any },
  code: string,
  path: string | null,
  label: string,
): void {
  expect(response.status, `${label}: ${JSON.stringify(response.json)}`).toBe(400);
  expect(response.json.error.code, label).toBe(code);
  if (path !== null) {
    expect(
      response.json.error.details.map((detail: { path: string }) => detail.path),
      label,
    ).toContain(path);
  }
}

describe("text limits: a lone UTF-16 surrogate in any body field", () => {
  it("is a 400 request.invalid_text naming its path, in run input, idempotency keys, gate answers, cancel reasons, definitions and YAML", async ({
    expect,
  }) => {
    const { runId, gateId, workflowId } = await gatedRun();
    const lone = "\ud800";
    const cases: [string, unknown, string][] = [
      [`/v1/workflows/${workflowId}/runs`, { input: { name: `a${lone}b` } }, "input.name"],
      [`/v1/workflows/${workflowId}/runs`, { input: { list: ["ok", "\udc00"] } }, "input.list.1"],
      [`/v1/workflows/${workflowId}/runs`, { input: {}, idempotency_key: `key-${lone}` }, "idempotency_key"],
      [`/v1/workflows/${workflowId}/runs`, { input: { [`k${lone}`]: 1 } }, "input.k\\ud800"],
      [`/v1/runs/${runId}/gates/${gateId}`, { response: { note: lone } }, "response.note"],
      [`/v1/runs/${runId}/gates/${gateId}`, { response: {}, responder: `ada${lone}` }, "responder"],
      [`/v1/runs/${runId}/cancel`, { reason: `stop ${lone}` }, "reason"],
      [`/v1/runs/${runId}/approve`, { approved_steps: [lone] }, "approved_steps.0"],
      [
        "/v1/definitions",
        { workflows: [{ id: uniqueId("sur"), description: lone, nodes: { a: { task: { steps: [] } } } }] },
        "workflows.0.description",
      ],
      [
        "/v1/definitions",
        {
          actions: [
            { id: uniqueId("sur"), kind: "context", implementation: { updates: [{ path: "x", expr: `'${lone}'` }] } },
          ],
        },
        "actions.0.implementation.updates.0.expr",
      ],
    ];
    for (const [route, body, path] of cases) {
      // JSON.stringify writes a lone surrogate as the escape `\ud800`, as a client would send it.
      const text = JSON.stringify(body);
      expect(text).toMatch(/\\ud[89a-f][0-9a-f]{2}/);
      expectLimitError(expect, await post(route, text), "request.invalid_text", path, `POST ${route} ${text}`);
    }
    const yaml = `workflows:\n  - id: ${uniqueId("yaml")}\n    description: "bad \\ud800 text"\n    nodes: {}\n`;
    expectLimitError(
      expect,
      await post("/v1/definitions", yaml, "application/yaml"),
      "request.invalid_text",
      "workflows.0.description",
      "YAML",
    );

    // Nothing was recorded: the gate is still open and the run still completes.
    const answered = await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: true } });
    expect(answered.status).toBe(200);
    expect(await waitForRun(runId)).toMatchObject({ status: "completed", output: { answer: { ok: true } } });
  });

  it("refuses __proto__ as a key anywhere in a body (400 request.reserved_key), so no copy can swap a prototype", async ({
    expect,
  }) => {
    const { workflowId } = await gatedRun();
    const text = '{"input":{"a":{"__proto__":{"polluted":true}}}}';
    expectLimitError(
      expect,
      await post(`/v1/workflows/${workflowId}/runs`, text),
      "request.reserved_key",
      "input.a.__proto__",
      "run input",
    );
    const yaml = `workflows:\n  - id: ${uniqueId("proto")}\n    nodes:\n      __proto__: { task: { steps: [] } }\n`;
    expectLimitError(
      expect,
      await post("/v1/definitions", yaml, "application/yaml"),
      "request.reserved_key",
      "workflows.0.nodes.__proto__",
      "YAML",
    );
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });
});

describe(`depth limit: bodies nested deeper than ${MAX_BODY_DEPTH} levels`, () => {
  it("are a 400 request.too_deep at every route that takes a body, before anything else reads them", async ({
    expect,
  }) => {
    const { runId, gateId, workflowId } = await gatedRun();
    // 65 levels: the body, then 64 nested arrays inside it; the 65th level is at `<field>.0.0…` (63 times).
    const deep = (field: string) => `{"${field}":${nestedArrays(MAX_BODY_DEPTH)}}`;
    const routes: [string, string][] = [
      ["/v1/definitions", deep("workflows")],
      [`/v1/workflows/${workflowId}/runs`, deep("input")],
      [`/v1/runs/${runId}/gates/${gateId}`, deep("response")],
      [`/v1/runs/${runId}/cancel`, deep("reason")],
      ...(["pause", "resume", "redrive", "approve"] as const).map((control): [string, string] => [
        `/v1/runs/${runId}/${control}`,
        deep("x"),
      ]),
    ];
    for (const [route, text] of routes) {
      expectLimitError(
        expect,
        await post(route, text),
        "request.too_deep",
        `${text.slice(2, text.indexOf('"', 2))}${".0".repeat(MAX_BODY_DEPTH - 1)}`,
        route,
      );
    }
    // Deeper still, as the findings sent them: 3,000 levels of run input used to be accepted (201) and
    // break the run for good; 4,000 (an 8 KB body) used to be a 500 at runs, definitions and gates.
    for (const levels of [3_000, 4_000, 500_000]) {
      for (const [route, field] of [
        [`/v1/workflows/${workflowId}/runs`, "input"],
        ["/v1/definitions", "workflows"],
        [`/v1/runs/${runId}/gates/${gateId}`, "response"],
      ] as const) {
        expectLimitError(
          expect,
          await post(route, `{"${field}":${nestedArrays(levels)}}`),
          "request.too_deep",
          null,
          `${levels} levels at ${route}`,
        );
      }
    }
    // The 3,000-level start that used to be accepted creates no run now (its idempotency key names none).
    const keyed = await post(
      `/v1/workflows/${workflowId}/runs`,
      `{"input":${nestedArrays(3_000)},"idempotency_key":"deep-3000"}`,
    );
    expectLimitError(expect, keyed, "request.too_deep", null, "3,000 levels with a key");
    expect((await api("GET", `/v1/runs/${await runIdFor(`${workflowId}\ndeep-3000`)}`)).json.error.code).toBe(
      "run.not_found",
    );
    // A YAML body is measured on its token tree before it is composed.
    const yaml = `workflows: ${nestedArrays(2_000, "x")}\n`;
    expectLimitError(expect, await post("/v1/definitions", yaml, "text/yaml"), "request.too_deep", "", "YAML");
    const blockYaml = `workflows:\n${Array.from({ length: 100 }, (_, level) => `${"  ".repeat(level)}- `).join("\n")}x\n`;
    expectLimitError(
      expect,
      await post("/v1/definitions", blockYaml, "application/yaml"),
      "request.too_deep",
      "",
      "block YAML",
    );

    // None of it touched the run: its gate is still open and it completes.
    expect((await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: true } })).status).toBe(200);
    expect((await waitForRun(runId)).status).toBe("completed");
  });

  it(`accepts exactly ${MAX_BODY_DEPTH} levels, and the whole engine handles them: JSON Schema, CEL, JSONPath, gates, the journal`, async ({
    expect,
  }) => {
    const workflowId = uniqueId("deep");
    // A definition at the limit: levels 1–3 are the bundle, its array and the action; its `requires` schema nests 61 objects.
    const schema = nestedSchema(MAX_BODY_DEPTH - 3);
    const deepSchemaAction = `{"id":"${workflowId}-schema","kind":"context","requires":${schema},"implementation":{"updates":[{"path":"x","expr":"1"}]}}`;
    const over = `{"actions":[{"id":"${workflowId}-x","kind":"context","requires":{"not":${schema}},"implementation":{"updates":[]}}]}`;
    expectLimitError(expect, await post("/v1/definitions", over), "request.too_deep", null, "one level over");
    const bundle = {
      workflows: [
        {
          id: workflowId,
          input_schema: {
            type: "object",
            required: ["a"],
            properties: { a: { $ref: "#/$defs/nest" } },
            $defs: { nest: { anyOf: [{ type: "string" }, { type: "array", items: { $ref: "#/$defs/nest" } }] } },
          },
          nodes: {
            copy: {
              when: "size(input.a) == 1",
              input_mapping: { v: "$.input.a" },
              task: {
                steps: [
                  {
                    ref: "s",
                    action: { kind: "context", implementation: { updates: [{ path: "copy", expr: "input.v" }] } },
                    output_mapping: { "output.copy": "$.copy" },
                  },
                ],
              },
              output_mapping: { "output.copy": "$.copy", "output.leaves": "$..[?@ == 'leaf']" },
            },
            ask: {
              depends_on: ["copy"],
              task: {
                steps: [
                  {
                    ref: "ask",
                    action: {
                      kind: "human",
                      implementation: { prompt_template: "?", input_schema: { type: "object" } },
                    },
                    output_mapping: { "output.answer": "$.response" },
                  },
                ],
              },
              output_mapping: { "output.answer": "$.answer" },
            },
          },
        },
      ],
    };
    const text = JSON.stringify(bundle).replace(/^\{/, `{"actions":[${deepSchemaAction}],`);
    const registered = await post("/v1/definitions", text);
    expect(registered.status, JSON.stringify(registered.json)).toBe(201);
    expect((await api("GET", `/v1/actions/${workflowId}-schema`)).status).toBe(200);

    // The body is level 1, `input` level 2, `a` level 3: 62 more arrays reach the limit.
    const input = nestedArrays(MAX_BODY_DEPTH - 2);
    const started = await post(`/v1/workflows/${workflowId}/runs`, `{"input":{"a":${input}},"idempotency_key":"deep"}`);
    expect(started.status, JSON.stringify(started.json)).toBe(201);
    const runId: string = started.json.run_id;
    const waiting = await waitForRun(runId, (view) => view.gates?.length > 0 || TERMINAL.has(view.status));
    expect(waiting.status, JSON.stringify(waiting)).toBe("waiting");
    const answer = `{"response":{"deep":${nestedArrays(MAX_BODY_DEPTH - 2)}}}`;
    const answered = await post(`/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, answer);
    expect(answered.status, JSON.stringify(answered.json)).toBe(200);

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(JSON.stringify(run.output.copy)).toBe(input);
    expect(run.output.leaves).toEqual(["leaf"]);
    expect(JSON.stringify(run.output.answer)).toBe(`{"deep":${nestedArrays(MAX_BODY_DEPTH - 2)}}`);
    const journal = await api("GET", `/v1/runs/${runId}/journal`);
    expect(journal.status).toBe(200);
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect((await verifyJournal(journal.json.entries, jwks, { requireAttestation: true })).ok).toBe(true);
    // The same key and the same deep request find the same run.
    expect(
      (await post(`/v1/workflows/${workflowId}/runs`, `{"input":{"a":${input}},"idempotency_key":"deep"}`)).status,
    ).toBe(200);
  });
});
