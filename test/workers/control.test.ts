import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import { TOKEN, api, uniqueId, waitForRun, httpTarget, journal, verified, startWorkflow } from "./helpers.ts";

const contextTask = (expr: string) => ({
  steps: [
    {
      ref: "s",
      action: { kind: "context", implementation: { updates: [{ path: "v", expr }] } },
      output_mapping: { "output.v": "$.v" },
    },
  ],
});
const callTask = (url: string, onFailure = "abort") => ({
  steps: [
    {
      ref: "call",
      action: { kind: "http", implementation: { method: "GET", url_template: url } },
      output_mapping: { "output.body": "$.body" },
      on_failure: onFailure,
    },
  ],
});

describe("task retries", () => {
  it("re-dispatches a task that fails twice with a retryable error and completes with 3 attempts on record", async ({
    expect,
  }) => {
    const key = uniqueId("flaky");
    const runId = await startWorkflow({
      id: uniqueId("retry"),
      nodes: {
        main: {
          task: callTask(`${httpTarget()}/flaky/${key}?fail=2`, "retry"),
          retry: { max_attempts: 3, initial_delay_ms: 20 },
        },
      },
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.nodes.main.attempts).toBe(3);
    const entries = await journal(runId);
    expect(entries.filter((entry) => entry.kind === "task.dispatched").map((entry) => entry.body.attempt)).toEqual([
      1, 2, 3,
    ]);
    expect(entries.filter((entry) => entry.kind === "task.retry_scheduled")).toHaveLength(2);
    expect(await verified(runId)).toBe(true);
  });

  it("does not retry a non-retryable failure", async ({ expect }) => {
    const key = uniqueId("gone");
    const runId = await startWorkflow({
      id: uniqueId("noretry"),
      nodes: {
        main: {
          task: callTask(`${httpTarget()}/status/404/${key}`, "abort"),
          retry: { max_attempts: 5, initial_delay_ms: 10 },
        },
      },
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.nodes.main.attempts).toBe(1);
  });

  it("fails an attempt past its node timeout_ms as retryable and retries it", async ({ expect }) => {
    const key = uniqueId("slow");
    const runId = await startWorkflow({
      id: uniqueId("timeout"),
      nodes: {
        main: {
          task: callTask(`${httpTarget()}/slow/${key}?ms=3000`),
          timeout_ms: 150,
          retry: { max_attempts: 2, initial_delay_ms: 10 },
        },
      },
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("task.timeout");
    expect(run.nodes.main.attempts).toBe(2);
  });

  it("fails a run past its own timeout_ms", async ({ expect }) => {
    const runId = await startWorkflow({
      id: uniqueId("runtimeout"),
      timeout_ms: 200,
      nodes: { main: { task: callTask(`${httpTarget()}/slow/${uniqueId("k")}?ms=3000`) } },
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("run.timeout");
    expect(run.nodes.main.status).toBe("cancelled");
    expect(await verified(runId)).toBe(true);
  });
});

describe("pause, resume and redrive", () => {
  it("dispatches nothing while paused and continues on resume", async ({ expect }) => {
    const id = uniqueId("pause");
    const runId = await startWorkflow({
      id,
      nodes: {
        first: { task: callTask(`${httpTarget()}/slow/${uniqueId("k")}?ms=300`) },
        second: { task: contextTask("2"), depends_on: ["first"] },
      },
    });
    await waitForRun(runId, (run) => run.nodes.first.status === "running");
    const paused = await api("POST", `/v1/runs/${runId}/pause`);
    expect(paused.status).toBe(200);
    expect(paused.json.status).toBe("paused");
    await waitForRun(runId, (run) => run.nodes.first.status === "completed");
    await new Promise((resolve) => setTimeout(resolve, 200));
    const still = (await api("GET", `/v1/runs/${runId}`)).json;
    expect(still.status).toBe("paused");
    expect(still.nodes.second.status).toBe("pending");
    expect((await api("POST", `/v1/runs/${runId}/pause`)).status).toBe(409);
    const resumed = await api("POST", `/v1/runs/${runId}/resume`);
    expect(resumed.json.status).toBe("running");
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(await verified(runId)).toBe(true);
  });

  it("a run paused while queued for a delayed start resumes into queued and starts when due", async ({ expect }) => {
    const runId = await startWorkflow(
      { id: uniqueId("pause-queued"), nodes: { main: { task: contextTask("1") } } },
      { input: {}, delay_ms: 1_500 },
    );
    const paused = await api("POST", `/v1/runs/${runId}/pause`);
    expect(paused.json.status).toBe("paused");
    expect(paused.json.controls).toEqual(["cancel", "resume"]);
    const resumed = await api("POST", `/v1/runs/${runId}/resume`);
    expect(resumed.json.status).toBe("queued");
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const moves = (await journal(runId))
      .filter((entry) => entry.kind === "run.status")
      .map((entry) => `${entry.body.from}→${entry.body.to}`);
    expect(moves).toEqual(["drafting→queued", "queued→paused", "paused→queued", "queued→running", "running→completed"]);
    const running = (await journal(runId)).find((entry) => entry.kind === "run.status" && entry.body.to === "running");
    expect(Date.parse(String(running?.at))).toBeGreaterThanOrEqual(Date.parse(run.start_at));
  });

  it("a run paused while queued stays paused past its start_at, and runs once resumed", async ({ expect }) => {
    const runId = await startWorkflow(
      { id: uniqueId("pause-past"), nodes: { main: { task: contextTask("1") } } },
      { input: {}, delay_ms: 1_000 },
    );
    expect((await api("POST", `/v1/runs/${runId}/pause`)).json.status).toBe("paused");
    await new Promise((resolve) => setTimeout(resolve, 1_500));
    const still = (await api("GET", `/v1/runs/${runId}`)).json;
    expect(still.status).toBe("paused");
    expect(still.nodes.main.status).toBe("pending");
    expect((await api("POST", `/v1/runs/${runId}/resume`)).json.status).toBe("running");
    expect((await waitForRun(runId)).status).toBe("completed");
  });

  it("redrives a failed run from its failed node, keeping completed results, in the same journal", async ({
    expect,
  }) => {
    const key = uniqueId("once");
    const firstKey = uniqueId("first");
    const runId = await startWorkflow({
      id: uniqueId("redrive"),
      nodes: {
        first: { task: callTask(`${httpTarget()}/mark/${firstKey}`) },
        flaky: {
          task: callTask(`${httpTarget()}/flaky/${key}?fail=1`),
          depends_on: ["first"],
          output_mapping: { "output.ok": "$.body.ok" },
        },
      },
    });
    const failed = await waitForRun(runId);
    expect(failed.status).toBe("failed");
    expect(failed.error).toMatchObject({ code: "http.status", node: "flaky" });
    expect((await api("POST", `/v1/runs/${runId}/resume`)).status).toBe(409);
    const redriven = await api("POST", `/v1/runs/${runId}/redrive`);
    expect(redriven.status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ ok: true });
    const hits = (await (await fetch(`${httpTarget()}/hits/${firstKey}`)).json()) as { count: number };
    expect(hits.count).toBe(1);
    const kinds = (await journal(runId)).map((entry) => entry.kind);
    expect(kinds.filter((kind) => kind === "attest")).toHaveLength(2);
    expect(kinds[kinds.indexOf("attest") + 1]).toBe("run.redriven");
    expect(await verified(runId)).toBe(true);
    expect((await api("POST", `/v1/runs/${runId}/redrive`)).json.error.code).toBe("run.terminal");
  });

  it("keeps a run created with mode approval in drafting until approved", async ({ expect }) => {
    const runId = await startWorkflow(
      { id: uniqueId("approve"), nodes: { main: { task: contextTask("1") } } },
      { input: {}, mode: "approval" },
    );
    await new Promise((resolve) => setTimeout(resolve, 100));
    const drafted = (await api("GET", `/v1/runs/${runId}`)).json;
    expect(drafted.status).toBe("drafting");
    // The view lists the controls a drafted run accepts.
    expect(drafted.controls).toEqual(["cancel", "approve"]);
    const approved = await api("POST", `/v1/runs/${runId}/approve`);
    // Its one task is pure: the approval's own event may run it to the end.
    expect(["running", "completed"]).toContain(approved.json.status);
    expect((await waitForRun(runId)).status).toBe("completed");
    expect((await api("POST", `/v1/runs/${runId}/approve`)).status).toBe(409);
  });
  it("keeps an approval run with a delayed start in drafting until approved, then queued until due", async ({
    expect,
  }) => {
    const runId = await startWorkflow(
      { id: uniqueId("approve-later"), nodes: { main: { task: contextTask("1") } } },
      { input: {}, mode: "approval", delay_ms: 1_000 },
    );
    expect((await api("GET", `/v1/runs/${runId}`)).json.status).toBe("drafting");
    const approved = await api("POST", `/v1/runs/${runId}/approve`);
    expect(approved.json.status).toBe("queued");
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    const running = (await journal(runId)).find((entry) => entry.kind === "run.status" && entry.body.to === "running");
    expect(Date.parse(String(running?.at))).toBeGreaterThanOrEqual(Date.parse(run.start_at));
  });
});

describe("events", () => {
  it("streams every journal entry as Server-Sent Events and resumes after Last-Event-ID", async ({ expect }) => {
    const runId = await startWorkflow({
      id: uniqueId("sse"),
      nodes: { a: { task: contextTask("1") }, b: { task: contextTask("2"), depends_on: ["a"] } },
    });
    const read = async (lastEventId?: string) => {
      const headers: Record<string, string> = { authorization: `Bearer ${TOKEN}` };
      if (lastEventId) {
        headers["last-event-id"] = lastEventId;
      }
      const response = await exports.default.fetch(`http://trellis.test/v1/runs/${runId}/events`, { headers });
      expect(response.headers.get("content-type")).toMatch(/text\/event-stream/);
      return (await response.text()).split("\n\n").filter((block) => block.includes("data:"));
    };
    const events = await read();
    const ids = events.map((block) => Number(/^id: (\d+)$/m.exec(block)?.[1]));
    expect(ids).toEqual(ids.map((_, index) => index + 1));
    expect(events.at(-1)).toMatch(/^event: attest$/m);
    const entries = await journal(runId);
    expect(events.length).toBe(entries.length);
    const rest = await read("3");
    expect(Number(/^id: (\d+)$/m.exec(rest[0] ?? "")?.[1])).toBe(4);
    expect(rest.length).toBe(entries.length - 3);
  });

  it("answers 404 for the events of an unknown run", async ({ expect }) => {
    expect((await api("GET", "/v1/runs/run_0123456789abcdef0123456789abcdef/events")).status).toBe(404);
  });
});
