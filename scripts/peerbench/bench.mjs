#!/usr/bin/env node
/**
 * Peer benchmark driver: Trellis vs Cloudflare Workflows (local engine) vs
 * Restate, on the same machine, the same workloads, interleaved.
 *
 * Workloads (the shapes of Trellis's own `npm run bench`, scripts/lib/bench-client.mjs):
 *   single      one no-op step
 *   chain       200 sequential no-op steps
 *   chain-http  200 sequential steps, each GET <target>/now (answered at once)
 *   fanout      100 parallel steps, each GET <target>/sleep?ms=100
 *   burst       (only when WORKLOADS names it) BURST_RUNS (1,000) runs of a
 *               BURST_STEPS-step (3) no-op chain, started at once by
 *               BURST_CLIENTS (100) concurrent clients: start throughput, time
 *               until the last run completed, per-run p50/p99 (runBurst)
 *
 * Per run it records:
 *   client_ms  wall-clock at this driver, from just before the start request
 *              until the driver sees the run completed (Trellis: the start
 *              answers once the run ended, `Prefer: wait`; CF Workflows:
 *              polled every POLL_MS; Restate: the ingress call itself returns
 *              on completion)
 *   engine_ms  the engine's own timestamps: Trellis journal run.created → attest;
 *              CF Workflows Date.now() in the fetch handler before create() →
 *              Date.now() at the end of run(); Restate sys_invocation
 *              created_at → completed_at
 *   cpu_ms     CPU time (user+sys) of the engine's processes across the run and
 *              the settle pause after it
 *
 * Everything is started here and stopped here (process groups of the children
 * this script spawned). All three engines stay up for the whole measurement;
 * each round runs single, chain, chain-http, fanout, and within each workload every engine
 * once, in an order rotated every round.
 *
 * Configuration (env): TRELLIS_DIR, CFWF_DIR, RESTATE_DIR (installed projects;
 * run.sh prepares them), REPEATS (15), WARMUP (2), TRELLIS_WAIT_S (60: Trellis's
 * start waits this long for its run to end, `Prefer: wait`; 0: it answers at
 * once), POLL_MS (20, the chains and the fan-out; the Workers engines' runs
 * still going), POLL_MS_SINGLE (2), SETTLE_MS (300), ENGINES
 * (trellis,cfwf,restate), WORKLOADS (single,chain,chain-http,fanout; burst too when
 * named), BURST_RUNS, BURST_CLIENTS, BURST_STEPS, BURST_POLLERS (10: status polls
 * in flight), BURST_TIMEOUT_S (600), OUT_DIR (where
 * results go; default <tmpdir>/peerbench-results), MAX_LIFETIME_S (7200: every
 * engine process is under `timeout`), FSYNC_PROBE (1: after the measurement,
 * count fsync-like calls of one chain and one single run per engine under
 * strace), PLATFORM_FLOOR (0: skip the platform's floor, timed after the
 * rounds through the cfwf Worker), ENGINE_CPUS (empty: every engine may use
 * every CPU; "1": each engine's processes run under `taskset -c 1`, so that an
 * engine that spreads its work over threads and one that runs on one thread
 * get the same CPU; the target stays unconfined). Any RESTATE_* variable is passed to
 * restate-server (e.g. RESTATE_LOG_SERVER__ROCKSDB_DISABLE_WAL_FSYNC=true).
 */
import { execFileSync, spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes, randomUUID } from "node:crypto";
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { cpus, loadavg, tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { prepareTrellisState } from "./trellis-state.mjs";

const HERE = dirname(fileURLToPath(import.meta.url));
const env = process.env;
const need = (name) => {
  if (!env[name]) {
    console.error(`${name} is not set (run.sh sets it)`);
    process.exit(2);
  }
  return resolve(env[name]);
};

/** Every workload, in the order each round runs them; `burst` only when WORKLOADS names it. */
const WORKLOADS = ["single", "chain", "chain-http", "fanout", "burst"];
const DEFAULT_WORKLOADS = ["single", "chain", "chain-http", "fanout"];

const CFG = {
  trellisDir: need("TRELLIS_DIR"),
  cfwfDir: need("CFWF_DIR"),
  restateDir: need("RESTATE_DIR"),
  repeats: Number(env.REPEATS ?? 15),
  warmup: Number(env.WARMUP ?? 2),
  pollMs: {
    "single": Number(env.POLL_MS_SINGLE ?? 2),
    "chain": Number(env.POLL_MS ?? 20),
    "chain-http": Number(env.POLL_MS ?? 20),
    "fanout": Number(env.POLL_MS ?? 20),
    "burst": Number(env.POLL_MS ?? 20),
  },
  settleMs: Number(env.SETTLE_MS ?? 300),
  /** Trellis's start waits this long for the run to end (`Prefer: wait`); 0 answers at once and the run is polled. */
  startWaitS: Number(env.TRELLIS_WAIT_S ?? 60),
  engines: (env.ENGINES ?? "trellis,cfwf,restate").split(",").filter(Boolean),
  workloads: (env.WORKLOADS ?? DEFAULT_WORKLOADS.join(",")).split(",").filter(Boolean),
  outDir: resolve(env.OUT_DIR ?? join(tmpdir(), "peerbench-results")),
  maxLifetimeS: Number(env.MAX_LIFETIME_S ?? 7200),
  /** CPUs every engine process is confined to (`taskset -c`), e.g. "1"; empty: not confined. The target never is. */
  engineCpus: env.ENGINE_CPUS ?? "",
  chainN: 200,
  fanoutN: 100,
  sleepMs: 100,
  runTimeoutMs: 120_000,
  burst: {
    runs: Number(env.BURST_RUNS ?? 1000),
    clients: Number(env.BURST_CLIENTS ?? 100),
    steps: Number(env.BURST_STEPS ?? 3),
    pollers: Number(env.BURST_POLLERS ?? 10),
    timeoutMs: Number(env.BURST_TIMEOUT_S ?? 600) * 1000,
  },
};
for (const [name, list, known] of [
  ["ENGINES", CFG.engines, ["trellis", "cfwf", "restate"]],
  ["WORKLOADS", CFG.workloads, WORKLOADS],
]) {
  const unknown = list.filter((item) => !known.includes(item));
  if (unknown.length) {
    console.error(`${name}: unknown ${unknown.join(", ")} (known: ${known.join(", ")})`);
    process.exit(2);
  }
}

const CLK_TCK = Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim()) || 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const log = (...args) => console.error(`[${new Date().toISOString().slice(11, 23)}]`, ...args);

// ---------------------------------------------------------------- processes

/** Every child this script spawned: { name, child, output() }. Each is its own process group. */
const children = [];

function launch(name, command, args, { cwd, env: childEnv, stdin = "ignore", pinned = true } = {}) {
  // `timeout` ends the engine even if this driver is killed without cleaning up.
  const timed = ["timeout", "-k", "10", String(CFG.maxLifetimeS), command, ...args];
  // Under ENGINE_CPUS every engine process (and all it starts) runs on those CPUs only.
  const argv = pinned && CFG.engineCpus !== "" ? ["taskset", "-c", CFG.engineCpus, ...timed] : timed;
  const child = spawn(argv[0], argv.slice(1), {
    cwd,
    env: childEnv ?? process.env,
    detached: true,
    stdio: [stdin, "pipe", "pipe"],
  });
  let out = "";
  const keep = (chunk) => {
    out += chunk.toString("utf8");
    if (out.length > 200_000) out = out.slice(-200_000);
  };
  child.stderr.on("data", keep);
  const entry = { name, child, output: () => out, keep };
  children.push(entry);
  child.once("exit", (code, signal) => {
    entry.exited = { code, signal };
  });
  return entry;
}

function killGroups(signal) {
  for (const { child } of [...children].reverse()) {
    if (!child.pid) continue;
    for (const pid of [child.pid, ...descendants(child.pid)]) {
      try {
        process.kill(pid, signal);
      } catch {
        /* gone */
      }
    }
    try {
      process.kill(-child.pid, signal);
    } catch {
      /* gone */
    }
  }
}

let cleanedUp = false;
async function cleanup() {
  if (cleanedUp) return;
  cleanedUp = true;
  killGroups("SIGTERM");
  await sleep(2_000);
  killGroups("SIGKILL");
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
}
process.on("exit", () => {
  if (!cleanedUp) killGroups("SIGKILL");
});
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, () => {
    void cleanup().then(() => process.exit(130));
  });
}

const tempDirs = [];
function tempDir(prefix) {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  tempDirs.push(dir);
  return dir;
}

/** /proc/<pid>/stat of every process: pid → { ppid, ticks } */
function procTable() {
  const table = new Map();
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, "utf8");
      const rest = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
      // rest[0] is field 3 (state): ppid is field 4, utime 14, stime 15.
      table.set(Number(name), { ppid: Number(rest[1]), ticks: Number(rest[11]) + Number(rest[12]) });
    } catch {
      /* exited meanwhile */
    }
  }
  return table;
}

function descendants(pid, table = procTable()) {
  const out = [];
  const queue = [pid];
  while (queue.length) {
    const parent = queue.shift();
    for (const [p, info] of table) {
      if (info.ppid === parent && !out.includes(p)) {
        out.push(p);
        queue.push(p);
      }
    }
  }
  return out;
}

/** The processes of one engine (all its spawned roots and their descendants). */
function enginePids(engine, table = procTable()) {
  const pids = [];
  for (const root of engineRoots[engine] ?? []) pids.push(root, ...descendants(root, table));
  return pids.filter((pid) => table.has(pid));
}

function cpuMs(engine) {
  const table = procTable();
  return (enginePids(engine, table).reduce((sum, pid) => sum + table.get(pid).ticks, 0) * 1000) / CLK_TCK;
}

function procStatus(pid) {
  try {
    const text = readFileSync(`/proc/${pid}/status`, "utf8");
    const kb = (key) => Number(text.match(new RegExp(`^${key}:\\s+(\\d+) kB`, "m"))?.[1] ?? 0);
    const cmd = readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").filter(Boolean);
    return {
      pid,
      rssKb: kb("VmRSS"),
      hwmKb: kb("VmHWM"),
      cmd: cmd
        .map((part) => part.split("/").at(-1))
        .join(" ")
        .slice(0, 80),
    };
  } catch {
    return null;
  }
}

/** Machine-wide busy and total jiffies (/proc/stat), to tell how much CPU others used. */
function machineTicks() {
  const [, ...fields] = readFileSync("/proc/stat", "utf8").split("\n")[0].trim().split(/\s+/);
  const n = fields.map(Number);
  const idle = n[3] + (n[4] ?? 0);
  const total = n.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/** Peak of the summed RSS of each engine's processes, sampled every 250 ms. */
const rssPeak = {};
const engineRoots = {};
setInterval(() => {
  const table = procTable();
  for (const engine of Object.keys(engineRoots)) {
    const sum = enginePids(engine, table).reduce((acc, pid) => acc + (procStatus(pid)?.rssKb ?? 0), 0);
    rssPeak[engine] = Math.max(rssPeak[engine] ?? 0, sum);
  }
}, 250).unref();

function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolvePort(port));
    });
  });
}

async function waitFor(what, check, timeoutMs = 90_000, entry = null) {
  const deadline = Date.now() + timeoutMs;
  let last = "";
  for (;;) {
    if (entry?.exited)
      throw new Error(`${what}: process exited ${JSON.stringify(entry.exited)}\n${entry.output().slice(-4000)}`);
    try {
      if (await check()) return;
    } catch (error) {
      last = String(error?.cause?.code ?? error?.message ?? error);
    }
    if (Date.now() > deadline)
      throw new Error(`${what}: not ready after ${timeoutMs} ms (${last})\n${entry?.output().slice(-4000) ?? ""}`);
    await sleep(200);
  }
}

async function firstLine(entry, timeoutMs = 30_000) {
  const timer = setTimeout(() => entry.child.stdout.destroy(new Error("no first line")), timeoutMs);
  for await (const line of createInterface({ input: entry.child.stdout })) {
    clearTimeout(timer);
    entry.child.stdout.on("data", entry.keep);
    entry.child.stdout.resume();
    return line;
  }
  throw new Error(`${entry.name} printed nothing\n${entry.output()}`);
}

const node22 = (dir) => {
  const bin = join(dir, "node_modules", "node", "bin", "node");
  return existsSync(bin) ? bin : process.execPath;
};

// ---------------------------------------------------------------- engines

/** `wrangler dev --local` with the same flags and environment for both Workers projects. */
async function startWrangler(name, dir, vars, prepare = async () => {}) {
  const port = await freePort();
  const inspectorPort = await freePort();
  const tmp = tempDir(`peerbench-${name}-`);
  await prepare({ stateDir: join(tmp, "state"), logDir: join(tmp, "logs") });
  const envFile = join(tmp, "vars.env");
  writeFileSync(
    envFile,
    Object.entries(vars)
      .map(([k, v]) => `${k}=${v}`)
      .join("\n") + "\n",
    { mode: 0o600 },
  );
  const entry = launch(
    name,
    node22(dir),
    [
      join(dir, "node_modules", "wrangler", "bin", "wrangler.js"),
      "dev",
      "--local",
      "--ip",
      "127.0.0.1",
      "--port",
      String(port),
      "--inspector-ip",
      "127.0.0.1",
      "--inspector-port",
      String(inspectorPort),
      "--persist-to",
      join(tmp, "state"),
      "--env-file",
      envFile,
      "--show-interactive-dev-session=false",
    ],
    {
      cwd: dir,
      env: {
        ...process.env,
        CLOUDFLARE_CF_FETCH_ENABLED: "false",
        WRANGLER_SEND_METRICS: "false",
        CLOUDFLARE_INCLUDE_PROCESS_ENV: "false",
        // wrangler's local trace store writes every invocation's spans to SQLite: off, as in Trellis's own bench.
        X_LOCAL_OBSERVABILITY: "false",
        WRANGLER_LOG_PATH: join(tmp, "logs"),
        FORCE_COLOR: "0",
        NO_COLOR: "1",
      },
    },
  );
  entry.child.stdout.on("data", entry.keep);
  const url = `http://127.0.0.1:${port}`;
  await waitFor(
    `${name} wrangler dev`,
    async () => (await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) })).status === 200,
    120_000,
    entry,
  );
  engineRoots[name] = [entry.child.pid];
  return { url, entry };
}

/** The run index writes Trellis logged as failed: none unless the setup is broken (they load the engine). */
const trellisLog = { indexFailures: 0 };
function countIndexFailures(entry) {
  for (const stream of [entry.child.stdout, entry.child.stderr]) {
    createInterface({ input: stream }).on("line", (line) => {
      if (line.includes("writing the run index failed")) trellisLog.indexFailures += 1;
    });
  }
}

/**
 * Trellis's workflows, in the shapes of `npm run bench` (scripts/lib/bench-client.mjs): a no-op
 * `context` task, chains of 200 nodes each `depends_on` the one before, the fan-out as a
 * foreach of 100 with `max_parallel` 100.
 */
function trellisFlows(targetUrl) {
  const noopTask = {
    steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }],
  };
  const httpTask = (ref, url) => ({
    steps: [{ ref, action: { kind: "http", implementation: { method: "GET", url_template: url } } }],
  });
  const chainOf = (task, n = CFG.chainN) => {
    const nodes = {};
    for (let i = 0; i < n; i += 1) nodes[`n${i}`] = { task, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
    return nodes;
  };
  const wait = httpTask("wait", `${targetUrl}/sleep?ms=${CFG.sleepMs}`);
  return {
    "single": { workflow: { id: "peerbench-single", nodes: { only: { task: noopTask } } }, input: {} },
    "chain": { workflow: { id: "peerbench-chain", nodes: chainOf(noopTask) }, input: {} },
    "chain-http": {
      workflow: { id: "peerbench-chain-http", nodes: chainOf(httpTask("get", `${targetUrl}/now`)) },
      input: {},
    },
    "fanout": {
      workflow: {
        id: "peerbench-fanout",
        max_parallel: CFG.fanoutN,
        nodes: { each: { foreach: { items: "$.input.items", max_parallel: CFG.fanoutN }, task: wait } },
      },
      input: { items: Array.from({ length: CFG.fanoutN }, (_, i) => i) },
    },
    "burst": { workflow: { id: "peerbench-burst", nodes: chainOf(noopTask, CFG.burst.steps) }, input: {} },
  };
}

/** Polls a Trellis run still going (the start's wait ran out) until it completed; returns the number of polls. */
async function trellisUntilEnded(api, started, pollMs) {
  let polls = 0;
  const deadline = Date.now() + CFG.runTimeoutMs;
  for (let run = started; ;) {
    if (["completed", "failed", "cancelled"].includes(run.status)) {
      if (run.status !== "completed")
        throw new Error(`trellis run ${run.run_id} ended ${run.status}: ${JSON.stringify(run.error)}`);
      return polls;
    }
    if (Date.now() > deadline)
      throw new Error(`trellis run ${run.run_id} not done after ${CFG.runTimeoutMs} ms (status ${run.status})`);
    await sleep(pollMs);
    run = await api("GET", `/v1/runs/${started.run_id}`);
    polls += 1;
  }
}

/** Trellis's `wrangler dev`, after the run index's D1 migrations (as `npm run dev` applies them: trellis-state.mjs). */
async function launchTrellis() {
  const token = `peerbench-${randomBytes(8).toString("hex")}`;
  const key = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");
  const { url, entry } = await startWrangler(
    "trellis",
    CFG.trellisDir,
    { API_TOKENS: token, JOURNAL_SIGNING_KEY: key },
    (dirs) => prepareTrellisState({ trellisDir: CFG.trellisDir, ...dirs }),
  );
  countIndexFailures(entry);
  return { url, token };
}

async function startTrellis(targetUrl) {
  const { url, token } = await launchTrellis();
  const api = async (method, path, body, headers = {}) => {
    const response = await fetch(`${url}${path}`, {
      method,
      headers: { "authorization": `Bearer ${token}`, "content-type": "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(CFG.runTimeoutMs),
    });
    const json = await response.json();
    if (response.status >= 400) throw new Error(`${method} ${path} → ${response.status}: ${JSON.stringify(json)}`);
    return json;
  };
  const flows = trellisFlows(targetUrl);
  await api("POST", "/v1/definitions", { workflows: Object.values(flows).map((flow) => flow.workflow) });
  return {
    async run(workload) {
      const flow = flows[workload];
      const t0 = performance.now();
      const startedAt = Date.now();
      // The start waits for the run to end (Prefer: wait, at most 60 s), as Restate's call does;
      // a run still going after that is polled.
      const started = await api(
        "POST",
        `/v1/workflows/${flow.workflow.id}/runs`,
        { input: flow.input },
        { prefer: `wait=${CFG.startWaitS}` },
      );
      const runId = started.run_id;
      const startMs = performance.now() - t0;
      const polls = await trellisUntilEnded(api, started, CFG.pollMs[workload]);
      const client = performance.now() - t0;
      const endedAt = Date.now();
      // Read after the CPU window closes (see measure): the journal read is not part of the run.
      const later = async () => {
        const { entries } = await api("GET", `/v1/runs/${runId}/journal`);
        const first = Date.parse(entries[0].at);
        const last = Date.parse(entries.at(-1).at);
        // Same machine clock: the driver's Date.now() and workerd's.
        return {
          engineMs: last - first,
          beforeJournalMs: first - startedAt,
          afterJournalMs: endedAt - last,
          journalEntries: entries.length,
        };
      };
      return { client, startMs, polls, startedAt, endedAt, id: runId, later };
    },
    burst: trellisBurst(api, flows.burst.workflow.id),
  };
}

/**
 * Trellis's side of the burst: a start is `POST /v1/workflows/{id}/runs`. A run whose start
 * answered it ended (a chain of pure tasks runs inside its start) completed then; the others
 * are polled run by run.
 */
function trellisBurst(api, workflowId) {
  return {
    start: async () => {
      const started = await api("POST", `/v1/workflows/${workflowId}/runs`, { input: {} });
      return { id: started.run_id, completed: started.status === "completed" };
    },
    // Engine-side: the run's created_at → its updated_at, the time of the commit that completed it.
    observe: (runs, deadline) =>
      pollEach(runs, deadline, async (id) => {
        const run = await api("GET", `/v1/runs/${id}`);
        if (run.status === "completed") return { engineMs: Date.parse(run.updated_at) - Date.parse(run.created_at) };
        if (["failed", "cancelled"].includes(run.status))
          return { error: `ended ${run.status}: ${JSON.stringify(run.error)}` };
        return null;
      }),
  };
}

async function startCfwf(targetUrl) {
  const { url } = await startWrangler("cfwf", CFG.cfwfDir, { PEERBENCH: "1" });
  floorUrl = url;
  const params = {
    "single": { kind: "single", n: 1 },
    "chain": { kind: "chain", n: CFG.chainN },
    "chain-http": { kind: "chain-http", n: CFG.chainN, url: `${targetUrl}/now` },
    "fanout": { kind: "fanout", n: CFG.fanoutN, url: `${targetUrl}/sleep?ms=${CFG.sleepMs}` },
  };
  return {
    async run(workload) {
      const t0 = performance.now();
      const startedAt = Date.now();
      const started = await fetch(`${url}/start`, {
        method: "POST",
        body: JSON.stringify({ url: "", ...params[workload] }),
      });
      if (started.status !== 200) throw new Error(`cfwf /start → ${started.status}: ${await started.text()}`);
      const { id } = await started.json();
      const startMs = performance.now() - t0;
      let polls = 0;
      const deadline = Date.now() + CFG.runTimeoutMs;
      let status;
      for (;;) {
        const response = await fetch(`${url}/status?id=${encodeURIComponent(id)}`);
        status = await response.json();
        polls += 1;
        if (status.status === "complete") break;
        if (["errored", "terminated"].includes(status.status))
          throw new Error(`cfwf instance ${id} ended ${status.status}: ${JSON.stringify(status.error)}`);
        if (Date.now() > deadline)
          throw new Error(`cfwf instance ${id} not done after ${CFG.runTimeoutMs} ms (status ${status.status})`);
        await sleep(CFG.pollMs[workload]);
      }
      const client = performance.now() - t0;
      return {
        client,
        startMs,
        engineMs: status.output.tEnd - status.output.t0,
        polls,
        startedAt,
        endedAt: Date.now(),
        id,
      };
    },
    burst: cfwfBurst(url),
  };
}

/** Cloudflare Workflows' side of the burst: a start is the Worker's `POST /start`; completion is polled run by run. */
function cfwfBurst(url) {
  return {
    async start() {
      const response = await fetch(`${url}/start`, {
        method: "POST",
        body: JSON.stringify({ kind: "chain", n: CFG.burst.steps, url: "" }),
        signal: AbortSignal.timeout(CFG.runTimeoutMs),
      });
      if (response.status !== 200)
        throw new Error(`/start → ${response.status}: ${(await response.text()).slice(0, 200)}`);
      return (await response.json()).id;
    },
    // Engine-side: Date.now() before create() in the fetch handler → Date.now() at the end of run().
    observe: (runs, deadline) =>
      pollEach(runs, deadline, async (id) => {
        const response = await fetch(`${url}/status?id=${encodeURIComponent(id)}`, {
          signal: AbortSignal.timeout(CFG.runTimeoutMs),
        });
        if (response.status !== 200) throw new Error(`/status → ${response.status}`);
        const status = await response.json();
        if (status.status === "complete") return { engineMs: status.output.tEnd - status.output.t0 };
        if (["errored", "terminated"].includes(status.status))
          return { error: `ended ${status.status}: ${JSON.stringify(status.error)}` };
        return null;
      }),
  };
}

/** The cfwf Worker's URL: its `/floor/*` routes measure the platform under `wrangler dev` with no engine. */
let floorUrl = null;

/**
 * The platform's floor (PLATFORM_FLOOR, on unless 0; needs the cfwf engine), after the rounds:
 * the parts every engine on Workers is built from, timed through the same `wrangler dev`.
 * Medians in ms: a request answered at once; a new SQLite Durable Object that writes one
 * row; and per step of 200 in one object, a row written then a GET of the target's /now,
 * from the object itself and through a service-binding call (an executor's hop), and that
 * call with the invariants an engine keeps around it (`/floor/signed-chain-http`: signed,
 * chained entries and a state row in one commit, a task-shaped call and result).
 */
async function platformFloor(targetUrl) {
  if (floorUrl === null || env.PLATFORM_FLOOR === "0") return null;
  const timed = async (times, request) => {
    const values = [];
    for (let i = 0; i < times; i += 1) {
      const t0 = performance.now();
      const response = await request();
      const body = await response.json().catch(() => null);
      if (!response.ok) throw new Error(`floor request → ${response.status}`);
      values.push(body?.ms ?? performance.now() - t0);
    }
    return median(values);
  };
  const post = (path, body) => () => fetch(`${floorUrl}${path}`, { method: "POST", body: JSON.stringify(body) });
  const chain = (path, rpc) => post(path, { n: CFG.chainN, url: `${targetUrl}/now`, rpc });
  const noopMs = await timed(30, () => fetch(`${floorUrl}/floor/noop`));
  const newObjectMs = await timed(30, post("/floor/object", {}));
  // The three chains take turns, nine rounds, so that the machine's drift reaches each alike.
  const chains = { plain: [], rpc: [], signed: [] };
  for (let round = 0; round < 9; round += 1) {
    chains.plain.push(await timed(1, chain("/floor/chain-http", false)));
    chains.rpc.push(await timed(1, chain("/floor/chain-http", true)));
    chains.signed.push(await timed(1, chain("/floor/signed-chain-http", true)));
  }
  return {
    noopMs,
    newObjectMs,
    chainHttpMsPerStep: median(chains.plain) / CFG.chainN,
    chainHttpRpcMsPerStep: median(chains.rpc) / CFG.chainN,
    signedChainHttpMsPerStep: median(chains.signed) / CFG.chainN,
  };
}

function floorText(floor) {
  if (floor === null) return "";
  return (
    `\nPlatform floor under wrangler dev (the cfwf Worker's /floor routes, no engine), medians: ` +
    `a request answered at once ${fmt(floor.noopMs)} ms; a new SQLite Durable Object writing one row ${fmt(floor.newObjectMs)} ms; ` +
    `per step of ${CFG.chainN} (write a row, then GET /now) ${fmt(floor.chainHttpMsPerStep, 2)} ms, ` +
    `with the GET through a service-binding call ${fmt(floor.chainHttpRpcMsPerStep, 2)} ms, ` +
    `and with four entries signed and chained, written with a state row, a task-shaped call and result ` +
    `${fmt(floor.signedChainHttpMsPerStep, 2)} ms\n`
  );
}

function restateBinary(dir) {
  const bin = join(
    dir,
    "node_modules",
    "@restatedev",
    `restate-server-${process.platform}-${process.arch === "x64" ? "x64" : process.arch}`,
    "bin",
    "restate-server",
  );
  if (!existsSync(bin)) throw new Error(`no restate-server binary at ${bin}`);
  return bin;
}

const restateInfo = {};
/** restate-server on free loopback ports, in a fresh base dir; resolves when its admin API and ingress answer. */
async function launchRestateServer() {
  const [ingressPort, adminPort, fabricPort] = [await freePort(), await freePort(), await freePort()];
  const tmp = tempDir("peerbench-restate-");
  const bin = restateBinary(CFG.restateDir);
  const serverEnv = {
    ...process.env,
    RESTATE_INGRESS__BIND_ADDRESS: `127.0.0.1:${ingressPort}`,
    RESTATE_ADMIN__BIND_ADDRESS: `127.0.0.1:${adminPort}`,
    RESTATE_BIND_ADDRESS: `127.0.0.1:${fabricPort}`,
    RESTATE_ADVERTISED_ADDRESS: `http://127.0.0.1:${fabricPort}/`,
    RESTATE_LISTEN_MODE: "tcp",
    RESTATE_DISABLE_TELEMETRY: "true",
    RESTATE_NODE_NAME: "peerbench",
    RESTATE_LOG_DISABLE_ANSI_CODES: "true",
    RESTATE_LOG_FILTER: env.RESTATE_LOG_FILTER ?? "warn",
  };
  // The configuration it runs with (defaults + the environment), for the record: durability settings live there.
  restateInfo.config = execFileSync(bin, ["--dump-config", "--base-dir", join(tmp, "data")], {
    env: serverEnv,
    encoding: "utf8",
  });
  restateInfo.version = execFileSync(bin, ["--version"], { encoding: "utf8" }).trim();
  const server = launch("restate-server", bin, ["--no-logo", "--base-dir", join(tmp, "data")], {
    cwd: tmp,
    env: serverEnv,
  });
  server.child.stdout.on("data", server.keep);
  const admin = `http://127.0.0.1:${adminPort}`;
  const ingress = `http://127.0.0.1:${ingressPort}`;
  await waitFor("restate admin", async () => (await fetch(`${admin}/health`)).status === 200, 90_000, server);
  await waitFor(
    "restate ingress",
    async () => (await fetch(`${ingress}/restate/health`)).status === 200,
    90_000,
    server,
  );
  return { server, admin, ingress };
}

/** The Node service (peers/restate/service.mjs), registered as a deployment through the admin API. */
async function startRestateService(server, admin) {
  const servicePort = await freePort();
  const service = launch("restate-service", node22(CFG.restateDir), [join(CFG.restateDir, "service.mjs")], {
    cwd: CFG.restateDir,
    env: { ...process.env, PORT: String(servicePort) },
  });
  const line = await firstLine(service);
  if (!line.startsWith("listening")) throw new Error(`restate service: ${line}`);
  engineRoots.restate = [server.child.pid, service.child.pid];
  await waitFor(
    "restate deployment registration",
    async () => {
      const response = await fetch(`${admin}/deployments`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ uri: `http://127.0.0.1:${servicePort}`, force: true }),
      });
      if (response.status >= 300) throw new Error(`${response.status} ${await response.text()}`);
      return true;
    },
    60_000,
    server,
  );
}

async function startRestate(targetUrl) {
  const { server, admin, ingress } = await launchRestateServer();
  await startRestateService(server, admin);
  const names = {
    "single": "BenchSingle",
    "chain": "BenchChain",
    "chain-http": "BenchChainHttp",
    "fanout": "BenchFanout",
  };
  const inputs = {
    "single": {},
    "chain": { n: CFG.chainN },
    "chain-http": { n: CFG.chainN, url: `${targetUrl}/now` },
    "fanout": { n: CFG.fanoutN, url: `${targetUrl}/sleep?ms=${CFG.sleepMs}` },
  };
  const query = async (sql) => {
    const response = await fetch(`${admin}/query`, {
      method: "POST",
      headers: { "content-type": "application/json", "accept": "application/json" },
      body: JSON.stringify({ query: sql }),
    });
    return (await response.json()).rows ?? [];
  };
  return {
    async run(workload) {
      const key = randomUUID();
      const t0 = performance.now();
      const startedAt = Date.now();
      const response = await fetch(`${ingress}/${names[workload]}/${key}/run`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify(inputs[workload]),
        signal: AbortSignal.timeout(CFG.runTimeoutMs),
      });
      const text = await response.text();
      const client = performance.now() - t0;
      const endedAt = Date.now();
      if (response.status !== 200)
        throw new Error(`restate ${names[workload]} → ${response.status}: ${text.slice(0, 500)}`);
      // Read after the CPU window closes (see measure): the SQL query is not part of the run.
      const later = async () => {
        for (let attempt = 0; attempt < 20; attempt += 1) {
          const [row] = await query(
            `SELECT created_at, completed_at FROM sys_invocation WHERE target_service_key = '${key}'`,
          );
          if (row?.completed_at) return { engineMs: Date.parse(row.completed_at) - Date.parse(row.created_at) };
          await sleep(50);
        }
        return { engineMs: null };
      };
      return { client, polls: 0, startedAt, endedAt, id: key, later };
    },
    burst: restateBurst(ingress, query),
  };
}

/**
 * Restate's side of the burst: each start is the ingress's `…/run/send`, which answers once
 * the invocation is accepted (durably logged), not when it completes. Completion is read from
 * Restate's own table, sys_invocation, one query of the burst's keys per POLL_MS.
 */
function restateBurst(ingress, query) {
  let prefix = "";
  return {
    async start(i) {
      if (i === 0) prefix = `burst-${randomBytes(4).toString("hex")}`;
      const key = `${prefix}-${i}`;
      const response = await fetch(`${ingress}/BenchChain/${key}/run/send`, {
        method: "POST",
        headers: { "content-type": "application/json" },
        body: JSON.stringify({ n: CFG.burst.steps }),
        signal: AbortSignal.timeout(CFG.runTimeoutMs),
      });
      const text = await response.text();
      if (response.status >= 300) throw new Error(`send → ${response.status}: ${text.slice(0, 200)}`);
      return key;
    },
    async observe(runs, deadline) {
      const byKey = new Map(runs.map((run) => [run.id, run]));
      let polls = 0;
      let pollErrors = 0;
      while (byKey.size > 0 && performance.now() < deadline) {
        polls += 1;
        try {
          const rows = await query(
            `SELECT target_service_key, status, completion_result, completion_failure, created_at, completed_at ` +
              `FROM sys_invocation WHERE target_service_name = 'BenchChain' AND target_service_key LIKE '${prefix}-%'`,
          );
          const seenAt = performance.now();
          for (const row of rows) {
            const run = byKey.get(row.target_service_key);
            if (!run || row.status !== "completed") continue;
            run.doneAt = seenAt;
            if (row.completion_result === "success")
              run.engineMs = Date.parse(row.completed_at) - Date.parse(row.created_at);
            else run.error = `ended ${row.completion_result}: ${row.completion_failure}`;
            byKey.delete(run.id);
          }
        } catch (error) {
          pollErrors += 1;
          if (pollErrors === 1) log(`restate burst query: ${error.message}`);
        }
        if (byKey.size > 0) await sleep(CFG.pollMs.burst);
      }
      for (const run of byKey.values()) run.error = `not completed after ${CFG.burst.timeoutMs} ms`;
      return { polls, pollErrors };
    },
  };
}

// ---------------------------------------------------------------- burst

/**
 * Polls each run's status until it has ended: BURST_POLLERS polls in flight at most, the runs
 * taken in turn, no run polled more often than every POLL_MS. `pollOne(id)` answers null while
 * the run goes on, `{ engineMs }` when it completed, `{ error }` when it ended otherwise; a poll
 * that throws is counted and the run polled again later.
 */
async function pollEach(runs, deadline, pollOne) {
  const queue = [...runs];
  let polls = 0;
  let pollErrors = 0;
  const poller = async () => {
    while (queue.length > 0) {
      const run = queue.shift();
      const wait = (run.polledAt ?? 0) + CFG.pollMs.burst - performance.now();
      if (wait > 0) await sleep(wait);
      run.polledAt = performance.now();
      polls += 1;
      let answer = null;
      try {
        answer = await pollOne(run.id);
      } catch (error) {
        pollErrors += 1;
        if (pollErrors <= 3) log(`burst poll ${run.id}: ${error.message}`);
      }
      if (answer === null) {
        if (performance.now() < deadline) queue.push(run);
        else run.error = `not completed after ${CFG.burst.timeoutMs} ms`;
        continue;
      }
      run.doneAt = performance.now();
      if (answer.error) run.error = answer.error;
      else run.engineMs = answer.engineMs;
    }
  };
  await Promise.all(Array.from({ length: CFG.burst.pollers }, poller));
  return { polls, pollErrors };
}

/** The p-th percentile (nearest rank) of the finite values, or null. */
function percentile(values, p) {
  const sorted = values.filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (!sorted.length) return null;
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

/**
 * One burst on one engine: BURST_RUNS starts from BURST_CLIENTS concurrent clients, each sending
 * its next start as soon as its last one was answered. Completion is observed only once every
 * start has been answered, so that no poll competes with the starts being measured (the engine's
 * `observe`). Times are from the first start request sent.
 */
async function runBurst(adapter) {
  const { runs: n, clients, timeoutMs } = CFG.burst;
  const runs = Array.from({ length: n }, (_, i) => ({ i, id: null, error: null, doneAt: null, engineMs: null }));
  const t0 = performance.now();
  const startedAt = Date.now();
  let next = 0;
  const client = async () => {
    while (next < n) {
      const run = runs[next++];
      run.sentAt = performance.now();
      try {
        // An id, or { id, completed } from an engine whose start can answer that the run ended.
        const answer = await adapter.start(run.i);
        run.id = typeof answer === "string" ? answer : answer.id;
        run.endedInStart = typeof answer !== "string" && answer.completed;
      } catch (error) {
        run.error = `start: ${String(error.message).slice(0, 300)}`;
      }
      run.answeredAt = performance.now();
      if (run.endedInStart) run.doneAt = run.answeredAt;
    }
  };
  await Promise.all(Array.from({ length: Math.min(clients, n) }, client));
  const startSpanMs = Math.max(...runs.map((run) => run.answeredAt)) - t0;
  const started = runs.filter((run) => run.id !== null);
  const open = started.filter((run) => !run.endedInStart);
  const { polls, pollErrors } = await adapter.observe(open, t0 + timeoutMs);
  const completed = runs.filter((run) => run.doneAt !== null && run.error === null);
  const failed = runs.filter((run) => run.error !== null);
  const lastDone = Math.max(...completed.map((run) => run.doneAt));
  const clientRun = completed.map((run) => run.doneAt - run.sentAt);
  const engineRun = completed.map((run) => run.engineMs);
  const startRequest = started.map((run) => run.answeredAt - run.sentAt);
  return {
    client: completed.length ? lastDone - t0 : null,
    startSpanMs,
    startsPerS: started.length / (startSpanMs / 1000),
    runs: n,
    started: started.length,
    completed: completed.length,
    failed: failed.length,
    failures: failed.slice(0, 5).map((run) => run.error),
    polls,
    pollErrors,
    startP50: percentile(startRequest, 50),
    startP99: percentile(startRequest, 99),
    clientP50: percentile(clientRun, 50),
    clientP99: percentile(clientRun, 99),
    engineP50: percentile(engineRun, 50),
    engineP99: percentile(engineRun, 99),
    engineMs: null,
    startedAt,
    endedAt: Date.now(),
    ...(failed.length ? { error: `${failed.length} of ${n} runs did not complete: ${failed[0].error}` } : {}),
  };
}

// ---------------------------------------------------------------- durability probe

/**
 * FSYNC_PROBE=1 (after the measured rounds, so it cannot disturb them): runs
 * one chain and one single run per engine under `strace -f -c` attached to the
 * engine's processes, and counts the calls that force data to disk.
 */
async function fsyncProbe(engines) {
  const result = {};
  for (const engine of CFG.engines) {
    result[engine] = {};
    for (const workload of ["chain", "single"]) {
      const out = join(tempDir("peerbench-strace-"), "strace.txt");
      const pids = enginePids(engine);
      const tracer = spawn(
        "strace",
        [
          "-f",
          "-c",
          "-o",
          out,
          "-e",
          "trace=fsync,fdatasync,sync_file_range,syncfs,msync",
          ...pids.flatMap((pid) => ["-p", String(pid)]),
        ],
        {
          stdio: ["ignore", "ignore", "pipe"],
        },
      );
      let err = "";
      tracer.stderr.on("data", (c) => (err += c));
      await sleep(1_000);
      const sample = await engines[engine].run(workload).catch((error) => ({ error: error.message }));
      await sleep(CFG.settleMs);
      const exited = new Promise((r) => tracer.once("exit", r));
      tracer.kill("SIGINT");
      await Promise.race([exited, sleep(5_000)]);
      let text = "";
      try {
        text = readFileSync(out, "utf8");
      } catch {
        text = err;
      }
      const calls = {};
      for (const line of text.split("\n")) {
        const m = line.trim().match(/^[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)$/);
        if (m && m[2] !== "total") calls[m[2]] = Number(m[1]);
      }
      result[engine][workload] = { calls, error: sample.error ?? null };
      log(
        `fsync probe ${engine} ${workload}: ${JSON.stringify(calls)}${sample.error ? ` (run failed: ${sample.error})` : ""}`,
      );
    }
  }
  return result;
}

// ---------------------------------------------------------------- measurement

const median = (values) => {
  const sorted = values.filter((v) => v !== null && Number.isFinite(v)).sort((a, b) => a - b);
  if (!sorted.length) return null;
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};
const min = (values) => Math.min(...values.filter((v) => v !== null && Number.isFinite(v)));
const max = (values) => Math.max(...values.filter((v) => v !== null && Number.isFinite(v)));

async function targetLog(targetUrl, action) {
  if (action === "clear") await fetch(`${targetUrl}/log/clear`, { method: "POST" });
  else return (await fetch(`${targetUrl}/log`)).json();
}

async function measure(engines, engine, workload, targetUrl, round) {
  if (workload === "fanout" || workload === "chain-http") await targetLog(targetUrl, "clear");
  const cpuBefore = cpuMs(engine);
  let sample;
  try {
    sample = workload === "burst" ? await runBurst(engines[engine].burst) : await engines[engine].run(workload);
  } catch (error) {
    log(`ERROR ${engine} ${workload} round ${round}: ${error.message}`);
    sample = { error: String(error.message).slice(0, 1000) };
  }
  if (workload === "fanout" && !sample.error) {
    const { arrived, answered } = await targetLog(targetUrl);
    sample.target = {
      requests: arrived.length,
      firstArrivalMs: Math.min(...arrived) - sample.startedAt,
      arrivalSpreadMs: Math.max(...arrived) - Math.min(...arrived),
      lastAnswerToDoneMs: sample.endedAt - Math.max(...answered),
    };
  }
  if (workload === "chain-http" && !sample.error) {
    // Every step must have made its GET: a chain that answered without reaching the target measured nothing.
    const { now } = await targetLog(targetUrl);
    sample.target = { requests: now };
    if (now !== CFG.chainN) sample.error = `the target saw ${now} GETs, not ${CFG.chainN}`;
  }
  await sleep(CFG.settleMs);
  const cpu = cpuMs(engine) - cpuBefore;
  const { later, ...rest } = sample;
  const extra = later ? await later().catch((error) => ({ engineMs: null, laterError: String(error.message) })) : {};
  return { ...rest, ...extra, cpuMs: cpu, engine, workload, round, loadavg1: loadavg()[0] };
}

async function peerFloor(targetUrl) {
  const started = performance.now();
  await Promise.all(
    Array.from({ length: CFG.fanoutN }, async () => (await fetch(`${targetUrl}/sleep?ms=${CFG.sleepMs}`)).text()),
  );
  return performance.now() - started;
}

function versions() {
  const read = (path) => {
    try {
      return JSON.parse(readFileSync(path, "utf8")).version;
    } catch {
      return null;
    }
  };
  let trellisCommit = null;
  try {
    trellisCommit = execFileSync("git", ["-C", CFG.trellisDir, "rev-parse", "--short", "HEAD"], {
      encoding: "utf8",
    }).trim();
  } catch {
    /* not a git checkout */
  }
  return {
    trellisCommit,
    trellisWrangler: read(join(CFG.trellisDir, "node_modules", "wrangler", "package.json")),
    trellisMiniflare: read(join(CFG.trellisDir, "node_modules", "miniflare", "package.json")),
    cfwfWrangler: read(join(CFG.cfwfDir, "node_modules", "wrangler", "package.json")),
    cfwfMiniflare: read(join(CFG.cfwfDir, "node_modules", "miniflare", "package.json")),
    restateServer: restateInfo.version ?? null,
    restateSdk: read(join(CFG.restateDir, "node_modules", "@restatedev", "restate-sdk", "package.json")),
    node22: execFileSync(node22(CFG.restateDir), ["--version"], { encoding: "utf8" }).trim(),
    driverNode: process.version,
    cpus: cpus().length,
    engineCpus: CFG.engineCpus || "all",
  };
}

function fmt(value, digits = 1) {
  return value === null || value === undefined || !Number.isFinite(value) ? "–" : value.toFixed(digits);
}

const spread = (values) => ({
  median: median(values),
  min: values.length ? min(values) : null,
  max: values.length ? max(values) : null,
});

/** One engine's numbers on one workload; ratios are to Trellis's run of the same workload in the same round. */
function summarizeEngine(samples, workload, engine) {
  const mine = samples.filter((s) => s.engine === engine && s.workload === workload);
  const ok = mine.filter((s) => !s.error);
  const ratios = { client: [], engine: [] };
  for (const s of ok) {
    const t = samples.find((x) => x.engine === "trellis" && x.workload === workload && x.round === s.round && !x.error);
    if (!t) continue;
    ratios.client.push(s.client / t.client);
    if (s.engineMs !== null && t.engineMs !== null) ratios.engine.push(s.engineMs / t.engineMs);
  }
  return {
    n: ok.length,
    errors: mine.length - ok.length,
    client: spread(ok.map((s) => s.client)),
    engine: spread(ok.map((s) => s.engineMs)),
    ratioClient: spread(ratios.client),
    ratioEngine: spread(ratios.engine),
    cpuMsPerRun: ok.length ? ok.reduce((a, s) => a + s.cpuMs, 0) / ok.length : null,
    polls: median(ok.map((s) => s.polls)),
    startRequestMs: median(ok.map((s) => s.startMs ?? null)),
    beforeJournalMs: median(ok.map((s) => s.beforeJournalMs ?? null)),
    afterJournalMs: median(ok.map((s) => s.afterJournalMs ?? null)),
    target:
      workload === "fanout"
        ? {
            firstArrivalMs: median(ok.map((s) => s.target?.firstArrivalMs)),
            arrivalSpreadMs: median(ok.map((s) => s.target?.arrivalSpreadMs)),
            lastAnswerToDoneMs: median(ok.map((s) => s.target?.lastAnswerToDoneMs)),
          }
        : undefined,
  };
}

/** The burst's numbers of one engine: medians over its bursts, and every burst's failures. */
function summarizeBurst(samples, engine) {
  const mine = samples.filter((s) => s.engine === engine && s.workload === "burst");
  const measured = mine.filter((s) => s.startsPerS !== undefined);
  const sum = (key) => measured.reduce((a, s) => a + s[key], 0);
  const ratio = (key) =>
    measured
      .map((s) => {
        const t = samples.find((x) => x.engine === "trellis" && x.workload === "burst" && x.round === s.round);
        return t?.[key] ? s[key] / t[key] : null;
      })
      .filter((v) => v !== null);
  const med = (key) => median(measured.map((s) => s[key]));
  return {
    bursts: mine.length,
    harnessErrors: mine.length - measured.length,
    runs: sum("runs"),
    started: sum("started"),
    completed: sum("completed"),
    failed: sum("failed"),
    pollErrors: sum("pollErrors"),
    startsPerS: spread(measured.map((s) => s.startsPerS)),
    startSpanMs: spread(measured.map((s) => s.startSpanMs)),
    lastDoneMs: spread(measured.map((s) => s.client)),
    ratioStartsPerS: spread(ratio("startsPerS")),
    ratioLastDone: spread(ratio("client")),
    startP50: med("startP50"),
    startP99: med("startP99"),
    clientP50: med("clientP50"),
    clientP99: med("clientP99"),
    engineP50: med("engineP50"),
    engineP99: med("engineP99"),
    polls: med("polls"),
    cpuMsPerBurst: measured.length ? sum("cpuMs") / measured.length : null,
  };
}

/** The burst's table: one row per engine. */
function burstTable(summary) {
  const { runs, clients, steps } = CFG.burst;
  const range = (x, d = 1) => `${fmt(x.median, d)} (${fmt(x.min, d)}–${fmt(x.max, d)})`;
  const lines = [
    "",
    `Burst: ${runs} runs of a ${steps}-step chain, started by ${clients} concurrent clients; medians over the bursts (min–max); per-run percentiles are each burst's, then the median over bursts:`,
    "",
    `| engine | bursts | runs completed / started / failed | starts/s | all starts answered, ms | last run completed, ms | starts/s ratio vs Trellis | last-completed ratio vs Trellis | start request p50 / p99 ms | per run, client p50 / p99 ms | per run, engine-side p50 / p99 ms | polls per burst (failed, all bursts) | CPU ms per burst |`,
    `|---|---|---|---|---|---|---|---|---|---|---|---|---|`,
  ];
  for (const engine of CFG.engines) {
    const b = summary.burst[engine];
    lines.push(
      `| ${engine} | ${b.bursts}${b.harnessErrors ? ` (+${b.harnessErrors} not measured)` : ""} | ${b.completed} / ${b.started} / ${b.failed} of ${b.runs} | ` +
        `${range(b.startsPerS)} | ${range(b.startSpanMs, 0)} | ${range(b.lastDoneMs, 0)} | ${range(b.ratioStartsPerS, 2)} | ${range(b.ratioLastDone, 2)} | ` +
        `${fmt(b.startP50, 0)} / ${fmt(b.startP99, 0)} | ${fmt(b.clientP50, 0)} / ${fmt(b.clientP99, 0)} | ${fmt(b.engineP50, 0)} / ${fmt(b.engineP99, 0)} | ` +
        `${fmt(b.polls, 0)} (${b.pollErrors}) | ${fmt(b.cpuMsPerBurst, 0)} |`,
    );
  }
  return lines;
}

/** The workloads that are one run at a time (all but the burst), as the main table shows them. */
const perRunWorkloads = () => CFG.workloads.filter((w) => w !== "burst");

/** The main table: one row per workload and engine. */
function summaryTable(summary) {
  const perStep = ["per step", CFG.chainN, "ms/step"];
  const unit = {
    "single": ["latency", 1, "ms"],
    "chain": perStep,
    "chain-http": perStep,
    "fanout": [`makespan ÷ ${CFG.sleepMs} ms`, CFG.sleepMs, "×"],
  };
  const lines = [
    `| workload | engine | n | client median ms (min–max) | ratio vs Trellis, same round (min–max) | engine-side median ms (min–max) | engine-side ratio (min–max) | derived (client / engine) | CPU ms per run |`,
    `|---|---|---|---|---|---|---|---|---|`,
  ];
  for (const workload of perRunWorkloads()) {
    for (const engine of CFG.engines) {
      const s = summary[workload][engine];
      const [label, div, u] = unit[workload];
      lines.push(
        `| ${workload} | ${engine} | ${s.n}${s.errors ? ` (+${s.errors} failed)` : ""} | ${fmt(s.client.median)} (${fmt(s.client.min)}–${fmt(s.client.max)}) | ` +
          `${fmt(s.ratioClient.median, 2)} (${fmt(s.ratioClient.min, 2)}–${fmt(s.ratioClient.max, 2)}) | ` +
          `${fmt(s.engine.median)} (${fmt(s.engine.min)}–${fmt(s.engine.max)}) | ${fmt(s.ratioEngine.median, 2)} (${fmt(s.ratioEngine.min, 2)}–${fmt(s.ratioEngine.max, 2)}) | ` +
          `${label}: ${fmt(s.client.median / div, 2)} / ${fmt(s.engine.median / div, 2)} ${u} | ${fmt(s.cpuMsPerRun, 0)} |`,
      );
    }
  }
  return lines;
}

/** Under the table: the start request, Trellis's client time split, the fan-out at the target. */
function summaryNotes(summary, floors) {
  const lines = [
    "",
    `Start request (POST that creates the run, until its answer; Restate has none, its one call waits for the result), medians in ms:`,
  ];
  for (const workload of perRunWorkloads()) {
    lines.push(
      `- ${workload}: ${CFG.engines.map((e) => `${e} ${fmt(summary[workload][e].startRequestMs)}`).join(", ")}`,
    );
  }
  if (CFG.engines.includes("trellis")) {
    lines.push(
      `- Trellis, client time split (medians, ms): before run.created (start request, catalog, new coordinator) | journal | after the attestation (until the driver's poll saw it): ` +
        perRunWorkloads()
          .map(
            (w) =>
              `${w} ${fmt(summary[w].trellis.beforeJournalMs, 0)} | ${fmt(summary[w].trellis.engine.median, 0)} | ${fmt(summary[w].trellis.afterJournalMs, 0)}`,
          )
          .join("; "),
    );
  }
  if (CFG.workloads.includes("fanout")) {
    lines.push(
      "",
      `Fan-out at the target (medians): ms from the start request to the first request; first → last request; last answer → completion seen by the driver`,
    );
    for (const engine of CFG.engines) {
      const t = summary.fanout[engine].target ?? {};
      lines.push(
        `- ${engine}: ${fmt(t.firstArrivalMs, 0)} ms; ${fmt(t.arrivalSpreadMs, 0)} ms; ${fmt(t.lastAnswerToDoneMs, 0)} ms`,
      );
    }
    lines.push(
      `- peer floor (100 concurrent GETs straight from Node): median ${fmt(median(floors))} ms (${fmt(min(floors))}–${fmt(max(floors))})`,
    );
  }
  return lines;
}

function summarize(samples, floors, noise) {
  const summary = {};
  for (const workload of CFG.workloads) {
    const one = workload === "burst" ? summarizeBurst : (s, e) => summarizeEngine(s, workload, e);
    summary[workload] = Object.fromEntries(CFG.engines.map((engine) => [engine, one(samples, engine)]));
  }
  const lines = [
    ...(perRunWorkloads().length ? [...summaryTable(summary), ...summaryNotes(summary, floors)] : []),
    ...(CFG.workloads.includes("burst") ? burstTable(summary) : []),
    "",
    `Noise: ${noise}`,
  ];
  return { summary, text: lines.join("\n") };
}

async function startEngines(targetUrl) {
  const starters = { trellis: startTrellis, cfwf: startCfwf, restate: startRestate };
  const engines = {};
  for (const name of CFG.engines) {
    const t = Date.now();
    engines[name] = await starters[name](targetUrl);
    log(`${name} up in ${Date.now() - t} ms`);
  }
  return engines;
}

async function warmUp(engines, targetUrl) {
  log(`warm-up: ${CFG.warmup} of each workload per engine`);
  for (let i = 0; i < CFG.warmup; i += 1) {
    for (const workload of CFG.workloads) {
      for (const engine of CFG.engines) {
        const s = await measure(engines, engine, workload, targetUrl, -1 - i);
        log(`  warm ${engine} ${workload}: ${sampleLine(s)}`);
      }
    }
  }
}

/** Idle CPU % of each engine over 3 s (background work that competes with the others). */
async function idleCpu() {
  const idle = {};
  const idleBefore = Object.fromEntries(CFG.engines.map((e) => [e, cpuMs(e)]));
  await sleep(3_000);
  for (const e of CFG.engines) idle[e] = ((cpuMs(e) - idleBefore[e]) / 3000) * 100;
  log(
    `idle CPU %: ${JSON.stringify(Object.fromEntries(Object.entries(idle).map(([k, v]) => [k, Number(v.toFixed(1))])))}`,
  );
  return idle;
}

/** CPU ms of every process this benchmark started, and of this driver. */
const ourCpuMs = () =>
  Object.keys(engineRoots).reduce((a, e) => a + cpuMs(e), 0) +
  process.cpuUsage().user / 1000 +
  process.cpuUsage().system / 1000;

/** One sample, as the log shows it. */
function sampleLine(s) {
  if (s.workload === "burst" && s.startsPerS !== undefined) {
    return (
      `${s.started}/${s.runs} started, ${s.completed} completed, ${s.failed} failed${s.error ? ` (${s.error})` : ""}; ` +
      `${fmt(s.startsPerS)} starts/s, last completed at ${fmt(s.client, 0)} ms; per run p50/p99 client ` +
      `${fmt(s.clientP50, 0)}/${fmt(s.clientP99, 0)} ms, engine ${fmt(s.engineP50, 0)}/${fmt(s.engineP99, 0)} ms; ` +
      `cpu ${fmt(s.cpuMs, 0)} ms, polls ${s.polls} (${s.pollErrors} failed)`
    );
  }
  if (s.error) return `ERROR ${s.error}`;
  return `client ${fmt(s.client)} ms, engine ${fmt(s.engineMs)} ms, cpu ${fmt(s.cpuMs, 0)} ms, polls ${s.polls}`;
}

/** The measured rounds; returns the samples, the peer floors, and how busy the machine was meanwhile. */
async function measuredRounds(engines, targetUrl, idle) {
  const floors = [];
  const samples = [];
  const [machine0, ours0, wall0] = [machineTicks(), ourCpuMs(), Date.now()];
  for (let round = 0; round < CFG.repeats; round += 1) {
    const order = CFG.engines.map((_, i) => CFG.engines[(i + round) % CFG.engines.length]);
    for (const workload of CFG.workloads) {
      for (const engine of order) {
        const s = await measure(engines, engine, workload, targetUrl, round);
        samples.push(s);
        log(`round ${round} ${workload} ${engine}: ${sampleLine(s)} (load ${s.loadavg1.toFixed(2)})`);
      }
    }
    if (CFG.workloads.includes("fanout")) floors.push(await peerFloor(targetUrl));
  }
  const [machine1, ours1] = [machineTicks(), ourCpuMs()];
  const wallS = (Date.now() - wall0) / 1000;
  const machineBusyMs = ((machine1.busy - machine0.busy) * 1000) / CLK_TCK;
  const oursMs = ours1 - ours0;
  const cores = cpus().length;
  const share = (ms) => ((ms / (wallS * 1000 * cores)) * 100).toFixed(0);
  const loads = samples.map((s) => s.loadavg1);
  const noise =
    `measured phase ${wallS.toFixed(0)} s on ${cores} cores; machine busy ${share(machineBusyMs)}% of all cores, ` +
    `of which this benchmark's processes ${share(oursMs)}% and other processes ${share(machineBusyMs - oursMs)}%; ` +
    `1-min load average ${min(loads).toFixed(2)}–${max(loads).toFixed(2)} (median ${median(loads).toFixed(2)}); ` +
    `idle CPU of the engines between runs: ${Object.entries(idle)
      .map(([k, v]) => `${k} ${v.toFixed(1)}%`)
      .join(", ")}`;
  return { samples, floors, noise };
}

/** Memory: the peak of the sampled sum per engine, and each process's own peak (VmHWM). */
function memoryReport() {
  const table = procTable();
  const memory = {};
  for (const engine of Object.keys(engineRoots)) {
    const procs = enginePids(engine, table)
      .map(procStatus)
      .filter((p) => p && p.hwmKb > 2048);
    memory[engine] = {
      peakSampledSumMb: (rssPeak[engine] ?? 0) / 1024,
      sumOfVmHwmMb: procs.reduce((a, p) => a + p.hwmKb, 0) / 1024,
      processes: procs,
    };
  }
  const text = Object.entries(memory)
    .map(
      ([e, m]) =>
        `- ${e}: peak RSS (sum over its processes, sampled every 250 ms) ${m.peakSampledSumMb.toFixed(0)} MiB; per process VmHWM: ${m.processes.map((p) => `${p.cmd.split(" ")[0]} ${(p.hwmKb / 1024).toFixed(0)}`).join(", ")} MiB`,
    )
    .join("\n");
  return { memory, text };
}

function probeText(probe) {
  if (!probe) return "";
  const lines = Object.entries(probe).map(
    ([e, r]) =>
      `- ${e}: ${Object.entries(r)
        .map(([w, x]) => `${w} ${JSON.stringify(x.calls)}`)
        .join("; ")}`,
  );
  return `\nCalls that force data to disk (strace -f -c on the engine's processes, one run each, after the measurement):\n${lines.join("\n")}\n`;
}

async function main() {
  mkdirSync(CFG.outDir, { recursive: true });
  const stamp = new Date().toISOString().replace(/[:.]/g, "-");
  const target = launch("target", node22(CFG.restateDir), [join(HERE, "target.mjs")], { stdin: "pipe", pinned: false });
  const targetUrl = await firstLine(target);
  engineRoots.target = [target.child.pid];
  log(`target ${targetUrl}`);

  const engines = await startEngines(targetUrl);
  await warmUp(engines, targetUrl);
  const idle = await idleCpu();
  const { samples, floors, noise } = await measuredRounds(engines, targetUrl, idle);
  const floor = await platformFloor(targetUrl);
  const probe = env.FSYNC_PROBE === "1" ? await fsyncProbe(engines) : null;
  const { memory, text: memLines } = memoryReport();
  const { summary, text } = summarize(
    samples,
    floors,
    CFG.engines.includes("trellis")
      ? `${noise}; Trellis's run index writes that failed: ${trellisLog.indexFailures}`
      : noise,
  );
  const info = versions();
  const report =
    `# Peer benchmark ${stamp}\n\n` +
    `repeats ${CFG.repeats} (after ${CFG.warmup} warm-up runs of each), engines interleaved, order rotated each round; ` +
    `poll every ${CFG.pollMs.chain} ms (single: ${CFG.pollMs.single} ms); settle ${CFG.settleMs} ms after each run` +
    (CFG.workloads.includes("burst") ? `; burst ${JSON.stringify(CFG.burst)}` : "") +
    "\n" +
    `versions: ${JSON.stringify(info)}\n\n${text}\n${floorText(floor)}\nMemory:\n${memLines}\n${probeText(probe)}`;
  const base = join(CFG.outDir, `peerbench-${stamp}`);
  writeFileSync(
    `${base}.json`,
    JSON.stringify(
      {
        config: CFG,
        versions: info,
        summary,
        samples,
        floors,
        memory,
        noise,
        fsyncProbe: probe,
        platformFloor: floor,
        restateConfig: restateInfo.config ?? null,
      },
      null,
      2,
    ),
  );
  writeFileSync(`${base}.md`, report);
  if (restateInfo.config) writeFileSync(`${base}.restate-config.toml`, restateInfo.config);
  console.log(report);
  console.log(`results: ${base}.md / .json`);
}

main()
  .catch((error) => {
    console.error(error);
    process.exitCode = 1;
  })
  .finally(() => cleanup());
