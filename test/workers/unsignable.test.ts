import { describe, it } from "vitest";
import { sendTaskGroup } from "../../coordinator/executor-client.ts";
import { finalizeResult } from "../../executor/run-task.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import { canonicalProblem, MAX_CANONICAL_DEPTH } from "../../lib/journal/canonical.ts";
import type { TaskPayload, TaskResult } from "../../schemas/index.ts";
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

  it("makes the coordinator journal an unsignable result that slipped past the executor as a non-retryable failure", async ({
    expect,
  }) => {
    const metrics = { duration_ms: 1, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } };
    const unsignable = (token: string) => ({ token_id: token, success: true, output: { s: "\udfff" }, metrics });
    const ways: string[] = [];
    const executor: ExecutorBinding = {
      // A group of one is a plain call, a larger one a stream of lines, or an array when no task waits
      // on I/O: all three ways are checked.
      runTask: () => {
        ways.push("runTask");
        return Promise.resolve(unsignable("tok-1"));
      },
      runTaskList: () => {
        ways.push("runTaskList");
        return Promise.resolve([unsignable("tok-1"), unsignable("tok-2")]);
      },
      runTasks: () => {
        ways.push("runTasks");
        return Promise.resolve(
          new Response(`${JSON.stringify(unsignable("tok-1"))}\n${JSON.stringify(unsignable("tok-2"))}\n`)
            .body as ReadableStream<Uint8Array>,
        );
      },
    };
    const pure = { id: "t", version: 1, steps: [] };
    const io = { id: "t", version: 1, steps: [{ ref: "get", action: { kind: "http" } }] };
    const payload = (token: string, task: unknown = pure) =>
      ({
        token_id: token,
        workflow_run_id: "run_x",
        task_id: "t",
        task_version: 1,
        task,
        input: {},
        resources: {},
        tools: [],
        timeout_ms: 1000,
        retry_attempt: 1,
      }) as unknown as TaskPayload;
    const groups = [
      [payload("tok-1")],
      [payload("tok-1"), payload("tok-2")],
      [payload("tok-1", io), payload("tok-2", io)],
    ];
    for (const payloads of groups) {
      const delivered: TaskResult[] = [];
      await sendTaskGroup(executor, payloads, async (result) => {
        delivered.push(result);
      });
      expect(delivered).toHaveLength(payloads.length);
      for (const result of delivered) {
        expect(result).toMatchObject({ success: false, error: { code: "task.unsignable_result", retryable: false } });
      }
    }
    expect(ways).toEqual(["runTask", "runTaskList", "runTasks"]);
  });
});
