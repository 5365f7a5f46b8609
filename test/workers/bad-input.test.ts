import { describe, it } from "vitest";
import { api, uniqueId, waitForRun } from "./helpers.ts";

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
    await api("POST", "/v1/definitions", { workflows: [{ id, nodes: { a: { task: { steps: [{ ref: "ask", action: { kind: "human", implementation: { prompt_template: "?", input_schema: { type: "object", required: ["ok"] } } } }] } } } }] });
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    const runId: string = started.json.run_id;
    const run = await waitForRun(runId, (view) => view.gates.length > 0);
    const gateId: string = run.gates[0].gate_id;
    const routes = [
      "/v1/definitions",
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
