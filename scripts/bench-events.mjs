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
 * - **Waiting runs**, once per kind of wait in `--waits` (`sleep`: a `sleep`
 *   of 60 minutes; `event`: an event wait on a name nobody sends; `gate`: a
 *   `human` step; `none`: a step that completes at once, the control), each on
 *   a fresh `wrangler dev` with a state directory of its own: the workerd
 *   processes' CPU time (utime + stime, scripts/lib/proc-cpu.mjs) over a WINDOW
 *   with no runs at all; then WARM_UP runs, until their objects have closed
 *   (the baseline); then N runs, until the index lists them all and a sample
 *   of their views shows the wait; then, sampling each second, until workerd
 *   has closed every run's object (scripts/lib/proc-mem.mjs counts the open
 *   SQLite files) and been quiet for 5 s; then the CPU over a WINDOW while
 *   they wait. Nothing talks to the server during either window. Memory (RSS
 *   of workerd and of wrangler's whole tree, the V8 heap) and the state on
 *   disk are read at the baseline, at the peak during the starts and once
 *   every object closed. For `sleep`, WAKE_RUNS more runs sleep 30 s beside
 *   them and must complete when their alarms fire, their objects closed
 *   meanwhile, and the sleepers must all still be waiting after.
 *
 * Options: `--runs N` (default 1000), `--shards 1,4` (the settings measured),
 * `--only fanin|sleep` (`sleep`: the waiting runs), `--waits sleep,event,gate,none`
 * (default `sleep`), `--wake-runs N` (default 10), `--window-ms N` (default
 * 20000), `--concurrency N` (starts in flight at once, default 8).
 */
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchClient } from "./lib/bench-client.mjs";
import { fmt, printTable } from "./lib/bench-scenarios.mjs";
import { cpuMeter, TICK_MS } from "./lib/proc-cpu.mjs";
import { diskUsage, jsHeap, liveObjects, memoryOf } from "./lib/proc-mem.mjs";
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
const WAITS = /** @type {WaitKind[]} */ (option("waits", "sleep").split(","));
const WAKE_RUNS = Number(option("wake-runs", "10"));
/** How long the sleeping runs sleep: far longer than starting 10,000 of them and measuring takes. */
const SLEEP_MS = 60 * 60_000;
/**
 * How long the wake check's runs sleep: longer than local workerd keeps an idle
 * object (about 10 s), so each is woken from its alarm with its object closed.
 */
const WAKE_SLEEP_MS = 30_000;
/** How many runs warm workerd up before the memory baseline (they stay, and are not counted). */
const WARM_UP = 50;
/** How many runs' views are read to check that they wait as they should. */
const VIEW_SAMPLE = 100;
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

/**
 * A fresh `wrangler dev` with `vars` on a fresh state directory, its client and
 * its CPU meter; `use` runs with them, and the server stops and the directory
 * goes after.
 */
async function withServer(vars, use) {
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-bench-events-"));
  try {
    const dev = await startWranglerDev({
      vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey, ...vars },
      persistTo: stateDir,
    });
    try {
      return await use({ client: benchClient(dev.url, token), meter: cpuMeter(dev.pid), dev, stateDir });
    } finally {
      await dev.stop();
    }
  } finally {
    rmSync(stateDir, { recursive: true, force: true });
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

/**
 * The kinds of waiting runs `--waits` measures: the step each run's one task
 * waits in, the run status the index lists once it waits, and the kind its view's
 * `waiting_for` shows (`none`: runs that complete at once, the control).
 */
const WAIT_KINDS = {
  sleep: {
    step: () => ({ kind: "sleep", implementation: { duration_ms: SLEEP_MS } }),
    status: "waiting",
    view: "timer",
  },
  event: {
    step: () => ({ kind: "event", implementation: { name: `never-${randomBytes(6).toString("hex")}` } }),
    status: "waiting",
    view: "event",
  },
  gate: {
    step: () => ({ kind: "human", implementation: { prompt_template: "go on?", input_schema: { type: "object" } } }),
    status: "waiting",
    view: "gate",
  },
  none: {
    step: () => ({ kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } }),
    status: "completed",
    view: null,
  },
};

/** @typedef {keyof typeof WAIT_KINDS} WaitKind */

/** A one-node workflow whose one step runs `action`. @param {string} id @param {unknown} action */
function oneStepWorkflow(id, action) {
  return { id, nodes: { only: { task: { steps: [{ ref: "only", action }] } } } };
}

/** The directory name of the run coordinators' objects under `<state>/v3/do`. */
const COORDINATORS = "trellis-Coordinator";

/**
 * Memory, live objects and state on disk now.
 * @param {import("./lib/wrangler-dev.mjs").WranglerDev} dev @param {string} stateDir
 */
function snapshot(dev, stateDir) {
  const memory = memoryOf(dev.pid);
  const live = liveObjects(memory.workerdPids, stateDir);
  const disk = (/** @type {string} */ part) => diskUsage(join(stateDir, "v3", part));
  return {
    memory,
    live: live[COORDINATORS] ?? 0,
    liveOther: Object.entries(live).reduce((sum, [name, n]) => sum + (name === COORDINATORS ? 0 : n), 0),
    disk: { coordinators: disk(join("do", COORDINATORS)), d1: disk("d1"), all: diskUsage(stateDir) },
  };
}

/** @typedef {ReturnType<typeof snapshot>} Snapshot */

/**
 * Calls `sample()` every second until `stop()`; gives the samples.
 * @template T @param {() => T} sample
 */
function every(sample) {
  /** @type {{ at: number, value: T }[]} */
  const samples = [];
  const timer = setInterval(() => samples.push({ at: Date.now(), value: sample() }), 1_000);
  return {
    samples,
    stop() {
      clearInterval(timer);
      return samples;
    },
  };
}

/**
 * Waits until workerd has no run coordinator open and its CPU has not moved for
 * SETTLE_QUIET_MS, sampling each second; gives when the last coordinator closed
 * (ms after `since`), the CPU meanwhile and the count of live coordinators per second.
 * @param {string} stateDir @param {import("./lib/proc-cpu.mjs").CpuMeter} meter @param {number} since
 */
async function settle(stateDir, meter, since) {
  const cpuFrom = meter.read();
  const series = [];
  let [cpu, cpuChangedAt, closedAt] = [cpuFrom, Date.now(), Number.NaN];
  for (;;) {
    const live = liveObjects(meter.pids, stateDir)[COORDINATORS] ?? 0;
    series.push(live);
    const now = Date.now();
    if (live === 0 && Number.isNaN(closedAt)) {
      closedAt = now - since;
    }
    if (live > 0) {
      closedAt = Number.NaN;
    }
    if (meter.read() !== cpu) {
      [cpu, cpuChangedAt] = [meter.read(), now];
    }
    if (live === 0 && now - cpuChangedAt >= SETTLE_QUIET_MS) {
      return { closedMs: closedAt, cpuMs: cpu - cpuFrom, series };
    }
    if (now - since > PHASE_LIMIT_MS) {
      throw new Error(`${live} coordinators still open after ${PHASE_LIMIT_MS} ms`);
    }
    await delay(1_000);
  }
}

/**
 * A sample of the runs (up to VIEW_SAMPLE, spread over `ids`) whose views show
 * `kind`'s status and wait; gives how many were read.
 * @param {Client} client @param {string[]} ids @param {WaitKind} kind
 */
async function assertWaiting(client, ids, kind) {
  const { status, view } = WAIT_KINDS[kind];
  const step = Math.max(1, Math.floor(ids.length / VIEW_SAMPLE));
  const sample = ids.filter((_, i) => i % step === 0).slice(0, VIEW_SAMPLE);
  await pool(sample.length, CONCURRENCY, async (i) => {
    const run = await client.api("GET", `/v1/runs/${sample[i]}`);
    const shown = run.waiting_for?.[0]?.kind ?? null;
    if (run.status !== status || shown !== view) {
      throw new Error(`run ${sample[i]} is ${run.status}, waiting for ${JSON.stringify(run.waiting_for)}`);
    }
  });
  return sample.length;
}

/**
 * WARM_UP runs of a workflow like the measured one, until their objects have
 * closed: the first runs in a fresh workerd compile code and fill caches, which
 * would otherwise count as the measured runs' memory.
 * @param {Client} client @param {string} stateDir @param {import("./lib/proc-cpu.mjs").CpuMeter} meter
 * @param {WaitKind} kind
 */
async function warmUp(client, stateDir, meter, kind) {
  const id = `warm-${kind}-${randomBytes(4).toString("hex")}`;
  await client.api("POST", "/v1/definitions", { workflows: [oneStepWorkflow(id, WAIT_KINDS[kind].step())] });
  await startRuns(client, id, WARM_UP, {});
  await pollListed(client, id, WAIT_KINDS[kind].status, (n) => n === WARM_UP, `warm-up runs ${kind}`);
  await settle(stateDir, meter, Date.now());
}

/**
 * Waiting runs of `kind` on a fresh `wrangler dev`: the CPU over an idle window
 * and over a window while RUNS runs wait, their memory and their state on disk.
 * @param {WaitKind} kind
 */
async function measureWaiting(kind) {
  return withServer({}, async ({ client, meter, dev, stateDir }) => {
    const id = `${kind}-${randomBytes(4).toString("hex")}`;
    await client.api("POST", "/v1/definitions", { workflows: [oneStepWorkflow(id, WAIT_KINDS[kind].step())] });
    await meter.quiet(1_000, 30_000);
    const idle = await cpuWindow(meter);
    await warmUp(client, stateDir, meter, kind);
    const before = snapshot(dev, stateDir);
    const heapBefore = await jsHeap(dev.inspectorPort);
    const cpuAtStart = meter.read();
    const during = every(() => snapshot(dev, stateDir));
    const start = await startRuns(client, id, RUNS, {});
    const lastStartAt = Date.now();
    const listedMs = await pollListed(client, id, WAIT_KINDS[kind].status, (n) => n === RUNS, `runs ${kind}`);
    const startCpuMs = meter.read() - cpuAtStart;
    const peak = [...during.stop().map((sample) => sample.value), snapshot(dev, stateDir)].reduce((a, b) =>
      b.memory.workerd.rssKiB > a.memory.workerd.rssKiB ? b : a,
    );
    const checked = await assertWaiting(client, start.ids, kind);
    const settled = await settle(stateDir, meter, lastStartAt);
    console.error(`${kind}: live coordinators each second after the last start: ${settled.series.join(" ")}`);
    const window = await cpuWindow(meter);
    const after = snapshot(dev, stateDir);
    const heapAfter = await jsHeap(dev.inspectorPort);
    const wake = kind === "sleep" && WAKE_RUNS > 0 ? await wakeCheck(client, dev, stateDir, id) : null;
    const scenario = `${RUNS} runs ${kind === "none" ? "completed" : `waiting (${kind})`}`;
    return [
      [
        "idle, no runs",
        `workerd CPU over ${WINDOW_MS / 1000} s`,
        fmt(idle),
        "ms/s",
        `${meter.pids.length} workerd processes`,
      ],
      ...startRows(scenario, { start, startCpuMs, listedMs, checked, settled }),
      [
        scenario,
        `workerd CPU over ${WINDOW_MS / 1000} s`,
        fmt(window),
        "ms/s",
        kind === "sleep" ? `sleep ${SLEEP_MS / 60_000} min` : "",
      ],
      ...memoryRows(scenario, before, peak, after),
      heapRow(scenario, heapBefore, heapAfter),
      ...(wake ? wakeRows(wake) : []),
    ];
  });
}

/** The rows of the starts and of the work after them. */
function startRows(scenario, { start, startCpuMs, listedMs, checked, settled }) {
  return [
    [
      scenario,
      "start the runs (POSTs answered)",
      fmt(start.ms),
      "ms",
      `${CONCURRENCY} at a time, ${fmt(RUNS / (start.ms / 1000))} runs/s`,
    ],
    [scenario, "  workerd CPU, start to listed", fmt(startCpuMs / RUNS), "ms/run", ""],
    [
      scenario,
      "  until the index lists them all",
      fmt(listedMs),
      "ms",
      `after the last start; ${checked} views checked`,
    ],
    [
      scenario,
      "  until the last coordinator closed",
      fmt(settled.closedMs),
      "ms",
      `after the last start; ${fmt(settled.cpuMs)} ms CPU from listed to ${SETTLE_QUIET_MS / 1000} s quiet`,
    ],
  ];
}

/**
 * WAKE_RUNS runs of a WAKE_SLEEP_MS sleep, started beside RUNS sleepers: each
 * must complete when its time comes, though its object closed meanwhile (the
 * fewest coordinators open while they slept says whether they did), and the
 * sleepers must all still be listed waiting after.
 * @param {Client} client @param {import("./lib/wrangler-dev.mjs").WranglerDev} dev
 * @param {string} stateDir @param {string} sleepersId
 */
async function wakeCheck(client, dev, stateDir, sleepersId) {
  const id = `${sleepersId}-wake`;
  const step = { kind: "sleep", implementation: { duration_ms: WAKE_SLEEP_MS } };
  await client.api("POST", "/v1/definitions", { workflows: [oneStepWorkflow(id, step)] });
  const start = await startRuns(client, id, WAKE_RUNS, {});
  const live = every(() => liveObjects(memoryOf(dev.pid).workerdPids, stateDir)[COORDINATORS] ?? 0);
  await pollListed(client, id, "completed", (n) => n === WAKE_RUNS, "wake runs completed");
  const seen = live.stop().map((sample) => sample.value);
  const lateness = await pool(WAKE_RUNS, CONCURRENCY, async (i) => {
    const { entries } = await client.api("GET", `/v1/runs/${start.ids[i]}/journal`);
    const kind = (/** @type {string} */ name) => entries.find((/** @type {{ kind: string }} */ e) => e.kind === name);
    const [started, fired] = [kind("timer.started"), kind("timer.fired")];
    if (started === undefined || fired === undefined) {
      throw new Error(
        `run ${start.ids[i]}: timer.started ${started !== undefined}, timer.fired ${fired !== undefined}`,
      );
    }
    return Date.parse(fired.at) - Date.parse(started.body.until);
  });
  const stillSleeping = await countListed(client, sleepersId, "waiting");
  if (stillSleeping !== RUNS) {
    throw new Error(`after the wake runs, ${stillSleeping} of ${RUNS} sleepers are listed waiting`);
  }
  return { lateness: lateness.sort((a, b) => a - b), fewestOpen: Math.min(...seen), stillSleeping };
}

/** The wake check's rows. @param {Awaited<ReturnType<typeof wakeCheck>>} wake */
function wakeRows(wake) {
  const scenario = `${WAKE_RUNS} runs sleeping ${WAKE_SLEEP_MS / 1000} s beside them`;
  return [
    [
      scenario,
      "timer.fired after its until: p50 · max",
      `${fmt(quantile(wake.lateness, 0.5))} · ${fmt(wake.lateness.at(-1) ?? NaN)}`,
      "ms",
      `all completed; fewest coordinators open meanwhile: ${wake.fewestOpen}`,
    ],
    [scenario, "  sleepers still listed waiting after", String(wake.stillSleeping), "runs", ""],
  ];
}

/**
 * The V8 heap's row: in use after the warm-up and once every object closed.
 * @param {string} scenario @param {{ usedBytes: number } | null} before @param {{ usedBytes: number } | null} after
 */
function heapRow(scenario, before, after) {
  const used = (/** @type {{ usedBytes: number } | null} */ heap) => (heap ? fmt(heap.usedBytes / 2 ** 20) : "–");
  const per = before && after ? fmt((after.usedBytes - before.usedBytes) / 1024 / RUNS) : "–";
  return [
    scenario,
    "  V8 heap in use: baseline · all closed",
    `${used(before)} · ${used(after)}`,
    "MiB",
    `per run ${per} KiB`,
  ];
}

/** KiB as MiB. @param {number} kib */
const mib = (kib) => fmt(kib / 1024);

/**
 * The memory and disk rows: idle, the peak during the starts, once every object
 * is closed, and per run.
 * @param {string} scenario @param {Snapshot} before @param {Snapshot} peak @param {Snapshot} after
 */
function memoryRows(scenario, before, peak, after) {
  const per = (/** @type {number} */ a, /** @type {number} */ b) => fmt((a - b) / RUNS);
  const [w0, wp, w1] = [before.memory.workerd, peak.memory.workerd, after.memory.workerd];
  const [t0, t1] = [before.memory.tree, after.memory.tree];
  const [c0, c1, d0, d1, a0, a1] = [
    before.disk.coordinators,
    after.disk.coordinators,
    before.disk.d1,
    after.disk.d1,
    before.disk.all,
    after.disk.all,
  ];
  return [
    [
      scenario,
      "workerd RSS: baseline · peak · all closed",
      `${mib(w0.rssKiB)} · ${mib(wp.rssKiB)} · ${mib(w1.rssKiB)}`,
      "MiB",
      `peak with ${peak.live} coordinators open`,
    ],
    [scenario, "  anonymous (RssAnon)", `${mib(w0.anonKiB)} · ${mib(wp.anonKiB)} · ${mib(w1.anonKiB)}`, "MiB", ""],
    [
      scenario,
      "  per run, all closed",
      `${per(w1.rssKiB, w0.rssKiB)} (anon ${per(w1.anonKiB, w0.anonKiB)})`,
      "KiB",
      `at the peak: ${per(wp.rssKiB, w0.rssKiB)}`,
    ],
    [
      scenario,
      "wrangler tree RSS: baseline · all closed",
      `${mib(t0.rssKiB)} · ${mib(t1.rssKiB)}`,
      "MiB",
      `per run ${per(t1.rssKiB, t0.rssKiB)} KiB`,
    ],
    [
      scenario,
      "disk per run: coordinators' SQLite",
      per(c1.bytes / 1024, c0.bytes / 1024),
      "KiB",
      `${fmt((c1.files - c0.files) / RUNS)} files/run, allocated ${per(c1.allocated / 1024, c0.allocated / 1024)} KiB`,
    ],
    [scenario, "  the run index (D1)", per(d1.bytes / 1024, d0.bytes / 1024), "KiB", ""],
    [
      scenario,
      "  the whole state directory",
      per(a1.bytes / 1024, a0.bytes / 1024),
      "KiB",
      `allocated ${per(a1.allocated / 1024, a0.allocated / 1024)} KiB`,
    ],
  ];
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
    for (const kind of WAITS) {
      if (!(kind in WAIT_KINDS)) {
        throw new Error(`--waits: ${kind} is not one of ${Object.keys(WAIT_KINDS).join(", ")}`);
      }
      console.error(`waiting: ${RUNS} runs, ${kind}…`);
      rows.push(...(await measureWaiting(kind)));
    }
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
