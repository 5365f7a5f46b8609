// A measurement, not a threshold: a 50-node chain of `context` tasks (node n
// depends on node n-1), timed from POST to `completed`. Prints
// `chain50: total=…ms per_node=…ms` on stdout.
import assert from "node:assert/strict";
import { test } from "node:test";
import { register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const LENGTH = 50;

test(`chain${LENGTH}: a ${LENGTH}-node chain completes (timed)`, async () => {
  const id = uid("chain");
  const taskId = `${id}-inc`;
  const task = {
    id: taskId,
    steps: [
      {
        ref: "inc",
        action: {
          id: `${id}-inc-action`,
          kind: "context",
          implementation: { updates: [{ path: "v", expr: "input.v + 1" }] },
        },
        input_mapping: { v: "$.input.v" },
        output_mapping: { "output.v": "$.v" },
      },
    ],
  };
  /** @type {Record<string, any>} */
  const nodes = {};
  for (let n = 0; n < LENGTH; n++) {
    nodes[`n${n}`] = {
      task: taskId,
      ...(n > 0 ? { depends_on: [`n${n - 1}`] } : {}),
      input_mapping: { v: n === 0 ? "$.input.v" : `$.state.n${n - 1}.v` },
      ...(n === LENGTH - 1 ? { output_mapping: { "output.v": "$.v" } } : {}),
    };
  }
  await register({ tasks: [task], workflows: [{ id, max_parallel: 10, nodes }] });

  const t0 = performance.now();
  const started = await startRun(id, { input: { v: 0 } });
  assert.equal(started.status, 201, show(started));
  const run = await waitForRun(started.json.run_id, { timeoutMs: 180_000, intervalMs: 50 });
  const total = performance.now() - t0;
  assert.equal(run.status, "completed", `run: ${JSON.stringify(run).slice(0, 4000)}`);
  assert.deepEqual(run.output, { v: LENGTH });
  const line = `chain${LENGTH}: total=${total.toFixed(0)}ms per_node=${(total / LENGTH).toFixed(1)}ms`;
  console.log(line);
});
