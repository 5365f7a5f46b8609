import { exports } from "cloudflare:workers";
import { MAX_BODY_BYTES } from "../../lib/json-limits.ts";
import { it } from "vitest";
import type { TrellisApi } from "../../src/rpc.ts";
import { oneStepWorkflow, uniqueId, waitForRun } from "./helpers.ts";

it("offers the same operations over Workers RPC, with errors as data", async ({ expect }) => {
  // The generated RPC stub type is too deep for tsc over recursive JSON types; the methods return plain data.
  const rpc = exports.TrellisApi as unknown as TrellisApi;
  const id = uniqueId("rpc");
  const registered = await rpc.registerDefinitions({
    workflows: [
      {
        id,
        nodes: {
          a: {
            task: {
              steps: [
                {
                  ref: "s",
                  action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } },
                  output_mapping: { "output.n": "$.n" },
                },
              ],
            },
            output_mapping: { "output.n": "$.n" },
          },
        },
      },
    ],
  });
  expect(registered).toMatchObject({ ok: true, value: { created: [{ kind: "workflows", id, version: 1 }] } });

  const started = await rpc.startRun(id, { input: { n: 41 } });
  expect(started.ok).toBe(true);
  const runId = (started.ok ? started.value.run_id : null) ?? "";
  await waitForRun(runId);
  const run = await rpc.getRun(runId);
  expect(run).toMatchObject({ ok: true, value: { status: "completed", output: { n: 42 } } });
  const journal = await rpc.getJournal(runId);
  expect(journal.ok && journal.value.entries.at(-1)?.kind).toBe("attest");

  const invalid = await rpc.registerDefinitions({ workflows: [{ id: "Nope" }] });
  expect(invalid.ok).toBe(false);
  expect(!invalid.ok && invalid.error.code).toBe("definition.invalid");
  expect(!invalid.ok && invalid.error.details?.map((detail) => detail.path)).toContain("workflows.0.id");
  const missing = await rpc.getRun("run_ffffffffffffffffffffffffffffffff");
  expect(missing).toMatchObject({ ok: false, error: { code: "run.not_found", retryable: false } });
});

/** `levels` objects nested as `{ a: { a: … } }`, built without recursion. */
function nested(levels: number): Record<string, unknown> {
  let value: Record<string, unknown> = { leaf: true };
  for (let level = 1; level < levels; level++) {
    value = { a: value };
  }
  return value;
}

it("holds RPC arguments to the HTTP body limits: lone surrogates, depth, size, shared or cyclic values, wrong types", async ({
  expect,
}) => {
  const rpc = exports.TrellisApi as unknown as TrellisApi;
  const id = uniqueId("rpclimits");
  const human = { kind: "human", implementation: { prompt_template: "?", input_schema: { type: "object" } } };
  expect(
    (
      await rpc.registerDefinitions({
        workflows: [oneStepWorkflow(id, "a", { ref: "ask", action: human })],
      })
    ).ok,
  ).toBe(true);
  const started = await rpc.startRun(id, { input: {} });
  const runId = (started.ok ? started.value.run_id : null) ?? "";
  const run = await waitForRun(runId, (view) => view.gates?.length > 0);
  const gateId: string = run.gates[0].gate_id;

  const refused = (result: { ok: boolean; error?: { code: string; details?: { path: string }[] } }) =>
    result.ok ? { ok: true } : { code: result.error?.code, paths: result.error?.details?.map((detail) => detail.path) };
  const lone = "\udfff";
  expect(refused(await rpc.startRun(id, { input: { name: lone } }))).toEqual({
    code: "request.invalid_text",
    paths: ["input.name"],
  });
  expect(refused(await rpc.startRun(id, { input: {}, idempotency_key: lone }))).toEqual({
    code: "request.invalid_text",
    paths: ["idempotency_key"],
  });
  expect(
    refused(await rpc.registerDefinitions({ workflows: [{ id: uniqueId("x"), description: lone, nodes: {} }] })),
  ).toEqual({ code: "request.invalid_text", paths: ["workflows.0.description"] });
  expect(refused(await rpc.answerGate(runId, gateId, { response: { [lone]: 1 } }))).toEqual({
    code: "request.invalid_text",
    paths: ["response.\\udfff"],
  });
  expect(refused(await rpc.cancelRun(runId, `stop${lone}`))).toEqual({
    code: "request.invalid_text",
    paths: ["reason"],
  });
  expect(refused(await rpc.getRun(`run_${lone}`))).toEqual({ code: "request.invalid_text", paths: ["runId"] });

  // Deeper values (around 3,000 levels here) fail in workerd's RPC serialization itself: the call rejects before reaching Trellis.
  for (const levels of [65, 2_000]) {
    expect(refused(await rpc.startRun(id, { input: nested(levels - 1) })).code).toBe("request.too_deep");
    expect(refused(await rpc.registerDefinitions({ workflows: [nested(levels - 2)] })).code).toBe("request.too_deep");
    expect(refused(await rpc.answerGate(runId, gateId, { response: nested(levels - 1) })).code).toBe(
      "request.too_deep",
    );
  }
  expect(refused(await rpc.startRun(id, JSON.parse('{"input":{"__proto__":1}}')))).toEqual({
    code: "request.reserved_key",
    paths: ["input.__proto__"],
  });

  // Structured clone carries what JSON cannot: a cycle, and a value shared 2^40 times over.
  const cyclic: Record<string, unknown> = { name: "loop" };
  cyclic.self = cyclic;
  expect(refused(await rpc.startRun(id, { input: cyclic })).code).toBe("request.too_deep");
  let shared: unknown[] = ["x"];
  for (let level = 0; level < 40; level++) {
    shared = [shared, shared];
  }
  expect(refused(await rpc.startRun(id, { input: shared })).code).toBe("request.too_large");
  expect(refused(await rpc.startRun(id, { input: { text: "x".repeat(MAX_BODY_BYTES) } })).code).toBe(
    "request.too_large",
  );

  const wrongTypes = [
    await rpc.getRun(42 as unknown as string),
    await rpc.getRun([runId] as unknown as string),
    await rpc.getDefinition(null as unknown as string, "x"),
    await rpc.getDefinition("workflows", id, 1.5),
    await rpc.startRun({} as unknown as string, {}),
    await rpc.cancelRun(runId, { why: "x" } as unknown as string),
    await rpc.answerGate(runId, 7 as unknown as string, { response: {} }),
    await rpc.runEvents(runId, -1),
    await rpc.runEvents(runId, 0, Number.NaN),
  ];
  expect(wrongTypes.map((result) => refused(result).code)).toEqual(
    Array(wrongTypes.length).fill("request.invalid_argument"),
  );

  // None of it reached the run: its gate still answers, and it completes.
  expect((await rpc.answerGate(runId, gateId, { response: { ok: true } })).ok).toBe(true);
  expect((await waitForRun(runId)).status).toBe("completed");
});

it("starts a delayed run over RPC: queued until its start_at, then completed; both fields at once are refused as data", async ({
  expect,
}) => {
  const rpc = exports.TrellisApi as unknown as TrellisApi;
  const id = uniqueId("rpcdelay");
  const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "n", expr: "1" }] } } };
  expect((await rpc.registerDefinitions({ workflows: [oneStepWorkflow(id, "a", step)] })).ok).toBe(true);
  const started = await rpc.startRun(id, { input: {}, delay_ms: 1_000 });
  expect(started).toMatchObject({ ok: true, value: { status: "queued", created: true } });
  const runId = (started.ok ? started.value.run_id : null) ?? "";
  const queued = await rpc.getRun(runId);
  expect(queued.ok && queued.value.start_at).toEqual(expect.any(String));
  expect((await waitForRun(runId)).status).toBe("completed");

  const both = await rpc.startRun(id, { start_at: new Date(Date.now() + 1_000).toISOString(), delay_ms: 1_000 });
  expect(both.ok ? null : { code: both.error.code, paths: both.error.details?.map((detail) => detail.path) }).toEqual({
    code: "run.invalid_request",
    paths: ["delay_ms"],
  });
});
