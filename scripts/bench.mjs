#!/usr/bin/env node
/**
 * `npm run bench`: measures the engine in real workerd (`wrangler dev`, with
 * production's rules) and prints one table. Not part of `npm test`: timings
 * are measurements, never assertions.
 *
 * Every time is taken from the run's own signed journal (`at` of its entries:
 * from `run.created` to the attestation), so HTTP polling does not blur it.
 * Each scenario runs once unmeasured (warm-up), then REPEATS times, and the
 * median is reported.
 *
 * Output format (kept stable so later work can compare):
 *   scenario | metric | value | unit | ratio | ratio meaning
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { startHttpTarget } from "./lib/http-target.mjs";
import { startWranglerDev } from "./lib/wrangler-dev.mjs";

const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
const ACTION_WAIT_MS = 100;

const token = `bench-${randomBytes(8).toString("hex")}`;
let baseUrl = "";

async function api(method, path, body) {
  const response = await fetch(`${baseUrl}${path}`, {
    method,
    headers: { authorization: `Bearer ${token}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status >= 400) {
    throw new Error(`${method} ${path} → ${response.status}: ${JSON.stringify(json)}`);
  }
  return json;
}

const noop = (path = "v") => ({ steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path, expr: "1" }] } } }] });

/** Starts a run and returns its duration in ms (run.created → attest), from the journal. */
async function timedRun(workflowId, input = {}) {
  const { run_id: runId } = await api("POST", `/v1/workflows/${workflowId}/runs`, { input });
  const deadline = Date.now() + 300_000;
  for (;;) {
    const run = await api("GET", `/v1/runs/${runId}`);
    if (["completed", "failed", "cancelled"].includes(run.status)) {
      if (run.status !== "completed") {
        throw new Error(`run ${runId} of ${workflowId} ended ${run.status}: ${JSON.stringify(run.error)}`);
      }
      break;
    }
    if (Date.now() > deadline) {
      throw new Error(`run ${runId} did not finish`);
    }
    // Poll gently: the timings come from the journal, and polling competes with the run for workerd.
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const { entries } = await api("GET", `/v1/runs/${runId}/journal`);
  return { ms: Date.parse(entries.at(-1).at) - Date.parse(entries[0].at), entries };
}

async function median(workflowId, input) {
  // One unmeasured run first: it warms the code paths and connections this scenario uses.
  await timedRun(workflowId, input);
  const samples = [];
  for (let i = 0; i < REPEATS; i += 1) {
    samples.push((await timedRun(workflowId, input)).ms);
  }
  samples.sort((a, b) => a - b);
  spreads.set(workflowId, `${samples[0]}–${samples.at(-1)}`);
  return samples[Math.floor(samples.length / 2)];
}

/** min–max of each scenario's samples, printed under the table: a median alone hides noise. */
const spreads = new Map();

async function main() {
  const target = await startHttpTarget({ port: 0 });
  const signingKey = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");
  const dev = await startWranglerDev({ vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } });
  baseUrl = dev.url;
  const rows = [];
  try {
    const chain = {};
    for (let i = 0; i < 200; i += 1) {
      chain[`n${i}`] = { task: noop(), ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
    }
    const wait = { steps: [{ ref: "wait", action: { kind: "http", implementation: { method: "GET", url_template: `${target.url}/slow?ms=${ACTION_WAIT_MS}` } } }] };
    await api("POST", "/v1/definitions", {
      workflows: [
        { id: "bench-single", nodes: { only: { task: noop() } } },
        { id: "bench-chain-200", nodes: chain },
        { id: "bench-fanout-100", max_parallel: 100, nodes: { each: { foreach: { items: "$.input.items", max_parallel: 100 }, task: wait } } },
        { id: "bench-foreach-1000", max_parallel: 200, nodes: { each: { foreach: { items: "$.input.items" }, task: noop() } } },
      ],
    });
    // Warm the isolate and the catalog before measuring.
    await timedRun("bench-single");

    const single = await median("bench-single");
    rows.push(["single node", "total", single, "ms", "", ""]);
    const chainMs = await median("bench-chain-200");
    const perNode = chainMs / 200;
    rows.push(["chain of 200 no-op tasks", "per node", perNode, "ms/node", perNode / single, "per-node cost ÷ a whole 1-node run"]);
    const peer = await peerFloor(target.url);
    rows.push([`peer floor: 100 × ${ACTION_WAIT_MS} ms GETs from Node`, "makespan", peer, "ms", peer / ACTION_WAIT_MS, "the local peer's own overhead, no Trellis"]);
    const fanout = await median("bench-fanout-100", { items: Array.from({ length: 100 }, (_, i) => i) });
    rows.push([`fan-out 100 × ${ACTION_WAIT_MS} ms action`, "makespan", fanout, "ms", fanout / ACTION_WAIT_MS, `makespan ÷ ${ACTION_WAIT_MS} ms (1.0 is ideal)`]);
    const foreach = await median("bench-foreach-1000", { items: Array.from({ length: 1000 }, (_, i) => i) });
    rows.push(["foreach 1,000 no-op items", "total", foreach, "ms", foreach / 1000 / perNode, "per-item cost ÷ chain per-node cost"]);
  } finally {
    await dev.stop();
    await target.close();
  }
  printTable(rows);
  console.log(`\nspread (min–max ms of the ${REPEATS} samples): ${[...spreads].map(([id, spread]) => `${id} ${spread}`).join(", ")}`);
}

/** 100 concurrent requests straight to the peer: what the fan-out could at best achieve here. */
async function peerFloor(targetUrl) {
  const samples = [];
  for (let i = 0; i <= REPEATS; i += 1) {
    const started = Date.now();
    await Promise.all(Array.from({ length: 100 }, async () => (await fetch(`${targetUrl}/slow?ms=${ACTION_WAIT_MS}`)).text()));
    samples.push(Date.now() - started);
  }
  samples.shift();
  samples.sort((a, b) => a - b);
  return samples[Math.floor(samples.length / 2)];
}

function printTable(rows) {
  const header = ["scenario", "metric", "value", "unit", "ratio", "ratio meaning"];
  const cells = rows.map(([scenario, metric, value, unit, ratio, meaning]) => [
    scenario,
    metric,
    value.toFixed(1),
    unit,
    ratio === "" ? "" : ratio.toFixed(2),
    meaning,
  ]);
  const widths = header.map((title, column) => Math.max(title.length, ...cells.map((row) => row[column].length)));
  const line = (row) => `| ${row.map((cell, column) => cell.padEnd(widths[column])).join(" | ")} |`;
  console.log(`\nTrellis benchmark (wrangler dev, median of ${REPEATS}; times from the signed journal)\n`);
  console.log(line(header));
  console.log(`|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`);
  for (const row of cells) {
    console.log(line(row));
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
