// The `http` action against a real local peer (scripts/lib/http-target.mjs),
// from real workerd: retries on 5xx, no retry on 4xx.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

/**
 * A one-node workflow whose only step calls `url` with GET and maps the response
 * body's `attempts` to the run output.
 * @param {string} id
 * @param {string} url
 */
function httpWorkflow(id, url) {
  return {
    id,
    nodes: {
      call: {
        task: {
          id: `${id}-task`,
          steps: [
            {
              ref: "call",
              action: {
                id: `${id}-call`,
                kind: "http",
                implementation: { method: "GET", url_template: url, response: "json" },
                execution: { timeout_ms: 10_000, retry_policy: { max_attempts: 4, initial_delay_ms: 10 } },
              },
              output_mapping: { "output.status": "$.status", "output.attempts": "$.body.attempts" },
            },
          ],
        },
        output_mapping: { "output.status": "$.status", "output.attempts": "$.attempts" },
      },
    },
  };
}

/** How many requests the HTTP target counted under `key`. */
async function hits(/** @type {string} */ key) {
  const { target } = await env();
  const res = await fetch(`${target}/hits/${encodeURIComponent(key)}`);
  return /** @type {{ count: number }} */ (await res.json()).count;
}

describe("http action", () => {
  test("retries a flaky target (two 503s) and completes", async () => {
    const { target } = await env();
    const id = uid("flaky");
    const key = uid("k");
    await register({ workflows: [httpWorkflow(id, `${target}/flaky/${key}?fail=2`)] });
    const started = await startRun(id, { input: {} });
    assert.equal(started.status, 201, show(started));
    const run = await waitForRun(started.json.run_id);
    assert.equal(run.status, "completed", `run: ${JSON.stringify(run)}`);
    assert.deepEqual(run.output, { status: 200, attempts: 3 });
    assert.equal(await hits(key), 3, "two failures and one success");
  });

  test("a 404 fails the run without retrying", async () => {
    const { target } = await env();
    const id = uid("notfound");
    const key = uid("k");
    await register({ workflows: [httpWorkflow(id, `${target}/status/404?key=${key}`)] });
    const started = await startRun(id, { input: {} });
    assert.equal(started.status, 201, show(started));
    const run = await waitForRun(started.json.run_id);
    assert.equal(run.status, "failed", `run: ${JSON.stringify(run)}`);
    assert.equal(typeof run.error?.code, "string", `a failed run carries error.code: ${JSON.stringify(run)}`);
    assert.equal(run.nodes?.call?.status, "failed", JSON.stringify(run.nodes));
    assert.equal(run.nodes.call.attempts, 1, "the node is not re-dispatched");
    assert.equal(await hits(key), 1, "the target was called exactly once");
  });
});
