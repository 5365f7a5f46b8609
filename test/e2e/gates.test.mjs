// A human gate and a sub-workflow through real workerd: the run waits without
// holding anything open, the answer resumes it, and the child's result comes back.
import assert from "node:assert/strict";
import { describe, test } from "node:test";
import { api, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

async function waitUntil(runId, predicate, timeoutMs = 30_000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const res = await api("GET", `/v1/runs/${runId}`);
    if (predicate(res.json)) {
      return res.json;
    }
    if (Date.now() > deadline) {
      throw new Error(`run ${runId} never matched: ${show(res)}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

describe("gates and children", () => {
  test("a gate between two steps resumes the task after a valid answer; the time from answer to resume is measured", async () => {
    const id = uid("gate");
    await register({
      workflows: [
        {
          id,
          nodes: {
            only: {
              task: {
                steps: [
                  {
                    ref: "before",
                    action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 1" }] } },
                  },
                  {
                    ref: "ask",
                    action: {
                      kind: "human",
                      implementation: {
                        prompt_template: "n is {{n}}, ok?",
                        input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
                      },
                    },
                    input_mapping: { n: "$.state.before.n" },
                  },
                  {
                    ref: "after",
                    action: {
                      kind: "context",
                      implementation: { updates: [{ path: "v", expr: "input.ok ? input.n : 0" }] },
                    },
                    input_mapping: { ok: "$.state.ask.response.ok", n: "$.state.before.n" },
                    output_mapping: { "output.v": "$.v" },
                  },
                ],
              },
              output_mapping: { "output.v": "$.v" },
            },
          },
        },
      ],
    });
    const started = await startRun(id, { input: { n: 41 } });
    assert.equal(started.status, 201, show(started));
    const waiting = await waitUntil(started.json.run_id, (run) => run.gates?.length > 0);
    assert.equal(waiting.status, "waiting");
    assert.equal(waiting.gates[0].prompt, "n is 42, ok?");
    const bad = await api("POST", `/v1/runs/${started.json.run_id}/gates/${waiting.gates[0].gate_id}`, {
      body: { response: { ok: "y" } },
    });
    assert.equal(bad.status, 400, show(bad));
    const postedAt = Date.now();
    const answered = await api("POST", `/v1/runs/${started.json.run_id}/gates/${waiting.gates[0].gate_id}`, {
      body: { response: { ok: true }, responder: "e2e" },
    });
    assert.equal(answered.status, 200, show(answered));
    const run = await waitForRun(started.json.run_id);
    assert.equal(run.status, "completed");
    assert.deepEqual(run.output, { v: 42 });
    const { entries } = (await api("GET", `/v1/runs/${started.json.run_id}/journal`)).json;
    const answer = entries.find((entry) => entry.kind === "gate.answered");
    const resumed = entries.find((entry) => entry.kind === "task.dispatched" && entry.body.resume === "after");
    assert.ok(answer && resumed, "gate.answered and a resumed dispatch are journaled");
    // The answer's own call dispatches the resumed task: measured from the client's POST.
    console.log(
      `gate_answer_to_resume: post_to_dispatch=${Date.parse(resumed.at) - postedAt}ms in_journal=${Date.parse(resumed.at) - Date.parse(answer.at)}ms`,
    );
  });

  test("a workflow node runs a child run and takes its output", async () => {
    const child = uid("child");
    const parent = uid("parent");
    await register({
      workflows: [
        {
          id: child,
          nodes: {
            x: {
              task: {
                steps: [
                  {
                    ref: "s",
                    action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n * 3" }] } },
                    output_mapping: { "output.n": "$.n" },
                  },
                ],
              },
              output_mapping: { "output.n": "$.n" },
            },
          },
        },
      ],
    });
    await register({
      workflows: [
        {
          id: parent,
          nodes: {
            call: { workflow: child, input_mapping: { n: "$.input.n" }, output_mapping: { "output.n": "$.n" } },
          },
        },
      ],
    });
    const started = await startRun(parent, { input: { n: 5 } });
    const run = await waitForRun(started.json.run_id);
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    assert.deepEqual(run.output, { n: 15 });
  });
});
