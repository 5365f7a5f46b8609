import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { finalizeResult } from "../../executor/run-task.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import { canonicalProblem, MAX_CANONICAL_DEPTH } from "../../lib/journal/canonical.ts";
import type { TaskResult } from "../../schemas/index.ts";
import { api, uniqueId, waitForRun, httpTarget, singleTaskWorkflow, hits } from "./helpers.ts";

/** Runs one http GET of `url` in a node that retries retryable failures three times. */
async function runGet(url: string): Promise<any> {
  const id = uniqueId("unsignable");
  const step = {
    ref: "call",
    action: { kind: "http", implementation: { method: "GET", url_template: url } },
    output_mapping: { "output.body": "$.body" },
  };
  const workflow = singleTaskWorkflow(id, [step]);
  const node = (workflow.nodes as Record<string, Record<string, unknown>>).main as Record<string, unknown>;
  node.retry = { max_attempts: 3, initial_delay_ms: 10 };
  const registered = await api("POST", "/v1/definitions", { workflows: [workflow] });
  if (registered.status !== 201) {
    throw new Error(JSON.stringify(registered.json));
  }
  const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
  return waitForRun(started.json.run_id);
}

describe("values that cannot be signed into the journal", () => {
  it("fails the step at once, not retryable, when a peer answers a lone surrogate; the journal still verifies its chain", async ({
    expect,
  }) => {
    const key = uniqueId("lone");
    // The target parses `s` as JSON: a list holding the string "\ud800", sent back escaped as JSON allows.
    const run = await runGet(`${httpTarget()}/json?key=${key}&s=${encodeURIComponent('["\\ud800"]')}`);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "action.unsignable_output", step: "call" });
    expect(run.error.message).toContain("lone UTF-16 surrogate");
    expect(run.nodes.main.attempts).toBe(1);
    expect(await hits(key)).toBe(1);
    const journal = (await api("GET", `/v1/runs/${run.run_id}/journal`)).json;
    const jwks = (await api("GET", "/v1/journal-keys")).json;
    expect(await verifyJournal(journal.entries, jwks, { requireAttestation: true })).toMatchObject({ ok: true });
    expect(journal.entries.map((entry: { kind: string }) => entry.kind)).not.toContain("task.timeout");
  });

  it(`fails the step when a peer answers JSON nested deeper than ${MAX_CANONICAL_DEPTH} levels`, async ({ expect }) => {
    const deep = `${"[".repeat(MAX_CANONICAL_DEPTH + 5)}1${"]".repeat(MAX_CANONICAL_DEPTH + 5)}`;
    const run = await runGet(`${httpTarget()}/json?d=${encodeURIComponent(deep)}`);
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("action.unsignable_output");
    expect(run.error.message).toContain(`nested deeper than ${MAX_CANONICAL_DEPTH} levels`);
  });

  it("finds the problem in a value of any depth without exhausting the stack", ({ expect }) => {
    let value: unknown = "leaf";
    for (let depth = 0; depth < 100_000; depth += 1) {
      value = [value];
    }
    expect(canonicalProblem(value)?.message).toBe(`nested deeper than ${MAX_CANONICAL_DEPTH} levels`);
    expect(canonicalProblem({ a: [1, { b: "ok" }] })).toBeNull();
    expect(canonicalProblem({ a: [1, { ["k\udc00"]: 1 }] })?.message).toContain("object key");
    expect(canonicalProblem({ a: Number.NaN })).toEqual({ path: "$.a", message: "NaN is not a JSON number" });
    expect(canonicalProblem({ z: "ok", a: [1, { b: Number.POSITIVE_INFINITY }] })).toEqual({
      path: "$.a[1].b",
      message: "Infinity is not a JSON number",
    });
    expect(canonicalProblem({ a: [{ b: [new Map()] }] })).toEqual({
      path: "$.a[0].b[0]",
      message: "not a plain JSON object",
    });
  });

  it("turns a result that still cannot be signed into a non-retryable failure, and makes messages well-formed", ({
    expect,
  }) => {
    const metrics = { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };
    const output: TaskResult = { token_id: "t1", success: true, output: { s: "\ud83d" }, metrics };
    expect(finalizeResult(output, [])).toMatchObject({
      success: false,
      error: { code: "task.unsignable_result", retryable: false },
    });
    const failure: TaskResult = {
      token_id: "t2",
      success: false,
      error: { code: "x.y", step: "s", message: "bad \ud800 text", retryable: true, context_snapshot: null },
      metrics,
    };
    expect(finalizeResult(failure, []).error).toMatchObject({
      code: "x.y",
      message: "bad \ufffd text",
      retryable: true,
    });
  });

  it("answers signable refusals of its own both ways a group is sent, so the coordinator applies results as they come", async ({
    expect,
  }) => {
    // A payload the executor refuses, whose problem names a key that is not well-formed text.
    const malformed = { token_id: "tok-\ud800", ["k\udc00"]: 1 };
    const group = { tasks: {}, payloads: [malformed, malformed] };
    const streamed = await new Response(await env.EXECUTOR.runTasks(group)).text();
    const answers: unknown[] = [
      ...((await env.EXECUTOR.runTaskList(group)) as unknown[]),
      ...streamed
        .split("\n")
        .filter((line) => line !== "")
        .map((line) => JSON.parse(line) as unknown),
    ];
    expect(answers).toHaveLength(4);
    for (const answer of answers) {
      expect(answer).toMatchObject({ success: false, error: { code: "executor.invalid_payload" } });
      expect(canonicalProblem(answer, MAX_CANONICAL_DEPTH)).toBeNull();
    }
  });
});
