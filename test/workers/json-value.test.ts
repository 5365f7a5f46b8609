import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { JsonValue, TaskResult } from "../../schemas/index.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { oneStepWorkflow, uniqueId } from "./helpers.ts";

/**
 * `JsonValue` is the schema of every free-form JSON field (inputs, outputs,
 * journal bodies). It walks a value once and, when something in it is not
 * JSON, names the path to that thing.
 */
describe("JsonValue", () => {
  it("accepts JSON, nested, including objects without a prototype", ({ expect }) => {
    const bare = Object.assign(Object.create(null) as Record<string, unknown>, { a: 1 });
    for (const value of ["s", 0, -1.5, true, false, null, [], {}, { a: [1, { b: null }], c: "d" }, bare]) {
      expect(JsonValue.safeParse(value).success).toBe(true);
    }
  });

  it("rejects what JSON cannot hold, with the path to it", ({ expect }) => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    const cases: [unknown, (string | number)[], RegExp][] = [
      [undefined, [], /undefined/],
      [Number.NaN, [], /NaN/],
      [{ a: [1, 2, Number.POSITIVE_INFINITY] }, ["a", 2], /Infinity/],
      [{ when: new Date(0) }, ["when"], /Date/],
      [{ m: new Map() }, ["m"], /Map/],
      [[{ f: () => 1 }], [0, "f"], /function/],
      [{ n: 1n }, ["n"], /bigint/],
      [cyclic, ["self"], /cyclic/],
    ];
    for (const [value, path, message] of cases) {
      const parsed = JsonValue.safeParse(value);
      expect(parsed.success).toBe(false);
      expect(parsed.error?.issues[0]?.path).toEqual(path);
      expect(parsed.error?.issues[0]?.message).toMatch(message);
    }
  });

  it("reports the full path inside an enclosing schema", ({ expect }) => {
    const parsed = TaskResult.safeParse({
      token_id: "t",
      success: true,
      output: { rows: [{ at: new Date(0) }] },
      metrics: { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
    });
    expect(parsed.error?.issues[0]?.path).toEqual(["output", "rows", 0, "at"]);
  });

  it("turns a non-JSON run input sent over RPC into run.invalid_request with its path", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const id = uniqueId("json-rpc");
    await rpc.registerDefinitions({
      workflows: [
        oneStepWorkflow(id, "a", {
          ref: "s",
          action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } },
        }),
      ],
    });
    const started = await rpc.startRun(id, { input: { when: new Date(0) } } as unknown as Parameters<
      TrellisApi["startRun"]
    >[1]);
    expect(started).toMatchObject({ ok: false, error: { code: "run.invalid_request", retryable: false } });
    expect(!started.ok && started.error.details?.map((detail) => detail.path)).toEqual(["input.when"]);
  });
});
