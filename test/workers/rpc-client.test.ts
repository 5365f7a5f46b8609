import { env } from "cloudflare:workers";
import { it } from "vitest";
import type { z } from "zod";
import type { Components } from "../../client/index.ts";
import type { REQUEST_SCHEMAS, RESPONSE_SCHEMAS } from "../../src/contracts/routes.ts";
import { oneStepWorkflow, register, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Whether A and B are the same type: identical to the compiler, so an extra
 * optional field on one side counts (mutual assignability would let it pass).
 */
type Same<A, B> = (<T>() => T extends A ? 1 : 2) extends <T>() => T extends B ? 1 : 2 ? true : false;

/** The request bodies whose client type is not the zod input type (never when all match). */
type RequestMismatch = {
  [K in keyof typeof REQUEST_SCHEMAS]: Same<z.input<(typeof REQUEST_SCHEMAS)[K]>, Components[K]> extends true
    ? never
    : K;
}[keyof typeof REQUEST_SCHEMAS];

/** The responses whose client type is not the zod output type (never when all match). */
type ResponseMismatch = {
  [K in keyof typeof RESPONSE_SCHEMAS]: Same<z.output<(typeof RESPONSE_SCHEMAS)[K]>, Components[K]> extends true
    ? never
    : K;
}[keyof typeof RESPONSE_SCHEMAS];

it("has client types (client/types.ts) that are the zod schemas' types", ({ expect }) => {
  // Fails to compile, naming the component, when a generated type and its zod schema disagree.
  const requests: [RequestMismatch] extends [never] ? "all match" : RequestMismatch = "all match";
  const responses: [ResponseMismatch] extends [never] ? "all match" : ResponseMismatch = "all match";
  expect([requests, responses]).toEqual(["all match", "all match"]);
});

/** The example caller Worker (vitest.config.ts runs it beside the Worker under test). */
function caller(): Fetcher {
  if (!env.CALLER) {
    throw new Error("no CALLER binding: see vitest.config.ts");
  }
  return env.CALLER;
}

it("is called by the example caller Worker through its service binding to TrellisApi", async ({ expect }) => {
  const id = uniqueId("caller");
  const missing = await caller().fetch("http://caller/runs/missing-workflow", {
    method: "POST",
    body: JSON.stringify({}),
  });
  expect(missing.status).toBe(404);
  expect(await missing.json()).toMatchObject({ error: { code: "workflow.not_found" } });
  const step = {
    ref: "s",
    action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } },
  };
  await register({ workflows: [oneStepWorkflow(id, "a", { ...step, output_mapping: { "output.n": "$.n" } })] });
  const started = await caller().fetch(`http://caller/runs/${id}`, { method: "POST", body: JSON.stringify({ n: 1 }) });
  expect(started.status).toBe(201);
  const { run_id: runId } = await started.json<{ run_id: string }>();
  await waitForRun(runId);
  const shown = await caller().fetch(`http://caller/runs/${runId}`);
  expect(shown.status).toBe(200);
  expect(await shown.json()).toMatchObject({ run_id: runId, status: "completed", workflow: { id, version: 1 } });
});
