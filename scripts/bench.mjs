#!/usr/bin/env node
/**
 * `npm run bench`: measures the engine in real workerd (`wrangler dev`, with
 * production's rules) and prints one table. Not part of `npm test`: timings
 * are measurements, never assertions.
 *
 * The scenarios are docs/performance.md's (scripts/lib/bench-scenarios.mjs, shared
 * with `npm run bench:ab`): a one-node run's client latency (over its event
 * stream) and where it goes, chains of 200 `context` and of 200 `http` tasks
 * (time and workerd CPU per node), a fan-out of 100 × 100 ms http calls, a
 * foreach of 1,000 no-op items, and `idle`, the CPU meter's zero. Times come
 * from the run's own signed journal (`at` of its entries: `run.created` to the
 * attestation), so HTTP polling does not blur them; CPU is the utime + stime
 * of wrangler's workerd processes over the run (scripts/lib/proc-cpu.mjs).
 * Each scenario runs once unmeasured (warm-up), then REPEATS times; the table
 * gives the median and the min–max.
 *
 * The fan-out's peer (scripts/lib/wait-peer.mjs) runs in a process of its own
 * and logs when each request arrived and when its answer left; with the
 * journal's timestamps (the same clock) that splits the fan-out's overhead
 * into phases, printed under the table. The peer floor row is 100
 * concurrent requests from Node straight to that same peer.
 *
 * After the table's scenarios: agent plans (scripts/lib/bench-plans.mjs), and
 * limits (scripts/lib/bench-limits.mjs): the http chain with a limit on every
 * call against the same chain without, and one limit object's grant rate.
 *
 * Output format (kept stable so later work can compare):
 *   scenario | metric | median | min–max | unit | note
 *
 * Then what a step costs (scripts/lib/bench-cost.mjs): for each scenario that
 * runs a run, its usage as the run's coordinator counted it (Durable Object
 * requests, Worker invocations, SQLite rows read and written, bytes stored)
 * per run and per step, priced in dollars per million steps, beside the same
 * steps on Cloudflare Workflows:
 *   scenario | meter | per run | min–max | per step | $ per million steps
 *
 * Options: BENCH_REPEATS=N (default 3); BENCH_SCENARIOS=a,b (default all of
 * ORDER, then `plans` and `limits`; a list runs only what it names);
 * BENCH_JSON=<file> also writes both tables there as JSON; `--profile[=<scenario>]` also records
 * a CPU profile of workerd (through wrangler's inspector) during that
 * scenario's measured runs (default: the fan-out), writes it to a .cpuprofile
 * file (open it in Chrome DevTools) and prints the functions with the most samples.
 * `--perf[=<scenario>]` (default: the chain) records the workerd processes with
 * Linux `perf` instead (scripts/lib/perf-record.mjs): natively, SQLite,
 * crypto, V8 and the kernel included, with JavaScript functions named. The
 * inspector's profiler overcharges calls into workerd; `perf` does not.
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { ACTION_WAIT_MS, benchClient, benchWorkflows, startWaitPeerProcess } from "./lib/bench-client.mjs";
import { measurePlans } from "./lib/bench-plans.mjs";
import { measureLimitChain, measureLimitGrants } from "./lib/bench-limits.mjs";
import { costRows, PRICES, usageOf, WORKFLOWS } from "./lib/bench-cost.mjs";
import { chooseScenarios, fmt, median, printTable, SCENARIO_NAMES } from "./lib/bench-scenarios.mjs";
import { assertPerfAvailable, perfV8Flags, reportPerf, startPerf } from "./lib/perf-record.mjs";
import { cpuMeter, TICK_MS } from "./lib/proc-cpu.mjs";
import { startWranglerDev } from "./lib/wrangler-dev.mjs";

const REPEATS = Number(process.env.BENCH_REPEATS ?? 3);
/** The scenarios measured, in this order (then agent plans and limits). */
const ORDER = "idle,single,chain,chain-http,fanout,foreach";
/** What BENCH_SCENARIOS names, or everything. */
const CHOSEN = (process.env.BENCH_SCENARIOS ?? `${ORDER},plans,limits`).split(",");
/**
 * The scenario named by `--<option>` or `--<option>=<scenario>`, `fallback` for the bare flag, null without it.
 * @param {string} option @param {string} fallback @returns {string | null}
 */
function scenarioOption(option, fallback) {
  const flag = process.argv.find((arg) => arg === `--${option}` || arg.startsWith(`--${option}=`));
  const name = flag === undefined ? null : flag === `--${option}` ? fallback : flag.slice(option.length + 3);
  if (name !== null && !SCENARIO_NAMES.includes(name)) {
    console.error(`--${option} takes one of ${SCENARIO_NAMES.join(", ")}, not ${name}`);
    process.exit(2);
  }
  return name;
}
/** The scenario whose measured runs the inspector's profiler records. */
const PROFILE = scenarioOption("profile", "fanout");
/** The scenario whose measured runs `perf` records. */
const PERF = scenarioOption("perf", "chain");
if (PERF !== null) {
  assertPerfAvailable();
}
/** Where workerd writes its jitdump for `perf inject --jit` (kept: `perf report` reads it later). */
const PERF_JIT_DIR = PERF === null ? "" : mkdtempSync(join(tmpdir(), "trellis-perf-jit-"));

const token = `bench-${randomBytes(8).toString("hex")}`;

async function main() {
  const peer = await startWaitPeerProcess();
  const signingKey = generateKeyPairSync("ed25519")
    .privateKey.export({ type: "pkcs8", format: "der" })
    .toString("base64");
  const dev = await startWranglerDev({
    vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey, USAGE_METER: "on" },
    ...(PERF === null ? {} : { v8Flags: perfV8Flags(PERF_JIT_DIR) }),
  });
  const client = benchClient(dev.url, token);
  const tree = { client, meter: cpuMeter(dev.pid), flows: benchWorkflows("bench", peer.url) };
  /** @type {string[][]} */
  const costs = [];
  const profiler = PROFILE ? await Profiler.attach(dev.inspectorPort) : null;
  try {
    await client.api("POST", "/v1/definitions", {
      workflows: Object.values(tree.flows).map((flow) => flow.workflow),
    });
    // Warm the isolate and the catalog before measuring.
    await client.timedRun(tree.flows.single.workflow.id);
    /** Per measured fan-out run: milliseconds spent in each phase. */
    const phases = { dispatch: [], spread: [], tail: [] };
    const rows = [];
    const names = ORDER.split(",").filter((name) => CHOSEN.includes(name));
    for (const scenario of chooseScenarios(names.join(","))) {
      const around = scenario.name === "fanout" ? withPeerLog(peer.url, phases) : (run) => run();
      const measured = await measureScenario(scenario, tree, around, profiler);
      rows.push(...measured.rows);
      if (measured.costs.length > 0) {
        const samples = await Promise.all(
          measured.costs.map(async (run) => ({ ...run, usage: await usageOf(dev.output, run.id) })),
        );
        costs.push(...costRows(scenario.title, samples));
      }
      if (scenario.name === "single") {
        rows.push(await peerFloor(peer.url));
      }
    }
    // Agent plans: N independent 300 ms steps against the same steps chained (docs/plans.md).
    // Limits: a limit on every call of the http chain against none; one limit object's grant rate.
    const ratioRows = [
      ...(CHOSEN.includes("plans") ? await measurePlans(client, peer.url, REPEATS) : []),
      ...(CHOSEN.includes("limits") ? await measureLimitChain(client, peer.url, REPEATS) : []),
      ...(CHOSEN.includes("limits") ? await measureLimitGrants(REPEATS) : []),
    ];
    for (const [scenario, metric, value, unit, ratio, meaning] of ratioRows) {
      rows.push([scenario, metric, fmt(value), "", unit, `${fmt(ratio)}: ${meaning}`]);
    }
    printSummary(rows, phases, tree.meter.pids.length);
    printCosts(costs);
    if (process.env.BENCH_JSON) {
      writeFileSync(process.env.BENCH_JSON, `${JSON.stringify(jsonOf(rows, costs), null, 2)}\n`);
    }
  } finally {
    profiler?.close();
    await dev.stop();
    peer.stop();
  }
}

/**
 * One unmeasured run, then REPEATS measured runs of `scenario` (each inside
 * `around`), under the profiler when it is the one asked for. Gives its rows
 * and, for the cost table, each measured run with its steps.
 * @param {ReturnType<typeof chooseScenarios>[number]} scenario
 * @param {import("./lib/bench-scenarios.mjs").Tree} tree
 * @param {(run: () => ReturnType<typeof scenario.measure>) => ReturnType<typeof scenario.measure>} around
 * @param {Profiler | null} profiler
 */
async function measureScenario(scenario, tree, around, profiler) {
  await scenario.measure(tree);
  const profiling = profiler !== null && scenario.name === PROFILE;
  if (profiling) {
    await profiler.start();
  }
  const perfFile = join(tmpdir(), `trellis-bench-${scenario.name}-${Date.now()}.perf.data`);
  const perf = scenario.name === PERF ? await startPerf(tree.meter.pids, perfFile) : null;
  /** @type {Record<string, number[]>} */
  const samples = Object.fromEntries(scenario.metrics.map((metric) => [metric.key, []]));
  /** @type {{ id: string, ms: number, cpuMs: number, steps: number }[]} */
  const costs = [];
  for (let i = 0; i < REPEATS; i += 1) {
    const { metrics, run } = await around(() => scenario.measure(tree));
    for (const metric of scenario.metrics) {
      samples[metric.key].push(metrics[metric.key]);
    }
    if (run !== undefined && scenario.steps !== undefined) {
      costs.push({ ...run, steps: scenario.steps });
    }
  }
  if (profiling) {
    reportProfile(await profiler.stop(), scenario.name, REPEATS);
  }
  if (perf !== null) {
    await perf.stop();
    reportPerf(perfFile, PERF_JIT_DIR, scenario.name, REPEATS);
  }
  const rows = scenario.metrics.map((metric) => {
    const values = samples[metric.key];
    const spread = `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}`;
    return [scenario.title, metric.label, fmt(median(values)), spread, metric.unit, ""];
  });
  return { rows, costs };
}

/** The cost table and what its dollars assume. @param {string[][]} costs */
function printCosts(costs) {
  if (costs.length === 0) {
    return;
  }
  console.log(
    `\nWhat a step costs (median of ${REPEATS}; counts from each run's coordinator, coordinator/usage.ts; ` +
      `$ = Workers Paid prices beyond the included usage, scripts/lib/bench-cost.mjs)\n`,
  );
  printTable(["scenario", "meter", "per run", "min–max", "per step", "$ per million steps"], costs);
  console.log(
    `\ncounted = requests, invocations, rows and one month of storage (the same on any machine); measured = ` +
      `Durable Object duration (the run's time, journal or client, whichever is longer, × 128 MB) and workerd's CPU (all of it, as Worker CPU: ` +
      `an upper bound), this machine's speed. Cloudflare Workflows: one request per instance, ` +
      `${WORKFLOWS.cpuMsPerStep} ms CPU and ${WORKFLOWS.bytesPerStep} bytes per step kept ` +
      `${WORKFLOWS.retentionDays} days (assumed). Client status reads are not counted.`,
  );
}

/** Both tables as JSON, with the prices the dollars used. @param {string[][]} rows @param {string[][]} costs */
function jsonOf(rows, costs) {
  const keyed = (/** @type {string[]} */ header, /** @type {string[][]} */ table) =>
    table.map((row) => Object.fromEntries(header.map((name, column) => [name, row[column]])));
  return {
    repeats: REPEATS,
    results: keyed(["scenario", "metric", "median", "range", "unit", "note"], rows),
    cost: keyed(["scenario", "meter", "perRun", "range", "perStep", "usdPerMillionSteps"], costs),
    prices: PRICES,
    workflowsAssumptions: WORKFLOWS,
  };
}

/**
 * Wraps a fan-out run: clears the peer's log before it and notes, from the
 * log and the run's journal, how long each phase took in `phases`.
 * @param {string} peerUrl
 * @param {{ dispatch: number[], spread: number[], tail: number[] }} phases
 */
function withPeerLog(peerUrl, phases) {
  return async (
    /** @type {() => Promise<{ metrics: Record<string, number>, entries?: import("./lib/bench-scenarios.mjs").JournalEntryTimes[] }>} */ run,
  ) => {
    await fetch(`${peerUrl}/log/clear`, { method: "POST" });
    const result = await run();
    const log = await (await fetch(`${peerUrl}/log`)).json();
    const entries = result.entries ?? [];
    const at = (kind) => entries.filter((entry) => entry.kind === kind).map((entry) => Date.parse(entry.at));
    phases.dispatch.push(Math.min(...log.arrived) - at("run.created")[0]);
    phases.spread.push(Math.max(...log.arrived) - Math.min(...log.arrived));
    phases.tail.push(Math.max(...at("task.completed")) - Math.max(...log.answered));
    return result;
  };
}

/**
 * Prints the table and the fan-out's phases.
 * @param {string[][]} rows
 * @param {{ dispatch: number[], spread: number[], tail: number[] }} phases
 * @param {number} processes
 */
function printSummary(rows, phases, processes) {
  console.log(
    `\nTrellis benchmark (wrangler dev, median and min–max of ${REPEATS}; times from the signed journal, ` +
      `CPU = utime+stime of ${processes} workerd processes, ${TICK_MS} ms ticks)\n`,
  );
  printTable(["scenario", "metric", "median", "min–max", "unit", "note"], rows);
  // A phase the journal has no entries for (its kinds changed) reads as "–", not as a number.
  const mid = (/** @type {number[]} */ values) => fmt(median(values.filter(Number.isFinite)));
  if (phases.dispatch.length === 0) {
    return; // the fan-out did not run
  }
  console.log(
    `\nfan-out phases (median ms): run.created → first request at the peer ${mid(phases.dispatch)}; ` +
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
  const ratios = samples.map((ms) => ms / ACTION_WAIT_MS);
  return [
    `peer floor: 100 × ${ACTION_WAIT_MS} ms GETs from Node`,
    `makespan ÷ ${ACTION_WAIT_MS} ms`,
    fmt(median(ratios)),
    `${fmt(Math.min(...ratios))}–${fmt(Math.max(...ratios))}`,
    "×",
    "the local peer's own overhead, no Trellis",
  ];
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
