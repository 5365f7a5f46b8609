import { describe, it } from "vitest";
import { MAX_VALUE_BYTES } from "../../blobs/offload.ts";
import { MAX_HTTP_RESPONSE_BYTES } from "../../executor/actions/http.ts";
import { cappedFetch, MAX_RESPONSE_BYTES } from "../../executor/capped-fetch.ts";
import { api, uniqueId, httpTarget, hits, runWorkflow } from "./helpers.ts";

function httpStep(url: string, extra: Record<string, unknown> = {}, step: Record<string, unknown> = {}) {
  return {
    ref: "call",
    action: { kind: "http", implementation: { method: "GET", url_template: url }, ...extra },
    output_mapping: { "output.status": "$.status", "output.body": "$.body" },
    ...step,
  };
}

/** Runs the steps as the one task of a fresh workflow, with `node`'s fields on its node. */
function runSteps(steps: unknown[], input: unknown = {}, node: Record<string, unknown> = {}): Promise<any> {
  const id = uniqueId("http");
  return runWorkflow(
    { id, nodes: { main: { task: { steps }, output_mapping: { "output.result": "$" }, ...node } } },
    input,
  );
}

const RETRY = { execution: { retry_policy: { max_attempts: 4, initial_delay_ms: 10, max_delay_ms: 50 } } };

describe("the http action", () => {
  it("succeeds after an endpoint answers 503 twice, retrying only inside the step", async ({ expect }) => {
    const key = uniqueId("flaky");
    const run = await runSteps([httpStep(`${httpTarget()}/flaky/${key}?fail=2`, RETRY)]);
    expect(run.status).toBe("completed");
    expect(run.output.result).toEqual({ status: 200, body: { ok: true, attempts: 3 } });
    expect(await hits(key)).toBe(3);
    expect(run.nodes.main.attempts).toBe(1);
  });

  it("fails at once on 404 without retrying", async ({ expect }) => {
    const key = uniqueId("missing");
    const run = await runSteps([httpStep(`${httpTarget()}/status/404/${key}`, RETRY)]);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "http.status", node: "main", step: "call" });
    expect(run.error.message).toMatch(/answered 404/);
    expect(await hits(key)).toBe(1);
  });

  it("honours Retry-After between attempts", async ({ expect }) => {
    const key = uniqueId("after");
    const started = Date.now();
    const run = await runSteps([httpStep(`${httpTarget()}/flaky/${key}?fail=1&status=429&retry_after=1`, RETRY)]);
    expect(run.status).toBe("completed");
    expect(Date.now() - started).toBeGreaterThanOrEqual(1000);
  });

  it("records the error in state._errors and goes on when the step says continue", async ({ expect }) => {
    const key = uniqueId("cont");
    const run = await runSteps(
      [
        httpStep(`${httpTarget()}/status/500/${key}`, {}, { on_failure: "continue", output_mapping: {} }),
        {
          ref: "after",
          action: { kind: "context", implementation: { updates: [{ path: "ran", expr: "true" }] } },
          output_mapping: { "output.ran": "$.ran" },
        },
      ],
      {},
      { output_mapping: { "output.result": "$" } },
    );
    expect(run.status).toBe("completed");
    expect(run.output.result.ran).toBe(true);
    const errors = await api("GET", `/v1/runs/${run.run_id}/journal`);
    const completed = errors.json.entries.find((entry: { kind: string }) => entry.kind === "task.completed");
    expect(completed.body.output).toEqual({ ran: true });
  });

  it("renders url, headers and a JSON body from the input, url-encoding values", async ({ expect }) => {
    const run = await runSteps(
      [
        httpStep(
          `${httpTarget()}/echo?q={{q}}`,
          {},
          {
            action: {
              kind: "http",
              implementation: {
                method: "POST",
                url_template: `${httpTarget()}/echo?q={{q}}`,
                headers: { "x-trace": "t-{{id}}" },
                body_template: '{"id": {{json id}}, "tags": {{json tags}} }',
              },
            },
          },
        ),
      ],
      { q: "a b&c", id: 7, tags: ["x", "y"] },
    );
    expect(run.status).toBe("completed");
    const body = run.output.result.body;
    expect(body.query.q).toBe("a b&c");
    expect(body.headers["x-trace"]).toBe("t-7");
    expect(body.headers["content-type"]).toBe("application/json");
    expect(body.body).toEqual({ id: 7, tags: ["x", "y"] });
  });

  it("times out a slow call as a retryable failure and retries the whole task by the node's retry policy", async ({
    expect,
  }) => {
    const key = uniqueId("slow");
    const run = await runSteps(
      [httpStep(`${httpTarget()}/slow/${key}?ms=2000`, { execution: { timeout_ms: 100 } }, { on_failure: "retry" })],
      {},
      { retry: { max_attempts: 2, initial_delay_ms: 10 } },
    );
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("action.timeout");
    expect(run.nodes.main.attempts).toBe(2);
    expect(await hits(key)).toBe(2);
  });

  it("checks the action input against requires before calling", async ({ expect }) => {
    const key = uniqueId("req");
    const run = await runSteps([
      httpStep(
        `${httpTarget()}/mark/${key}`,
        { requires: { type: "object", required: ["user_id"] } },
        { input_mapping: { other: 1 } },
      ),
    ]);
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("action.invalid_input");
    expect(await hits(key)).toBe(0);
  });
});

describe("limits", () => {
  it("keeps a large task output as blobs, and fails one over the largest value with task.output_too_large", async ({
    expect,
  }) => {
    // A string of 1,000,000 characters, copied into `copies` members of the output.
    const copies = (n: number) => ({
      ref: "big",
      action: {
        kind: "context",
        implementation: { updates: Array.from({ length: n }, (_, i) => ({ path: `c${i}`, expr: "input.s" })) },
      },
      output_mapping: { "output.copies": "$" },
    });
    const input = { s: "x".repeat(1_000_000) };
    const kept = await runSteps([copies(2)], input);
    expect(kept.status, JSON.stringify(kept.error)).toBe("completed");
    expect(Object.keys(kept.output.result.copies)).toEqual(["c0", "c1"]);
    expect(kept.output.result.copies.c0).toEqual(kept.output.result.copies.c1);
    expect(kept.output.result.copies.c0).toMatchObject({ size: 1_000_002 });
    const over = await runSteps([copies(Math.ceil(MAX_VALUE_BYTES / 1_000_000) + 1)], input);
    expect(over.status).toBe("failed");
    expect(over.error.code).toBe("task.output_too_large");
  });
});

describe("the http action's response budget", () => {
  for (const chunked of [false, true]) {
    it(`fails with http.response_too_large, not retried, when a peer answers more than ${MAX_HTTP_RESPONSE_BYTES} bytes${chunked ? " without a Content-Length" : ""}`, async ({
      expect,
    }) => {
      const key = uniqueId("big");
      const run = await runSteps([
        httpStep(
          `${httpTarget()}/big?key=${key}&bytes=${MAX_HTTP_RESPONSE_BYTES + 1}${chunked ? "&chunked=1" : ""}`,
          RETRY,
        ),
      ]);
      expect(run.status).toBe("failed");
      expect(run.error).toMatchObject({ code: "http.response_too_large", step: "call" });
      expect(await hits(key)).toBe(1);
    });
  }

  it("reads a body of exactly the limit, which the task's output keeps as a blob", async ({ expect }) => {
    const run = await runSteps([
      httpStep(
        `${httpTarget()}/big?bytes=${MAX_HTTP_RESPONSE_BYTES}&chunked=1`,
        {},
        { output_mapping: { "output.body": "$.body" } },
      ),
    ]);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    // The body's JSON: the text in quotes.
    expect(run.output.result.body).toMatchObject({ size: MAX_HTTP_RESPONSE_BYTES + 2 });
  });
});

describe("the response cap of the llm and mcp actions (bodies read by their SDKs)", () => {
  it("errors a body that passes the cap while it is read, and passes smaller ones through whole", async ({
    expect,
  }) => {
    const fetchOf = (bytes: number) =>
      cappedFetch(
        () => Promise.resolve(new Response("x".repeat(bytes), { status: 200, headers: { "x-kept": "yes" } })),
        1000,
      );
    const small = await fetchOf(1000)("http://peer.test/");
    expect(small.headers.get("x-kept")).toBe("yes");
    expect((await small.text()).length).toBe(1000);
    await expect((await fetchOf(1001)("http://peer.test/")).text()).rejects.toThrow(/larger than 1000 bytes/);
    expect(MAX_RESPONSE_BYTES).toBeGreaterThan(MAX_HTTP_RESPONSE_BYTES);
  });
});
