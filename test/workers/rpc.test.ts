import { exports } from "cloudflare:workers";
import { it } from "vitest";
import type { TrellisApi } from "../../src/rpc.ts";
import { uniqueId, waitForRun } from "./helpers.ts";

it("offers the same operations over Workers RPC, with errors as data", async ({ expect }) => {
  // The generated RPC stub type is too deep for tsc over recursive JSON types; the methods return plain data.
  const rpc = exports.TrellisApi as unknown as TrellisApi;
  const id = uniqueId("rpc");
  const registered = await rpc.registerDefinitions({
    workflows: [{ id, nodes: { a: { task: { steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } }, output_mapping: { "output.n": "$.n" } }] }, output_mapping: { "output.n": "$.n" } } } }],
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
