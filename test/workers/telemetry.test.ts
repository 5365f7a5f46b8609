import { abortAllDurableObjects, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { exports } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { childSpanSymbol, spanIdOf } from "../../telemetry/ids.ts";
import { stubOf } from "./durable-helpers.ts";
import { TEST_SECRETS } from "../secrets.ts";
import {
  callOf,
  httpStep,
  httpTarget,
  journal,
  llmServer,
  register,
  registerWorkflow,
  start,
  TOKEN,
  uniqueId,
  waitForRun,
} from "./helpers.ts";
import { accept, refuse, requestsOf, spansOf, treeOf, untilRunSpan, type ReceivedSpan } from "./telemetry-helpers.ts";

/**
 * Runs exported as OpenTelemetry traces (docs/telemetry.md) to the local OTLP
 * receiver, which decodes each request with OpenTelemetry's own protobuf
 * definitions (scripts/lib/otlp-receiver.mjs).
 */

/** A credential a caller put in a URL's query: the step record keeps the URL without it, and so does the trace. */
const QUERY_CREDENTIAL = "query-credential-4c1f9e27b8";

const PROMPT = {
  messages: [{ role: "user", template: "Summarise {{topic}}" }],
  produces: { type: "object", required: ["summary"], properties: { summary: { type: "string" } } },
};

/** A workflow of two nodes: `ask` (an llm step), then `act` (an http step and a tool step). */
function threeKindsBundle(ids: { workflow: string; prompt: string; model: string }) {
  const model = {
    id: ids.model,
    provider: "openai-compatible",
    model_id: "local-echo",
    base_url: `${llmServer()}/v1`,
    api_key: "$env:LLM_API_KEY",
  };
  const workflow = {
    id: ids.workflow,
    tools: ["tool:write_artifact"],
    nodes: {
      ask: {
        task: {
          steps: [
            {
              ref: "summarise",
              action: { kind: "llm", implementation: { prompt: ids.prompt, model: ids.model } },
              input_mapping: { topic: "$.input.topic" },
              output_mapping: { "output.summary": "$.summary" },
            },
          ],
        },
        output_mapping: { "state.summary": "$.summary" },
      },
      act: {
        depends_on: ["ask"],
        task: {
          steps: [
            {
              ref: "call",
              action: {
                kind: "http",
                implementation: {
                  method: "GET",
                  url_template: "$env:HTTP_TARGET_URL/echo?token={{token}}",
                  headers: { "x-api-key": "$env:LLM_API_KEY" },
                },
              },
              input_mapping: { token: QUERY_CREDENTIAL },
            },
            {
              ref: "save",
              action: { kind: "tool", implementation: { tool: "write_artifact" } },
              input_mapping: { name: "summary.txt", content: "the tides, summarised" },
            },
          ],
        },
      },
    },
  };
  return { workflows: [workflow], prompts: [{ id: ids.prompt, ...PROMPT }], models: [model] };
}

function only(spans: readonly ReceivedSpan[], predicate: (span: ReceivedSpan) => boolean): ReceivedSpan {
  const found = spans.filter(predicate);
  if (found.length !== 1) {
    throw new Error(`expected one span, found ${found.length}: ${treeOf(spans)}`);
  }
  return found[0] as ReceivedSpan;
}

describe("a run is exported as a trace over OTLP/HTTP", () => {
  it("a run of llm, http and tool steps becomes a run span, a span per node dispatch and one per step, in the conventions", async ({
    expect,
  }) => {
    const ids = { workflow: uniqueId("otel"), prompt: uniqueId("p"), model: uniqueId("m") };
    await register(threeKindsBundle(ids));
    const runId = await start(ids.workflow, { input: { topic: "the tides" } });
    const run = await waitForRun(runId);
    expect(run.status, JSON.stringify(run.error)).toBe("completed");

    const spans = await untilRunSpan(runId);
    console.log(`the span tree of run ${runId}:\n${treeOf(spans)}`);
    const root = only(spans, (span) => span.name === `run ${ids.workflow}`);
    const ask = only(spans, (span) => span.name === "node ask");
    const act = only(spans, (span) => span.name === "node act");
    const chat = only(spans, (span) => span.name === "chat local-echo");
    const http = only(spans, (span) => span.name === "GET");
    const tool = only(spans, (span) => span.name === "execute_tool write_artifact");
    expect(spans).toHaveLength(6);

    // One trace, derived from the run id; the tree: run → node dispatches → steps.
    const digest = new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(runId)));
    const traceId = Array.from(digest.slice(0, 16), (byte) => byte.toString(16).padStart(2, "0")).join("");
    expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([traceId]));
    expect(root.parentSpanId).toBeNull();
    expect([ask.parentSpanId, act.parentSpanId]).toEqual([root.spanId, root.spanId]);
    expect(chat.parentSpanId).toBe(ask.spanId);
    expect([http.parentSpanId, tool.parentSpanId]).toEqual([act.spanId, act.spanId]);
    expect(new Set(spans.map((span) => span.spanId)).size).toBe(6);

    // Times: the run span covers everything; each step lies inside its dispatch.
    for (const span of spans) {
      expect(span.start).toBeGreaterThanOrEqual(root.start);
      expect(span.end).toBeLessThanOrEqual(root.end);
    }
    expect(chat.start).toBeGreaterThanOrEqual(ask.start);
    expect(chat.end).toBeLessThanOrEqual(ask.end);
    expect(http.end).toBeLessThanOrEqual(tool.start);

    // trellis.* on every span; the run's outcome and status.
    for (const span of spans) {
      expect(span.attributes).toMatchObject({
        "trellis.run.id": runId,
        "trellis.workflow.id": ids.workflow,
        "trellis.workflow.version": 1,
      });
      expect(span.resource["service.name"]).toBe("trellis");
      expect(span.scope).toBe("trellis");
    }
    expect(root.attributes["trellis.run.outcome"]).toBe("completed");
    expect(root.status.code).toBe(1);
    expect(ask.attributes).toMatchObject({ "trellis.node": "ask", "trellis.attempt": 1 });

    // The GenAI conventions on the llm step, the HTTP client conventions on the http step, execute_tool on the tool.
    expect(chat.kind).toBe(3);
    expect(chat.attributes).toMatchObject({
      "gen_ai.operation.name": "chat",
      "gen_ai.provider.name": "openai-compatible",
      "gen_ai.request.model": "local-echo",
      "gen_ai.usage.input_tokens": expect.any(Number),
      "gen_ai.usage.output_tokens": expect.any(Number),
      "trellis.node": "ask",
      "trellis.step": "summarise",
      "trellis.step.status": "completed",
    });
    const completed = (await journal(runId)).find((entry) => entry.kind === "task.completed");
    expect(callOf(completed)?.tokens).toMatchObject({ input: chat.attributes["gen_ai.usage.input_tokens"] });
    expect(http.kind).toBe(3);
    expect(http.attributes).toMatchObject({
      "http.request.method": "GET",
      "url.full": `${httpTarget()}/echo`,
      "http.response.status_code": 200,
      "trellis.step": "call",
    });
    expect(tool.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "write_artifact",
      "trellis.step": "save",
    });
    expect(chat.events.map((event) => event.name)).toEqual(["attempt"]);

    // No secret anywhere in what the collector received: not the model's key, not the query's credential.
    const requests = await requestsOf(ids.workflow);
    expect(requests.length).toBeGreaterThan(0);
    for (const request of requests) {
      for (const secret of [TEST_SECRETS.LLM_API_KEY, TEST_SECRETS.OTLP_API_KEY, QUERY_CREDENTIAL]) {
        expect(request.text).not.toContain(secret);
        expect(request.raw).not.toContain(secret);
      }
    }
  });
});

/** A workflow of one http step, GETting the HTTP target's `/echo`. */
const echoWorkflow = (id: string) => ({
  id,
  nodes: { call: { task: { steps: [httpStep("get", `${httpTarget()}/echo`)] } } },
});

/** The run's export cursor in its own storage. */
function cursorOf(runId: string) {
  return runInDurableObject(
    stubOf(runId),
    (_instance, state) =>
      state.storage.sql
        .exec<{ seq: number; attempts: number; retry_at: number | null; dropped: number }>(
          "SELECT seq, attempts, retry_at, dropped FROM otel_outbox",
        )
        .toArray()[0],
  );
}

describe("the export is off the run's path, and retried", () => {
  it("a collector that is down slows and fails no run; once it is up, the alarm's retry delivers the spans", async ({
    expect,
  }) => {
    const workflow = uniqueId("otel-down");
    await registerWorkflow(echoWorkflow(workflow));
    await refuse(workflow, "reset");
    const started = Date.now();
    const runId = await start(workflow);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    // The run ended as fast as any one-step run: it never waited for the collector.
    expect(Date.now() - started).toBeLessThan(3_000);

    // The export tried, failed, and scheduled its retry on the run's alarm.
    await vi.waitUntil(async () => ((await cursorOf(runId))?.attempts ?? 0) >= 1, { timeout: 10_000 });
    const failed = await cursorOf(runId);
    expect(failed?.seq).toBe(0);
    expect(failed?.retry_at).toBeGreaterThan(started);
    expect(await spansOf(runId)).toEqual([]);

    // The collector comes back; the retry (the run's alarm) sends every span.
    expect(await accept(workflow)).toBeGreaterThanOrEqual(1);
    await vi.waitUntil(
      async () => {
        await runDurableObjectAlarm(stubOf(runId));
        return (await spansOf(runId)).length === 3;
      },
      { timeout: 15_000, interval: 500 },
    );
    const spans = await spansOf(runId);
    expect(spans.map((span) => span.name).sort()).toEqual(["GET", "node call", `run ${workflow}`].sort());
    const after = await cursorOf(runId);
    expect(after).toMatchObject({ attempts: 0, retry_at: null, dropped: 0 });
    expect(after?.seq).toBe((await journal(runId)).length);
  });

  it("exporting a journal again gives the same trace and span ids", async ({ expect }) => {
    const workflow = uniqueId("otel-again");
    await registerWorkflow(echoWorkflow(workflow));
    const runId = await start(workflow);
    await waitForRun(runId);
    const first = await untilRunSpan(runId);
    expect(first).toHaveLength(3);

    // Forget what was exported, and restart the object: its next export folds the whole journal again.
    await runInDurableObject(stubOf(runId), (_instance, state) => {
      state.storage.sql.exec("DELETE FROM otel_outbox");
    });
    await abortAllDurableObjects();
    await vi.waitUntil(
      async () => {
        await runDurableObjectAlarm(stubOf(runId));
        return (await spansOf(runId)).length === 6;
      },
      { timeout: 15_000, interval: 500 },
    );
    const again = (await spansOf(runId)).slice(3);
    const ids = (spans: ReceivedSpan[]) =>
      spans.map(({ traceId, spanId, parentSpanId, name, start, end }) => ({
        traceId,
        spanId,
        parentSpanId,
        name,
        start,
        end,
      }));
    expect(ids(again)).toEqual(ids(first));
  });
});

describe("trace context", () => {
  it("a start with a traceparent joins that trace: the run span is a child of the caller's span", async ({
    expect,
  }) => {
    const workflow = uniqueId("otel-join");
    await registerWorkflow(echoWorkflow(workflow));
    const traceId = "4bf92f3577b34da6a3ce929d0e0e4736";
    const callerSpan = "00f067aa0ba902b7";
    const response = await exports.default.fetch(`http://trellis.test/v1/workflows/${workflow}/runs`, {
      method: "POST",
      headers: {
        "authorization": `Bearer ${TOKEN}`,
        "content-type": "application/json",
        "traceparent": `00-${traceId}-${callerSpan}-01`,
      },
      body: JSON.stringify({ input: {} }),
    });
    expect(response.status).toBe(201);
    const runId = String(((await response.json()) as { run_id: string }).run_id);
    await waitForRun(runId);
    const spans = await untilRunSpan(runId);
    expect(new Set(spans.map((span) => span.traceId))).toEqual(new Set([traceId]));
    const root = only(spans, (span) => span.name === `run ${workflow}`);
    expect(root.parentSpanId).toBe(callerSpan);
    // Recorded where it cannot be lost: on run.created (signed) and so on every export.
    const created = (await journal(runId))[0];
    expect(created?.body.traceparent).toBe(`00-${traceId}-${callerSpan}-01`);

    // An invalid traceparent is ignored: the run has a trace of its own.
    const other = await exports.default.fetch(`http://trellis.test/v1/workflows/${workflow}/runs`, {
      method: "POST",
      headers: { "authorization": `Bearer ${TOKEN}`, "content-type": "application/json", "traceparent": "00-xyz-01" },
      body: JSON.stringify({ input: {} }),
    });
    expect(other.status).toBe(201);
    const otherRun = String(((await other.json()) as { run_id: string }).run_id);
    expect((await journal(otherRun))[0]?.body.traceparent).toBeUndefined();
  });

  it("a child run's span nests under its parent's span for it, under the step that started it, in the parent's trace", async ({
    expect,
  }) => {
    const child = uniqueId("otel-child");
    const parent = uniqueId("otel-parent");
    await register({
      workflows: [
        echoWorkflow(child),
        {
          id: parent,
          nodes: {
            delegate: {
              task: { steps: [{ ref: "sub", action: { kind: "workflow", implementation: { workflow: child } } }] },
            },
          },
        },
      ],
    });
    const parentRun = await start(parent);
    expect((await waitForRun(parentRun)).status).toBe("completed");
    const parentSpans = await untilRunSpan(parentRun);
    const childRunId = String(
      (await journal(parentRun)).find((entry) => entry.kind === "child.started")?.body.child_run_id,
    );
    const childSpans = await untilRunSpan(childRunId);
    console.log(`the span tree of run ${parentRun} and its child:\n${treeOf([...parentSpans, ...childSpans])}`);

    const step = only(
      parentSpans,
      (span) => span.name === "workflow sub" && span.attributes["trellis.step.status"] === "suspended",
    );
    const wait = only(parentSpans, (span) => span.name === `workflow ${child}@1`);
    const childRoot = only(childSpans, (span) => span.name === `run ${child}`);
    expect(wait.parentSpanId).toBe(step.spanId);
    expect(wait.spanId).toBe(await spanIdOf(parentRun, childSpanSymbol(childRunId)));
    expect(childRoot.parentSpanId).toBe(wait.spanId);
    expect(new Set([...parentSpans, ...childSpans].map((span) => span.traceId)).size).toBe(1);
    expect(childRoot.attributes["trellis.parent_run.id"]).toBe(parentRun);
  });
});
