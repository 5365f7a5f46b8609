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
 * The fan-out's peer (scripts/lib/wait-peer.mjs) runs in a process of its own
 * and logs when each request arrived and when its answer left; with the
 * journal's timestamps (the same clock) that splits the fan-out's overhead
 * into phases, printed under the table. The peer floor row is 100
 * concurrent requests from Node straight to that same peer.
 *
 * Output format (kept stable so later work can compare):
 *   scenario | metric | value | unit | ratio | ratio meaning
 *
 * Options: BENCH_REPEATS=N (default 3); `--profile[=fanout|chain|foreach]`
 * also records a CPU profile of workerd (through wrangler's inspector) during
 * that scenario's measured runs (default: the fan-out), writes it to a
 * .cpuprofile file (open it in Chrome DevTools) and prints the functions with
 * the most samples.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ACTION_WAIT_MS, benchClient, benchWorkflows, startWaitPeerProcess } from "./lib/bench-client.mjs";
import { measurePlans } from "./lib/bench-plans.mjs";
import { startWranglerDev } from "./lib/wrangler-dev.mjs";

const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
/** `--profile` or `--profile=<fanout|chain|foreach>`: the scenario whose measured runs are profiled. */
const PROFILE = (() => {
  const flag = process.argv.find((arg) => arg === "--profile" || arg.startsWith("--profile="));
  return flag === undefined ? null : flag === "--profile" ? "fanout" : flag.slice("--profile=".length);
})();
if (PROFILE !== null && !["fanout", "chain", "foreach"].includes(PROFILE)) {
  console.error(`--profile takes fanout, chain or foreach, not ${PROFILE}`);
  process.exit(2);
}

const token = `bench-${randomBytes(8).toString("hex")}`;
/** @type {ReturnType<typeof benchClient>["timedRun"]} */
let timedRun = () => Promise.reject(new Error("no client yet"));

/**
 * One unmeasured run (it warms the code paths and connections this scenario
 * uses), then REPEATS measured runs; `around` wraps each measured run (the
 * fan-out reads its peer's log there). Returns the median duration.
 */
async function median(workflowId, input, around = (run) => run()) {
  await timedRun(workflowId, input);
  const samples = [];
  for (let i = 0; i < REPEATS; i += 1) {
    samples.push((await around(() => timedRun(workflowId, input))).ms);
  }
  samples.sort((a, b) => a - b);
  spreads.set(workflowId, `${samples[0]}–${samples.at(-1)}`);
  return samples[Math.floor(samples.length / 2)];
}

/** min–max of each scenario's samples, printed under the table: a median alone hides noise. */
const spreads = new Map();

async function main() {
  const peer = await startWaitPeerProcess();
  const signingKey = generateKeyPairSync("ed25519")
    .privateKey.export({ type: "pkcs8", format: "der" })
    .toString("base64");
  const dev = await startWranglerDev({ vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } });
  const client = benchClient(dev.url, token);
  timedRun = client.timedRun;
  /** Per measured fan-out run: milliseconds spent in each phase. */
  const phases = { dispatch: [], spread: [], tail: [] };
  const profiler = PROFILE ? await Profiler.attach(dev.inspectorPort) : null;
  /** @type {unknown} */
  let profile = null;
  /** Runs `measure`, under the profiler when `scenario` is the one asked for. */
  const profiled = async (/** @type {string} */ scenario, /** @type {() => Promise<number>} */ measure) => {
    if (profiler === null || scenario !== PROFILE) {
      return measure();
    }
    await profiler.start();
    const ms = await measure();
    profile = await profiler.stop();
    return ms;
  };
  try {
    const flows = benchWorkflows("bench", peer.url);
    await client.api("POST", "/v1/definitions", { workflows: Object.values(flows).map((flow) => flow.workflow) });
    // Warm the isolate and the catalog before measuring.
    await timedRun("bench-single");

    const rows = await measureScenarios(flows, peer.url, profiled, phases);
    // Agent plans: N independent 300 ms steps against the same steps chained (docs/plans.md).
    rows.push(...(await measurePlans(client, peer.url, REPEATS)));
    printSummary(rows, phases);
    if (profile) {
      reportProfile(profile, `${PROFILE}`, REPEATS);
    }
  } finally {
    profiler?.close();
    await dev.stop();
    peer.stop();
  }
}

/**
 * Measures every scenario, in order, and gives the table's rows.
 * @param {ReturnType<typeof benchWorkflows>} flows
 * @param {string} peerUrl
 * @param {(scenario: string, measure: () => Promise<number>) => Promise<number>} profiled
 * @param {{ dispatch: number[], spread: number[], tail: number[] }} phases
 */
async function measureScenarios(flows, peerUrl, profiled, phases) {
  const rows = [];
  const single = await median("bench-single");
  rows.push(["single node", "total", single, "ms", "", ""]);
  const chainMs = await profiled("chain", () => median("bench-chain-200"));
  const perNode = chainMs / 200;
  rows.push([
    "chain of 200 no-op tasks",
    "per node",
    perNode,
    "ms/node",
    perNode / single,
    "per-node cost ÷ a whole 1-node run",
  ]);
  const floor = await peerFloor(peerUrl);
  rows.push([
    `peer floor: 100 × ${ACTION_WAIT_MS} ms GETs from Node`,
    "makespan",
    floor,
    "ms",
    floor / ACTION_WAIT_MS,
    "the local peer's own overhead, no Trellis",
  ]);
  const fanout = await measureFanout(flows, peerUrl, profiled, phases);
  rows.push([
    `fan-out 100 × ${ACTION_WAIT_MS} ms action`,
    "makespan",
    fanout,
    "ms",
    fanout / ACTION_WAIT_MS,
    `makespan ÷ ${ACTION_WAIT_MS} ms (1.0 is ideal)`,
  ]);
  const foreach = await profiled("foreach", () => median("bench-foreach-1000", flows.foreach.input));
  rows.push([
    "foreach 1,000 no-op items",
    "total",
    foreach,
    "ms",
    foreach / 1000 / perNode,
    "per-item cost ÷ chain per-node cost",
  ]);
  return rows;
}

/**
 * The fan-out's median makespan, noting for each measured run when its
 * requests reached the peer (from the peer's log) in `phases`.
 * @param {ReturnType<typeof benchWorkflows>} flows
 * @param {string} peerUrl
 * @param {(scenario: string, measure: () => Promise<number>) => Promise<number>} profiled
 * @param {{ dispatch: number[], spread: number[], tail: number[] }} phases
 */
function measureFanout(flows, peerUrl, profiled, phases) {
  return profiled("fanout", () =>
    median("bench-fanout-100", flows.fanout.input, async (run) => {
      await fetch(`${peerUrl}/log/clear`, { method: "POST" });
      const result = await run();
      const log = await (await fetch(`${peerUrl}/log`)).json();
      const at = (kind) => result.entries.filter((entry) => entry.kind === kind).map((entry) => Date.parse(entry.at));
      phases.dispatch.push(Math.min(...log.arrived) - at("run.created")[0]);
      phases.spread.push(Math.max(...log.arrived) - Math.min(...log.arrived));
      phases.tail.push(Math.max(...at("task.completed")) - Math.max(...log.answered));
      return result;
    }),
  );
}

/**
 * Prints the table, each scenario's spread and the fan-out's phases.
 * @param {unknown[][]} rows
 * @param {{ dispatch: number[], spread: number[], tail: number[] }} phases
 */
function printSummary(rows, phases) {
  printTable(rows);
  console.log(
    `\nspread (min–max ms of the ${REPEATS} samples): ${[...spreads].map(([id, spread]) => `${id} ${spread}`).join(", ")}`,
  );
  const mid = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
  console.log(
    `fan-out phases (median ms): run.created → first request at the peer ${mid(phases.dispatch)}; ` +
      `first → last request ${mid(phases.spread)}; last answer → last result journaled ${mid(phases.tail)}`,
  );
}

/** A CPU profile of workerd through wrangler's inspector (Chrome DevTools Protocol). */
class Profiler {
  /** @param {number} port */
  static async attach(port) {
    const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
    // wrangler's inspector proxy accepts local origins only; `ws` lets us send one.
    const { default: WebSocket } = await import("ws");
    const socket = new WebSocket(targets[0].webSocketDebuggerUrl, { headers: { origin: "http://127.0.0.1" } });
    await new Promise((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    const profiler = new Profiler(socket);
    await profiler.send("Profiler.enable");
    await profiler.send("Profiler.setSamplingInterval", { interval: 100 });
    return profiler;
  }

  /** @param {import("ws").WebSocket} socket */
  constructor(socket) {
    this.socket = socket;
    this.nextId = 1;
    this.pending = new Map();
    socket.on("message", (data) => {
      const message = JSON.parse(String(data));
      this.pending.get(message.id)?.(message.result ?? {});
      this.pending.delete(message.id);
    });
  }

  send(method, params = {}) {
    const id = this.nextId++;
    this.socket.send(JSON.stringify({ id, method, params }));
    return new Promise((resolve) => this.pending.set(id, resolve));
  }

  start() {
    return this.send("Profiler.start");
  }

  async stop() {
    return (await this.send("Profiler.stop")).profile;
  }

  close() {
    this.socket.close();
  }
}

/** Writes the profile and prints the busy time per run and the functions with the most samples. */
function reportProfile(profile, scenario, runs) {
  const file = join(tmpdir(), `trellis-bench-${scenario}-${Date.now()}.cpuprofile`);
  writeFileSync(file, JSON.stringify(profile));
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const samples = new Map();
  let busyUs = 0;
  profile.samples.forEach((id, index) => {
    const delta = profile.timeDeltas[index] ?? 0;
    const frame = byId.get(id).callFrame;
    const where = frame.url ? ` ${frame.url.split("/").at(-1)}:${frame.lineNumber + 1}` : "";
    const name = `${frame.functionName || "(anonymous)"}${where}`;
    samples.set(name, (samples.get(name) ?? 0) + 1);
    // Gaps between samples longer than 5 ms are idle time the sampler skipped.
    if (frame.functionName !== "(idle)" && delta < 5_000) {
      busyUs += delta;
    }
  });
  const total = profile.samples.length;
  const top = [...samples].sort((a, b) => b[1] - a[1]).slice(0, 12);
  console.log(`\nCPU profile of the measured ${scenario} runs: ${file}`);
  console.log(`workerd busy ≈ ${(busyUs / 1000 / runs).toFixed(0)} ms per run; most samples (self time):`);
  for (const [name, count] of top) {
    console.log(`  ${((count / total) * 100).toFixed(1).padStart(5)}%  ${name}`);
  }
}

/** 100 concurrent requests straight to the peer: what the fan-out could at best achieve here. */
async function peerFloor(peerUrl) {
  const samples = [];
  for (let i = 0; i <= REPEATS; i += 1) {
    const started = Date.now();
    await Promise.all(
      Array.from({ length: 100 }, async () => (await fetch(`${peerUrl}/wait?ms=${ACTION_WAIT_MS}`)).text()),
    );
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
