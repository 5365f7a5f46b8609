// A wide foreach of http tasks in real workerd: the wave goes out in several
// executor calls and its journal entries are signed while the tasks wait on the
// network (docs/architecture.md, "How an event flows"). Checks the outputs, that
// every item ran exactly once, and that the journal verifies offline. Prints
// `fanout60: makespan=…ms` (a measurement, not a threshold).
import assert from "node:assert/strict";
import { test } from "node:test";
import { JournalEntry, verifyJournal } from "../../lib/journal/index.ts";
import { api, env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const ITEMS = 60;
const WAIT_MS = 100;

test(`fanout${ITEMS}: a ${ITEMS}-item foreach of http tasks completes in item order, each item once, and its journal verifies`, async () => {
  const { target } = await env();
  const id = uid("fanout");
  const key = uid("fan");
  await register({
    workflows: [
      {
        id,
        max_parallel: ITEMS,
        nodes: {
          each: {
            foreach: { items: "$.input.items", max_parallel: ITEMS },
            input_mapping: { n: "$.item" },
            task: {
              steps: [
                {
                  ref: "wait",
                  action: {
                    kind: "http",
                    implementation: { method: "GET", url_template: `${target}/slow/${key}?ms=${WAIT_MS}` },
                  },
                },
                {
                  ref: "echo",
                  action: { kind: "http", implementation: { method: "GET", url_template: `${target}/json?n={{n}}` } },
                  output_mapping: { "output.n": "$.body.n" },
                },
              ],
            },
            output_mapping: { "output.echoed": "$.n" },
          },
        },
      },
    ],
  });
  const items = Array.from({ length: ITEMS }, (_, i) => ITEMS - i); // descending: order comes from the items, not from timing
  const started = await startRun(id, { input: { items } });
  assert.equal(started.status, 201, show(started));
  const run = await waitForRun(started.json.run_id, { timeoutMs: 60_000, intervalMs: 50 });
  assert.equal(run.status, "completed", JSON.stringify(run.error));
  assert.deepEqual(run.output, { echoed: items });

  const hits = await (await fetch(`${target}/hits/${key}`)).json();
  assert.equal(hits.count, ITEMS, "each item called the peer exactly once");

  const journal = await api("GET", `/v1/runs/${run.run_id}/journal`);
  const jwks = await api("GET", "/v1/journal-keys");
  const report = await verifyJournal(journal.json.entries, jwks.json, { requireAttestation: true });
  assert.equal(report.ok, true, JSON.stringify(report));
  // Each entry checked against the journal's schema, then counted by kind.
  const entries = journal.json.entries.map((/** @type {unknown} */ entry) => JournalEntry.parse(entry));
  assert.equal(entries.filter((entry) => entry.kind === "task.dispatched").length, ITEMS, "one dispatch per item");
  assert.equal(entries.filter((entry) => entry.kind === "task.completed").length, ITEMS);

  const makespan = Date.parse(entries.at(-1)?.at ?? "") - Date.parse(entries[0]?.at ?? "");
  // The e2e files run side by side against one wrangler dev: `npm run bench` is where the fan-out is measured.
  console.log(
    `fanout${ITEMS}: makespan=${makespan}ms (each task: a ${WAIT_MS} ms wait and an echo call; other e2e files run alongside)`,
  );
});
