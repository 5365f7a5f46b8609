/**
 * What a step costs in production (docs/performance.md, "What a step costs"):
 * each measured run's usage as its coordinator counted it (coordinator/usage.ts,
 * its `run usage` log line in wrangler's output), per run and per step, and
 * that usage priced in dollars per million steps with Cloudflare's published
 * prices; beside it, the same workload priced as Cloudflare Workflows.
 *
 * Counted (the same on any machine): Durable Object requests, Worker
 * invocations, SQLite rows read and written, bytes stored. Measured (this
 * machine's speed): Durable Object duration (the run's time in its journal,
 * the coordinator being active throughout, or the client's time when longer:
 * work done in one event has one time in the journal) and CPU (all of workerd's CPU
 * over the run, billed as Worker CPU: an upper bound).
 */
import { fmt, median } from "./bench-scenarios.mjs";

/**
 * Workers Paid prices beyond the included usage, in dollars per unit, as
 * published on 2026-11-28: developers.cloudflare.com/workers/platform/pricing/,
 * /durable-objects/platform/pricing/ and /workflows/reference/pricing/.
 */
export const PRICES = {
  workerRequest: 0.3 / 1e6,
  workerCpuMs: 0.02 / 1e6,
  objectRequest: 0.15 / 1e6,
  /** Per GB-s; an active object is billed for 128 MB. */
  objectGbSecond: 12.5 / 1e6,
  rowRead: 0.001 / 1e6,
  rowWritten: 1.0 / 1e6,
  /** SQLite storage (Durable Objects) and Workflows state alike. */
  gbMonth: 0.2,
};

/** What a Durable Object's duration is billed on (128 MB), in GB. */
const OBJECT_GB = 0.125;

/**
 * What the start path costs beyond the coordinator's own count
 * (src/start.ts, catalog/snapshots.ts): the start request (one Worker
 * invocation), the catalog's check of the workflow's latest version and the
 * coordinator's `create` (two Durable Object requests). Status reads a client
 * makes while it waits are left out: each is one more of both.
 */
const START = { workerInvocations: 1, objectRequests: 2 };

/**
 * Cloudflare Workflows, for comparison: billed as Workers Standard (requests,
 * CPU time, storage). Assumptions: one request per instance (its steps are
 * not requests), the engine's CPU per step is not billed beyond the step's
 * own code, taken as `cpuMsPerStep`; each step's state is `bytesPerStep`,
 * kept the default `retentionDays` of a completed instance.
 */
export const WORKFLOWS = { cpuMsPerStep: 1, bytesPerStep: 1024, retentionDays: 7 };

/** @typedef {{ objectCalls: number, alarms: number, executorCalls: number, rowsRead: number, rowsWritten: number, indexRowsRead: number, indexRowsWritten: number, alarmsSet: number, databaseBytes: number }} RunUsage */
/** @typedef {{ steps: number, ms: number, cpuMs: number, usage: RunUsage }} CostSample  one measured run */

/**
 * The usage line the coordinator of `runId` logged when the run ended, from
 * wrangler's output (it may arrive a moment after the run's status).
 * @param {() => string} output @param {string} runId @returns {Promise<RunUsage>}
 */
export async function usageOf(output, runId) {
  const marker = `"msg":"run usage","run_id":"${runId}"`;
  const deadline = Date.now() + 10_000;
  for (;;) {
    const text = output();
    const at = text.lastIndexOf(marker);
    if (at >= 0) {
      const start = text.lastIndexOf("{", at);
      return JSON.parse(text.slice(start, text.indexOf("}", at) + 1));
    }
    if (Date.now() > deadline) {
      throw new Error(`no usage line for run ${runId} in wrangler's output`);
    }
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * One run's counts: what it cost on each meter, the start path included.
 * @param {CostSample} sample
 */
export function countsOf({ usage }) {
  return {
    objectRequests: START.objectRequests + usage.objectCalls + usage.alarms,
    workerInvocations: START.workerInvocations + usage.executorCalls,
    rowsRead: usage.rowsRead,
    rowsWritten: usage.rowsWritten,
    bytes: usage.databaseBytes,
  };
}

/**
 * Dollars per million steps of one run, by meter. Storage is one month of
 * the run's database (Trellis keeps a run until its retention deletes it).
 * @param {CostSample} sample
 */
export function dollarsPerMillionSteps(sample) {
  const counts = countsOf(sample);
  const perStep = 1e6 / sample.steps;
  return {
    objectRequests: counts.objectRequests * PRICES.objectRequest * perStep,
    workerInvocations: counts.workerInvocations * PRICES.workerRequest * perStep,
    rowsRead: counts.rowsRead * PRICES.rowRead * perStep,
    rowsWritten: counts.rowsWritten * PRICES.rowWritten * perStep,
    storageMonth: (counts.bytes / 1e9) * PRICES.gbMonth * perStep,
    duration: (sample.ms / 1000) * OBJECT_GB * PRICES.objectGbSecond * perStep,
    cpu: sample.cpuMs * PRICES.workerCpuMs * perStep,
  };
}

/**
 * The same workload on Cloudflare Workflows, dollars per million steps
 * (WORKFLOWS' assumptions), for instances of `steps` steps.
 * @param {number} steps
 */
export function workflowsDollarsPerMillionSteps(steps) {
  const requests = (1e6 / steps) * PRICES.workerRequest;
  const cpu = 1e6 * WORKFLOWS.cpuMsPerStep * PRICES.workerCpuMs;
  const storage = ((1e6 * WORKFLOWS.bytesPerStep) / 1e9) * PRICES.gbMonth * (WORKFLOWS.retentionDays / 30);
  return { requests, cpu, storage, total: requests + cpu + storage };
}

/**
 * The cost table's rows for one scenario's measured runs (medians; the
 * counts' min–max over the runs, equal when they are deterministic):
 * scenario | meter | per run | min–max | per step | $ per million steps.
 * @param {string} title @param {CostSample[]} samples
 * @returns {string[][]}
 */
export function costRows(title, samples) {
  const mid = (/** @type {(sample: CostSample) => number} */ pick) => median(samples.map(pick));
  const steps = samples[0].steps;
  /** @param {(sample: CostSample) => number} pick */
  const per = (pick) => {
    const values = samples.map(pick);
    const spread = values.every(Number.isFinite) ? `${fmt(Math.min(...values))}–${fmt(Math.max(...values))}` : "–";
    return { median: median(values), spread };
  };
  const count = (/** @type {keyof ReturnType<typeof countsOf>} */ key) => per((sample) => countsOf(sample)[key]);
  const dollars = (/** @type {keyof ReturnType<typeof dollarsPerMillionSteps>} */ key) =>
    mid((sample) => dollarsPerMillionSteps(sample)[key]);
  const row = (
    /** @type {string} */ meter,
    /** @type {{ median: number, spread: string }} */ perRun,
    /** @type {number} */ usd,
  ) => [title, meter, fmt(perRun.median), perRun.spread, fmt(perRun.median / steps), usdFmt(usd)];
  const total = (/** @type {string} */ meter, /** @type {number} */ usd) => [title, meter, "", "", "", usdFmt(usd)];
  const counted = mid((sample) => {
    const usd = dollarsPerMillionSteps(sample);
    return usd.objectRequests + usd.workerInvocations + usd.rowsRead + usd.rowsWritten + usd.storageMonth;
  });
  const measured = mid((sample) => {
    const usd = dollarsPerMillionSteps(sample);
    return usd.duration + (Number.isFinite(usd.cpu) ? usd.cpu : 0);
  });
  return [
    row("Durable Object requests", count("objectRequests"), dollars("objectRequests")),
    row(
      "  of which alarms",
      per((sample) => sample.usage.alarms),
      Number.NaN,
    ),
    row("Worker invocations", count("workerInvocations"), dollars("workerInvocations")),
    row("SQLite rows read", count("rowsRead"), dollars("rowsRead")),
    row("SQLite rows written", count("rowsWritten"), dollars("rowsWritten")),
    row(
      "  of which the run index's outbox",
      per((sample) => sample.usage.indexRowsWritten),
      Number.NaN,
    ),
    row("bytes stored (per month kept)", count("bytes"), dollars("storageMonth")),
    total("counted: $ per million steps", counted),
    row(
      "DO duration (measured ms)",
      per((sample) => sample.ms),
      dollars("duration"),
    ),
    row(
      "CPU, workerd (measured ms)",
      per((sample) => sample.cpuMs),
      dollars("cpu"),
    ),
    total("measured: $ per million steps", measured),
    total("Cloudflare Workflows, same steps", workflowsDollarsPerMillionSteps(steps).total),
  ];
}

/** Dollars: cents above a dollar, two significant digits below. @param {number} usd */
function usdFmt(usd) {
  if (!Number.isFinite(usd)) {
    return "–";
  }
  return usd >= 1 ? usd.toFixed(2) : usd.toPrecision(2);
}
