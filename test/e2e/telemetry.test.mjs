// Runs exported as OpenTelemetry traces under wrangler dev (production workerd: no code
// generation), to the local OTLP receiver, which decodes them with OpenTelemetry's own
// protobuf definitions (scripts/lib/otlp-receiver.mjs; docs/telemetry.md).
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { api, env, register, show, uid, waitForRun } from "./helpers.mjs";

/** The spans the receiver got for `runId`, once the run span is among them (15 s at most). */
async function spansOf(/** @type {string} */ runId) {
  const { otlp } = await env();
  assert.ok(otlp, "the suite runs with an OTLP receiver (TRELLIS_OTLP_URL)");
  const deadline = Date.now() + 15_000;
  for (;;) {
    const { spans } = await (await fetch(`${otlp}/spans?run_id=${runId}`)).json();
    if (spans.some((/** @type {any} */ span) => span.name.startsWith("run "))) {
      return spans;
    }
    assert.ok(Date.now() < deadline, `no run span for ${runId}: ${JSON.stringify(spans)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

describe("a run as a trace, under wrangler dev", () => {
  test("an http step's run is exported: run → node → GET, in the caller's trace", async () => {
    const { target } = await env();
    const id = uid("otel");
    await register({
      workflows: [
        {
          id,
          nodes: {
            call: {
              task: {
                steps: [
                  {
                    ref: "get",
                    action: { kind: "http", implementation: { method: "GET", url_template: `${target}/echo` } },
                  },
                ],
              },
            },
          },
        },
      ],
    });
    const traceId = "0af7651916cd43dd8448eb211c80319c";
    const started = await api("POST", `/v1/workflows/${id}/runs`, {
      body: { input: {} },
      headers: { traceparent: `00-${traceId}-b7ad6b7169203331-01` },
    });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    assert.equal((await waitForRun(runId)).status, "completed");

    const spans = await spansOf(runId);
    const byName = new Map(spans.map((/** @type {any} */ span) => [span.name, span]));
    const run = byName.get(`run ${id}`);
    const node = byName.get("node call");
    const get = byName.get("GET");
    assert.equal(spans.length, 3, JSON.stringify(spans));
    assert.ok(run && node && get);
    assert.deepEqual(new Set(spans.map((/** @type {any} */ span) => span.traceId)), new Set([traceId]));
    assert.equal(run.parentSpanId, "b7ad6b7169203331");
    assert.equal(node.parentSpanId, run.spanId);
    assert.equal(get.parentSpanId, node.spanId);
    assert.equal(get.attributes["http.request.method"], "GET");
    assert.equal(get.attributes["url.full"], `${target}/echo`);
    assert.equal(get.attributes["http.response.status_code"], 200);
    assert.equal(run.attributes["trellis.run.outcome"], "completed");
  });
});
