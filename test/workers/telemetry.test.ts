import { describe, it } from "vitest";
import { TEST_SECRETS } from "../secrets.ts";
import { callOf, httpTarget, journal, llmServer, register, start, uniqueId, waitForRun } from "./helpers.ts";
import { requestsOf, treeOf, untilRunSpan, type ReceivedSpan } from "./telemetry-helpers.ts";

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
