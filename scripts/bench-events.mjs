#!/usr/bin/env node
/**
 * `npm run bench:events`: event fan-in and sleeping runs at scale, against
 * `wrangler dev` (real workerd; docs/performance.md, "Event fan-in and
 * sleeping runs"). Timings are measurements printed in a table, never
 * assertions.
 *
 * - **Fan-in**, once per `EVENT_HUB_SHARDS` setting (each on a fresh
 *   `wrangler dev`): N runs of a workflow whose one step waits for an event of
 *   one unique name, with a `match` over the step input (the hubs pre-filter
 *   on it). The runs are started CONCURRENCY at a time; the script waits until
 *   the run index lists all N `waiting`, checks that each run's view shows the
 *   event wait, and waits for workerd to go quiet (the registrations at the
 *   hubs are done). Then ONE `POST /v1/events`, and the run index is polled
 *   (once a second) until none is `waiting`. Each run's resume time is its
 *   journal's `event.matched` entry (`at`), and its end the last entry, both
 *   relative to the moment the POST was sent (the journal and this script
 *   read the same clock); how many matched in each second after it goes to
 *   stderr (the delivery rounds' pace). The workerd CPU from the POST until
 *   workerd is quiet again, and its JavaScript threads' share of the time
 *   until the last run completed, tell whether the CPU or the rounds bound it.
 * - **Sleeping runs**, on a fresh `wrangler dev`: the workerd processes' CPU
 *   time (utime + stime, scripts/lib/proc-cpu.mjs) over a WINDOW with no runs
 *   at all, then over a WINDOW while N runs sleep (`sleep` 15 minutes), begun
 *   once workerd has been quiet for 5 s after the index listed them all
 *   (the trailing work before that, its time and CPU, is a row of its own).
 *   Nothing talks to the server during either window.
 *
 * Options: `--runs N` (default 1000), `--shards 1,4` (the settings measured),
 * `--only fanin|sleep`, `--window-ms N` (default 20000), `--concurrency N`
 * (starts in flight at once, default 8).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { benchClient } from "./lib/bench-client.mjs";
import { fmt, printTable } from "./lib/bench-scenarios.mjs";
import { cpuMeter, TICK_MS } from "./lib/proc-cpu.mjs";
import { startWranglerDev } from "./lib/wrangler-dev.mjs";

/** The value of `--<name> <value>` or `--<name>=<value>`, else `fallback`. @param {string} name @param {string} fallback */
function option(name, fallback) {
  const args = process.argv.slice(2);
  const index = args.findIndex((arg) => arg === `--${name}` || arg.startsWith(`--${name}=`));
  if (index < 0) {
    return fallback;
  }
  const arg = args[index];
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : (args[index + 1] ?? fallback);
}

const RUNS = Number(option("runs", "1000"));
const SHARDS = option("shards", "1,4").split(",").map(Number);
const ONLY = option("only", "");
const WINDOW_MS = Number(option("window-ms", "20000"));
const CONCURRENCY = Number(option("concurrency", "8"));
/** How long the sleeping runs sleep: far longer than starting them and measuring takes. */
const SLEEP_MS = 15 * 60_000;
/** Bound on each phase that waits for the server. */
const PHASE_LIMIT_MS = 20 * 60_000;
/**
 * Before the sleeping window, workerd must have been quiet this long: the runs'
 * last index writes, and the objects workerd evicts once idle, come first.
 */
const SETTLE_QUIET_MS = 5_000;
/** How often a waiting phase reads the run index. */
const POLL_MS = 1_000;

const token = `events-${randomBytes(8).toString("hex")}`;
const signingKey = generateKeyPairSync("ed25519")
  .privateKey.export({ type: "pkcs8", format: "der" })
  .toString("base64");

/** @typedef {ReturnType<typeof benchClient>} Client */

/** @param {number} ms */
const delay = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

/** The value at fraction `q` of the sorted samples (nearest rank). @param {number[]} sorted @param {number} q */
function quantile(sorted, q) {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil(q * sorted.length) - 1))];
}

/**
 * Calls `task(i)` for i in 0..count-1, `width` at a time; gives the results in order.
 * @template T @param {number} count @param {number} width @param {(i: number) => Promise<T>} task
 */
async function pool(count, width, task) {
  /** @type {T[]} */
  const results = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      results[i] = await task(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, worker));
  return results;
}

/** How many runs of `workflow` the run index lists with `status` (following every page). @param {Client} client */
async function countListed(client, workflow, status) {
  let count = 0;
  let cursor = null;
  do {
    const query = `workflow=${workflow}&status=${status}&limit=100${cursor ? `&cursor=${cursor}` : ""}`;
    const page = await client.api("GET", `/v1/runs?${query}`);
    count += page.runs.length;
    cursor = page.next_cursor ? encodeURIComponent(page.next_cursor) : null;
  } while (cursor !== null);
  return count;
}

/**
 * Polls the run index every POLL_MS until `done(count)` of `status`; gives the time it took.
 * @param {Client} client @param {string} workflow @param {string} status
 * @param {(count: number) => boolean} done @param {string} what
 */
async function pollListed(client, workflow, status, done, what) {
  const started = Date.now();
  for (;;) {
    const count = await countListed(client, workflow, status);
    if (done(count)) {
      return Date.now() - started;
    }
    if (Date.now() - started > PHASE_LIMIT_MS) {
      throw new Error(`${what}: still ${count} ${status} after ${PHASE_LIMIT_MS} ms`);
    }
    await delay(POLL_MS);
  }
}

/** Starts `count` runs of `workflow`, CONCURRENCY at a time; gives their ids and the time it took. @param {Client} client */
async function startRuns(client, workflow, count, input) {
  const started = Date.now();
  const ids = await pool(count, CONCURRENCY, async () => {
    const run = await client.api("POST", `/v1/workflows/${workflow}/runs`, { input });
    return /** @type {string} */ (run.run_id);
  });
  return { ids, ms: Date.now() - started };
}

/** A fresh `wrangler dev` with `vars`, its client and its CPU meter; `use` runs with them, and the server stops after. */
async function withServer(vars, use) {
  const dev = await startWranglerDev({ vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey, ...vars } });
  try {
    return await use({ client: benchClient(dev.url, token), meter: cpuMeter(dev.pid), dev });
  } finally {
    await dev.stop();
  }
}

/** The one-step workflow of the fan-in: an event wait on `name` whose match reads the step input. */
function fanInWorkflow(id, name) {
  const implementation = { name, match: "event.data.batch == input.batch" };
  return { id, nodes: { wait: { task: { steps: [{ ref: "wait", action: { kind: "event", implementation } }] } } } };
}

/**
 * The fan-in at one shard setting: start RUNS waiting runs, then one event; gives the table's rows.
 * @param {number} shards
 */
async function measureFanIn(shards) {
  return withServer({ EVENT_HUB_SHARDS: String(shards) }, async ({ client, meter }) => {
    const id = `fanin-${randomBytes(4).toString("hex")}`;
    const name = `go-${randomBytes(6).toString("hex")}`;
    const batch = randomBytes(4).toString("hex");
    await client.api("POST", "/v1/definitions", { workflows: [fanInWorkflow(id, name)] });
    const cpuBefore = meter.read();
    const start = await startRuns(client, id, RUNS, { batch });
    const listedMs = await pollListed(client, id, "waiting", (n) => n === RUNS, "runs waiting");
    await assertEventWaits(client, start.ids);
    const quietAt = Date.now();
    await meter.quiet(1_000, 60_000);
    const registration = {
      startMs: start.ms,
      listedMs,
      settleMs: Date.now() - quietAt,
      cpuMs: meter.read() - cpuBefore,
    };
    const unmatched = await timedPost(client, { name, data: { batch: "none" } });
    const [cpuAtSend, mainAtSend] = [meter.read(), meter.readMain()];
    const sentAt = Date.now();
    const sent = await client.api("POST", "/v1/events", { name, data: { batch } });
    const answeredMs = Date.now() - sentAt;
    if (sent.events?.[0]?.duplicate !== false) {
      throw new Error(`POST /v1/events answered ${JSON.stringify(sent)}`);
    }
    const drainedMs = await pollListed(client, id, "waiting", (n) => n === 0, "runs still waiting");
    const cpuMs = (await meter.quiet(1_000, 60_000)) - cpuAtSend;
    const mainCpuMs = meter.readMain() - mainAtSend;
    const resumes = await resumeTimes(client, start.ids, sentAt);
    console.error(`shards ${shards}: event.matched per second after the POST: ${perSecond(resumes.matched).join(" ")}`);
    console.error(
      `shards ${shards}: pauses over ${GAP_MS} ms between matches: ${gaps(resumes.matched).join(", ") || "none"}`,
    );
    return fanInRows(shards, registration, { unmatched, answeredMs, drainedMs, cpuMs, mainCpuMs }, resumes);
  });
}

/** Each run's view shows its event wait (read CONCURRENCY at a time). @param {Client} client @param {string[]} ids */
async function assertEventWaits(client, ids) {
  await pool(ids.length, CONCURRENCY, async (i) => {
    const run = await client.api("GET", `/v1/runs/${ids[i]}`);
    if (run.status !== "waiting" || run.waiting_for?.[0]?.kind !== "event") {
      throw new Error(`run ${ids[i]} is ${run.status}, waiting for ${JSON.stringify(run.waiting_for)}`);
    }
  });
}

/**
 * Each run's `event.matched` and last entry, ms after `sentAt`, sorted; checks each run completed with one match.
 * @param {Client} client @param {string[]} ids @param {number} sentAt
 */
async function resumeTimes(client, ids, sentAt) {
  const times = await pool(ids.length, CONCURRENCY, async (i) => {
    const { entries } = await client.api("GET", `/v1/runs/${ids[i]}/journal`);
    const matched = entries.filter((/** @type {{ kind: string }} */ entry) => entry.kind === "event.matched");
    const ended = entries.find(
      (/** @type {{ kind: string, body: { to?: string } }} */ entry) =>
        entry.kind === "run.status" && entry.body.to === "completed",
    );
    if (matched.length !== 1 || ended === undefined) {
      throw new Error(`run ${ids[i]}: ${matched.length} event.matched entries, completed: ${ended !== undefined}`);
    }
    return { matched: Date.parse(matched[0].at) - sentAt, ended: Date.parse(ended.at) - sentAt };
  });
  return {
    matched: times.map((time) => time.matched).sort((a, b) => a - b),
    ended: times.map((time) => time.ended).sort((a, b) => a - b),
  };
}

/** `POST /v1/events` of `event`; gives how long its 202 took. @param {Client} client */
async function timedPost(client, event) {
  const sentAt = Date.now();
  await client.api("POST", "/v1/events", event);
  return Date.now() - sentAt;
}

/** A pause between two consecutive matches at least this long is listed. */
const GAP_MS = 250;

/** The pauses of at least GAP_MS in the sorted times: "<from> ms +<length>". @param {number[]} sorted */
function gaps(sorted) {
  return sorted.flatMap((ms, i) =>
    i > 0 && ms - sorted[i - 1] >= GAP_MS ? [`${sorted[i - 1]} ms +${ms - sorted[i - 1]}`] : [],
  );
}

/** How many of the sorted times fall in each second from 0. @param {number[]} sorted */
function perSecond(sorted) {
  const counts = new Array(Math.floor((sorted.at(-1) ?? 0) / 1000) + 1).fill(0);
  for (const ms of sorted) {
    counts[Math.floor(ms / 1000)] += 1;
  }
  return counts;
}

/** The fan-in's rows: one per metric. */
function fanInRows(shards, registration, event, resumes) {
  const setting = `fan-in, ${RUNS} runs, ${shards} shard${shards === 1 ? "" : "s"}`;
  const spread = (/** @type {number[]} */ sorted) =>
    `p50 ${fmt(quantile(sorted, 0.5))} · p90 ${fmt(quantile(sorted, 0.9))} · max ${fmt(sorted.at(-1) ?? NaN)}`;
  const perShard = Math.ceil(RUNS / shards);
  return [
    [setting, "start the runs (POSTs answered)", fmt(registration.startMs), "ms", `${CONCURRENCY} at a time`],
    [setting, "  until the index lists all waiting", fmt(registration.listedMs), "ms", "after the last start"],
    [setting, "  until workerd is quiet", fmt(registration.settleMs), "ms", "registrations done"],
    [setting, "  workerd CPU, start to quiet", fmt(registration.cpuMs / RUNS), "ms/run", ""],
    [setting, "POST of an event no wait matches", fmt(event.unmatched), "ms", "202: the hubs' pre-filter alone"],
    [setting, "POST /v1/events answered", fmt(event.answeredMs), "ms", "202, the event every run takes"],
    [setting, "event.matched after the POST", spread(resumes.matched), "ms", `first ${fmt(resumes.matched[0])}`],
    [
      setting,
      "run completed after the POST",
      spread(resumes.ended),
      "ms",
      `~${Math.ceil(perShard / 24)} rounds of 24 per hub`,
    ],
    [setting, "index lists none waiting", fmt(event.drainedMs), "ms", `polled every ${POLL_MS} ms`],
    [
      setting,
      "workerd CPU, POST to quiet",
      fmt(event.cpuMs / RUNS),
      "ms/run",
      `JavaScript threads ${fmt(event.mainCpuMs / RUNS)}`,
    ],
    [
      setting,
      "  JavaScript threads ÷ last completion",
      fmt(event.mainCpuMs / (resumes.ended.at(-1) ?? NaN)),
      "cores",
      "1 = one thread saturated",
    ],
  ];
}

/** The sleeping runs: CPU over an idle window, then over a window while RUNS runs sleep. */
async function measureSleep() {
  return withServer({}, async ({ client, meter }) => {
    const id = `sleep-${randomBytes(4).toString("hex")}`;
    const steps = [{ ref: "nap", action: { kind: "sleep", implementation: { duration_ms: SLEEP_MS } } }];
    await client.api("POST", "/v1/definitions", { workflows: [{ id, nodes: { nap: { task: { steps } } } }] });
    await meter.quiet(1_000, 30_000);
    const idle = await cpuWindow(meter);
    const cpuAtStart = meter.read();
    const start = await startRuns(client, id, RUNS, {});
    const listedMs = await pollListed(client, id, "waiting", (n) => n === RUNS, "runs sleeping");
    const startCpuMs = meter.read() - cpuAtStart;
    const [settleFrom, cpuFrom] = [Date.now(), meter.read()];
    const cpuSettled = await meter.quiet(SETTLE_QUIET_MS, PHASE_LIMIT_MS);
    const settle = { ms: Date.now() - settleFrom - SETTLE_QUIET_MS, cpuMs: cpuSettled - cpuFrom };
    const sleeping = await cpuWindow(meter);
    const rows = [
      [
        "idle, no runs",
        `workerd CPU over ${WINDOW_MS / 1000} s`,
        fmt(idle),
        "ms/s",
        `${meter.pids.length} workerd processes`,
      ],
      [`${RUNS} runs sleeping`, "start the runs (POSTs answered)", fmt(start.ms), "ms", `${CONCURRENCY} at a time`],
      [`${RUNS} runs sleeping`, "  workerd CPU, start to listed", fmt(startCpuMs / RUNS), "ms/run", ""],
      [`${RUNS} runs sleeping`, "  until the index lists all waiting", fmt(listedMs), "ms", "after the last start"],
      [
        `${RUNS} runs sleeping`,
        "  trailing work after they are listed",
        fmt(settle.ms),
        "ms",
        `${fmt(settle.cpuMs)} ms CPU, until ${SETTLE_QUIET_MS / 1000} s quiet`,
      ],
      [
        `${RUNS} runs sleeping`,
        `workerd CPU over ${WINDOW_MS / 1000} s`,
        fmt(sleeping),
        "ms/s",
        `sleep ${SLEEP_MS / 60_000} min`,
      ],
    ];
    return rows;
  });
}

/** The workerd processes' CPU over WINDOW_MS, nothing sent meanwhile, in ms per second. @param {import("./lib/proc-cpu.mjs").CpuMeter} meter */
async function cpuWindow(meter) {
  const before = meter.read();
  const started = Date.now();
  await delay(WINDOW_MS);
  return (meter.read() - before) / ((Date.now() - started) / 1000);
}

async function main() {
  const load = execFileSync("uptime", { encoding: "utf8" }).trim();
  console.error(`load before: ${load}`);
  /** @type {string[][]} */
  const rows = [];
  if (ONLY !== "sleep") {
    for (const shards of SHARDS) {
      console.error(`fan-in: ${RUNS} runs, EVENT_HUB_SHARDS=${shards}…`);
      rows.push(...(await measureFanIn(shards)));
    }
  }
  if (ONLY !== "fanin") {
    console.error(`sleeping: ${RUNS} runs…`);
    rows.push(...(await measureSleep()));
  }
  console.log(
    `\nEvent fan-in and sleeping runs (wrangler dev; times from each run's journal, relative to the POST; ` +
      `CPU = utime+stime of wrangler's workerd processes, ${TICK_MS} ms ticks)\n`,
  );
  printTable(["scenario", "metric", "value", "unit", "note"], rows);
  console.log(`\nload before: ${load}\nload after:  ${execFileSync("uptime", { encoding: "utf8" }).trim()}`);
  console.log(`command: node scripts/bench-events.mjs ${process.argv.slice(2).join(" ")}`.trimEnd());
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
