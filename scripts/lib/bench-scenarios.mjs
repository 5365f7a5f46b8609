/**
 * The scenarios `npm run bench` and `npm run bench:ab` measure, what each
 * reports, the targets bench:ab checks (docs/performance.md, "Targets"), and the statistics
 * and tables both print.
 *
 * A scenario's `measure` runs its workflow once against one tree and gives
 * one sample of each of its metrics. Times come from the run's signed journal
 * (`run.created` → attestation) except the single node's client latency;
 * CPU is the workerd processes' CPU time over the run (proc-cpu.mjs).
 */
import { ACTION_WAIT_MS, CHAIN_LENGTH } from "./bench-client.mjs";

/**
 * @typedef {object} Metric
 * @property {string} key
 * @property {string} label
 * @property {string} unit
 * @property {{ ratio?: number, absolute?: number }} [target]  working ÷ ref at most `ratio`, or the
 *   working tree's median at most `absolute`
 */

/**
 * @typedef {object} Tree  what a scenario needs of one running tree
 * @property {ReturnType<typeof import("./bench-client.mjs").benchClient>} client
 * @property {import("./proc-cpu.mjs").CpuMeter} meter
 * @property {ReturnType<typeof import("./bench-client.mjs").benchWorkflows>} flows
 */

/** @typedef {{ kind: string, at: string }} JournalEntryTimes  what a scenario reads of a journal entry */

/**
 * @typedef {object} Scenario
 * @property {string} title
 * @property {Metric[]} metrics
 * @property {number} [steps]  the steps (tasks) one run of it runs, for its cost per step (none: it runs no run)
 * @property {(tree: Tree) => Promise<{ metrics: Record<string, number>, entries?: JournalEntryTimes[], run?: MeasuredRun }>} measure
 */

/**
 * @typedef {object} MeasuredRun  the run a scenario's `measure` ran, for its cost (bench-cost.mjs)
 * @property {string} id
 * @property {number} ms  `run.created` to its last journal entry
 * @property {number} cpuMs  workerd's CPU over the run (NaN when not measured)
 */

/**
 * The part of a run's CPU spent on the threads that run JavaScript; the rest
 * is V8's compiler and garbage collector threads and workerd's I/O helpers.
 */
const MAIN_CPU_LABEL = "  of which the JavaScript threads";

/**
 * The chain metrics: the client's time (start request to the run's end, known at once:
 * the start waits for it) and workerd CPU, each ÷ the chain's length. Not the journal's
 * time: a chain of pure tasks is one event, whose entries all carry one time.
 */
const chainMetrics = [
  { key: "time", label: "time per node (client)", unit: "ms/node", target: { ratio: 0.4 } },
  { key: "cpu", label: "CPU per node", unit: "ms/node", target: { ratio: 0.4 } },
  { key: "mainCpu", label: MAIN_CPU_LABEL, unit: "ms/node" },
];

/** @param {"chain" | "chainHttp"} flow @returns {Scenario["measure"]} */
const measureChain = (flow) => async (tree) => {
  const { workflow, input } = tree.flows[flow];
  const run = await tree.client.timedRun(workflow.id, input, tree.meter);
  const metrics = {
    time: run.clientMs / CHAIN_LENGTH,
    cpu: run.cpuMs / CHAIN_LENGTH,
    mainCpu: run.mainCpuMs / CHAIN_LENGTH,
  };
  return { metrics, entries: run.entries, run: measuredRun(run) };
};

/**
 * What the cost table needs of a timed run: its object's active time is at most the
 * client's (the journal's is 0 for work done in one event).
 * @param {{ runId: string, ms: number, clientMs: number, cpuMs: number }} run
 */
const measuredRun = (run) => ({ id: run.runId, ms: Math.max(run.ms, run.clientMs), cpuMs: run.cpuMs });

/** How long the `idle` scenario measures nothing happening. */
const IDLE_MS = 1_000;

/** @type {Record<string, Scenario>} */
export const SCENARIOS = {
  "chain": {
    title: `chain of ${CHAIN_LENGTH} context tasks`,
    steps: CHAIN_LENGTH,
    metrics: chainMetrics,
    measure: measureChain("chain"),
  },
  "chain-http": {
    title: `chain of ${CHAIN_LENGTH} http tasks (peer answers at once)`,
    steps: CHAIN_LENGTH,
    metrics: chainMetrics,
    measure: measureChain("chainHttp"),
  },
  "single": {
    title: "one-node run",
    steps: 1,
    metrics: [
      { key: "latency", label: "client latency", unit: "ms", target: { ratio: 0.5 } },
      { key: "startPath", label: "  start path: request → run.created", unit: "ms" },
      { key: "engine", label: "  engine (journal): run.created → attest", unit: "ms" },
      { key: "returnPath", label: "  return path: attest → client has it", unit: "ms" },
      { key: "answered", label: "  (start request answered at)", unit: "ms" },
    ],
    measure: async (tree) => {
      const { workflow, input } = tree.flows.single;
      const { runId, metrics } = await tree.client.latencyRun(workflow.id, input);
      return { metrics, run: { id: runId, ms: metrics.engine, cpuMs: Number.NaN } };
    },
  },
  "fanout": {
    title: `fan-out 100 × ${ACTION_WAIT_MS} ms http`,
    steps: 100,
    metrics: [
      { key: "makespan", label: `makespan ÷ ${ACTION_WAIT_MS} ms`, unit: "×", target: { absolute: 1.25 } },
      { key: "cpu", label: "CPU per run", unit: "ms" },
      { key: "mainCpu", label: MAIN_CPU_LABEL, unit: "ms" },
    ],
    measure: async (tree) => {
      const { workflow, input } = tree.flows.fanout;
      const run = await tree.client.timedRun(workflow.id, input, tree.meter);
      const metrics = { makespan: run.ms / ACTION_WAIT_MS, cpu: run.cpuMs, mainCpu: run.mainCpuMs };
      return { metrics, entries: run.entries, run: measuredRun(run) };
    },
  },
  "foreach": {
    title: "foreach of 1,000 no-op items",
    steps: 1000,
    metrics: [
      { key: "time", label: "total (client)", unit: "ms", target: { ratio: 0.5 } },
      { key: "cpu", label: "CPU per run", unit: "ms" },
      { key: "mainCpu", label: MAIN_CPU_LABEL, unit: "ms" },
    ],
    measure: async (tree) => {
      const { workflow, input } = tree.flows.foreach;
      const run = await tree.client.timedRun(workflow.id, input, tree.meter);
      const metrics = { time: run.clientMs, cpu: run.cpuMs, mainCpu: run.mainCpuMs };
      return { metrics, entries: run.entries, run: measuredRun(run) };
    },
  },
  // The CPU meter's own check: nothing runs, so this should read 0 give or take a tick.
  "idle": {
    title: `nothing (${IDLE_MS / 1000} s, the CPU meter's zero)`,
    metrics: [{ key: "cpu", label: "CPU", unit: "ms" }],
    measure: async (tree) => {
      const before = tree.meter.read();
      await new Promise((resolve) => setTimeout(resolve, IDLE_MS));
      return { metrics: { cpu: tree.meter.read() - before } };
    },
  },
};

/** The scenario names, in the order tables list them. */
export const SCENARIO_NAMES = Object.keys(SCENARIOS);

/**
 * The scenarios named in a comma-separated list; throws on an unknown one.
 * @param {string} list
 */
export function chooseScenarios(list) {
  return list.split(",").map((name) => {
    const scenario = SCENARIOS[name];
    if (scenario === undefined) {
      throw new Error(`unknown scenario ${name} (${SCENARIO_NAMES.join(", ")})`);
    }
    return { name, ...scenario };
  });
}

/** @param {number[]} values */
export function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2;
}

/** A number with as many decimals as its size deserves. @param {number} value */
export function fmt(value) {
  if (!Number.isFinite(value)) {
    return "–";
  }
  const size = Math.abs(value);
  return value.toFixed(size >= 100 ? 0 : size >= 10 ? 1 : 2);
}

/** "median (min–max)" of the samples. @param {number[]} values */
export function medianSpread(values) {
  return `${fmt(median(values))} (${fmt(Math.min(...values))}–${fmt(Math.max(...values))})`;
}

/**
 * Prints a Markdown table (pads columns so it also reads as plain text).
 * @param {string[]} header @param {string[][]} rows
 */
export function printTable(header, rows) {
  const widths = header.map((title, column) => Math.max(title.length, ...rows.map((row) => row[column].length)));
  const line = (/** @type {string[]} */ row) =>
    `| ${row.map((cell, column) => cell.padEnd(widths[column])).join(" | ")} |`;
  console.log(line(header));
  console.log(`|${widths.map((width) => "-".repeat(width + 2)).join("|")}|`);
  for (const row of rows) {
    console.log(line(row));
  }
}
