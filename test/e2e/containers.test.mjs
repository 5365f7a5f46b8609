// The container path against `wrangler dev` (real workerd, production rules),
// in local mode: scripts/e2e.mjs (or helpers.mjs, run alone) starts the shell
// server and sets CONTAINER_MODE=local. Also a measurement, not a threshold:
// the latency of a trivial command through the whole path, printed as
// `containers: …` on stdout.
import assert from "node:assert/strict";
import { test } from "node:test";
import { register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const RUNS = 20;

/** A one-node workflow with a container bound as `container`, running `steps`. */
function workflow(/** @type {string} */ id, /** @type {unknown[]} */ steps, /** @type {string[]} */ tools = []) {
  return {
    id,
    tools,
    resources: { box: { type: "container" } },
    nodes: {
      main: { task: { steps }, resource_bindings: { container: "box" }, output_mapping: { "output.result": "$" } },
    },
  };
}

test("a shell step, a commit and an artifact run in a container under wrangler dev", async () => {
  const id = uid("e2e-box");
  await register({
    workflows: [
      workflow(
        id,
        [
          {
            ref: "init",
            action: {
              kind: "shell",
              implementation: { command_template: "git init -q -b main . && printf '%s\\n' {{who}} > who.txt" },
            },
          },
          {
            ref: "commit",
            action: { kind: "tool", implementation: { tool: "git_commit" } },
            input_mapping: { message: "add who" },
            output_mapping: { "output.commit": "$.commit" },
          },
          {
            ref: "save",
            action: { kind: "tool", implementation: { tool: "write_artifact" } },
            input_mapping: { name: "who.txt", path: "who.txt" },
            output_mapping: { "output.size": "$.size" },
          },
          {
            ref: "show",
            action: { kind: "tool", implementation: { tool: "read_artifact" } },
            input_mapping: { name: "who.txt" },
            output_mapping: { "output.content": "$.content" },
          },
        ],
        ["tool:git_commit", "tool:write_artifact", "tool:read_artifact"],
      ),
    ],
  });
  const who = "me; touch pwned";
  const started = await startRun(id, { input: { who } });
  assert.equal(started.status, 201, show(started));
  const run = await waitForRun(started.json.run_id, { intervalMs: 20 });
  assert.equal(run.status, "completed", JSON.stringify(run.error));
  assert.match(run.output.result.commit, /^[0-9a-f]{40}$/);
  assert.equal(run.output.result.content, `${who}\n`);
  assert.equal(run.output.result.size, who.length + 1);
});

test(`containers: a trivial command through the whole path (${RUNS} runs, timed)`, async () => {
  const id = uid("e2e-true");
  await register({
    workflows: [
      workflow(id, [
        {
          ref: "t",
          action: { kind: "shell", implementation: { command_template: "true" } },
          output_mapping: { "output.exec_ms": "$.duration_ms" },
        },
      ]),
    ],
  });
  /** @type {number[]} */
  const wall = [];
  /** @type {number[]} */
  const coordinator = [];
  /** @type {number[]} */
  const exec = [];
  for (let i = 0; i < RUNS + 1; i++) {
    const t0 = performance.now();
    const started = await startRun(id, { input: {} });
    assert.equal(started.status, 201, show(started));
    const run = await waitForRun(started.json.run_id, { intervalMs: 2 });
    const elapsed = performance.now() - t0;
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    if (i === 0) {
      continue;
    } // the first run warms up the Durable Objects
    wall.push(elapsed);
    coordinator.push(Date.parse(run.updated_at) - Date.parse(run.created_at));
    exec.push(run.output.result.exec_ms);
  }
  console.log(
    `containers: shell_true_run n=${RUNS} wall_p50=${pct(wall, 50)}ms wall_p90=${pct(wall, 90)}ms run_p50=${pct(coordinator, 50)}ms exec_p50=${pct(exec, 50)}ms`,
  );
});

function pct(/** @type {number[]} */ values, /** @type {number} */ p) {
  const sorted = [...values].sort((a, b) => a - b);
  return Math.round(sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] ?? NaN);
}
