/**
 * What `npm run bench` and `npm run bench:ab` share: the API client that runs
 * a workflow and times it from its journal, the wait peer in a process of its
 * own, and the benchmark workflows.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/** How often `timedRun` without a CPU meter asks whether its run has ended. */
const POLL_MS = 100;

/** @typedef {{ baseUrl: string, token: string }} Conn */

/**
 * A client of one Trellis instance.
 * @param {string} baseUrl
 * @param {string} token
 */
export function benchClient(baseUrl, token) {
  const conn = { baseUrl, token };
  return {
    /** @param {string} method @param {string} path @param {unknown} [body] */
    api: (method, path, body) => api(conn, method, path, body),
    /**
     * @param {string} workflowId @param {unknown} [input]
     * @param {import("./proc-cpu.mjs").CpuMeter} [meter]
     */
    timedRun: (workflowId, input, meter) => timedRun(conn, workflowId, input, meter),
    /** @param {string} workflowId @param {unknown} [input] */
    latencyRun: (workflowId, input) => latencyRun(conn, workflowId, input),
  };
}

/** @param {Conn} conn @param {string} method @param {string} path @param {unknown} [body] */
async function api(conn, method, path, body, headers = {}) {
  const response = await fetch(`${conn.baseUrl}${path}`, {
    method,
    headers: { "authorization": `Bearer ${conn.token}`, "content-type": "application/json", ...headers },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const json = await response.json();
  if (response.status >= 400) {
    throw new Error(`${method} ${path} → ${response.status}: ${JSON.stringify(json)}`);
  }
  return json;
}

/**
 * Starts a run, waits for it to complete and returns its id, its duration (ms, from
 * `run.created` to the attestation, in its journal), the client's time (`clientMs`, from
 * just before the start request until the client knows the run ended), its journal entries
 * and, given a CPU meter (proc-cpu.mjs), the workerd CPU time (ms) the run cost, in all and
 * on the JavaScript threads: from a quiet workerd before the start request to a quiet
 * workerd after the run, so work it leaves for later (`waitUntil`, the run index) counts.
 *
 * The start asks to wait for the run (`Prefer: wait=30`), so the client knows at once
 * when it ends and asks nothing while it runs (each status read costs workerd ~2–3 ms of
 * CPU). A run still going after the wait is polled, with a meter only once workerd has gone
 * quiet. The journal's time is the engine's, except for work done in one event without
 * I/O (a chain of pure tasks), whose entries carry one time: workerd's clock stands still
 * while code runs; `clientMs` is the measure there.
 * @param {Conn} conn @param {string} workflowId @param {unknown} [input]
 * @param {import("./proc-cpu.mjs").CpuMeter} [meter]
 */
async function timedRun(conn, workflowId, input = {}, meter) {
  const cpuBefore = meter ? await meter.quiet() : 0;
  const mainBefore = meter ? meter.readMain() : 0;
  const sent = performance.now();
  let run = await api(conn, "POST", `/v1/workflows/${workflowId}/runs`, { input }, { prefer: "wait=30" });
  const deadline = Date.now() + 300_000;
  while (!["completed", "failed", "cancelled"].includes(run.status)) {
    if (Date.now() > deadline) {
      throw new Error(`run ${run.run_id} did not finish`);
    }
    await (meter ? meter.quiet() : delay(POLL_MS));
    run = await api(conn, "GET", `/v1/runs/${run.run_id}`);
  }
  const clientMs = performance.now() - sent;
  const cpuAt = meter ? await meter.quiet() : Number.NaN;
  const mainAt = meter ? meter.readMain() : Number.NaN;
  if (run.status !== "completed") {
    throw new Error(`run ${run.run_id} of ${workflowId} ended ${run.status}: ${JSON.stringify(run.error)}`);
  }
  const { entries } = await api(conn, "GET", `/v1/runs/${run.run_id}/journal`);
  const ms = Date.parse(entries.at(-1).at) - Date.parse(entries[0].at);
  return { runId: run.run_id, ms, clientMs, entries, cpuMs: cpuAt - cpuBefore, mainCpuMs: mainAt - mainBefore };
}

/** @param {number} ms @returns {Promise<number>} NaN, after `ms` */
function delay(ms) {
  return new Promise((resolve) => setTimeout(() => resolve(Number.NaN), ms));
}

/**
 * Client latency of one run: from just before the start request to the
 * client knowing the run has ended, the fastest way the tree offers. The
 * start asks to wait for the run (`Prefer: wait=30`): a tree that honours it
 * answers with the ended run. A tree that does not (720bfe6) answers at once,
 * and the client then reads the attestation on the run's event stream (SSE,
 * opened as soon as the start answers: it needs the run id).
 * `startPath` is the client's clock at the request to `run.created`'s `at`,
 * `engine` `run.created` to the last entry, `returnPath` the last entry to
 * the client knowing; the three add up to `latency` give or take the
 * journal's 1 ms resolution (client and workerd read the same clock).
 * `answered` is when the start request's answer arrived. Gives the run's id and those metrics.
 * @param {Conn} conn @param {string} workflowId @param {unknown} [input]
 */
async function latencyRun(conn, workflowId, input = {}) {
  const sentAt = Date.now();
  const sent = performance.now();
  const response = await fetch(`${conn.baseUrl}/v1/workflows/${workflowId}/runs`, {
    method: "POST",
    headers: { "authorization": `Bearer ${conn.token}`, "content-type": "application/json", "prefer": "wait=30" },
    body: JSON.stringify({ input }),
  });
  const started = await response.json();
  const answered = performance.now() - sent;
  if (response.status !== 201) {
    throw new Error(`POST /v1/workflows/${workflowId}/runs → ${response.status}: ${JSON.stringify(started)}`);
  }
  const runId = started.run_id;
  const ended = ["completed", "failed", "cancelled"].includes(started.status);
  const streamed = ended ? null : await readEvents(conn, runId);
  const seen = performance.now();
  const seenAt = Date.now();
  // Checked after the clock stops, from the run's status rather than the journal's entries (their kinds may change).
  const run = await api(conn, "GET", `/v1/runs/${runId}`);
  if (run.status !== "completed") {
    throw new Error(`run ${runId} of ${workflowId} ended ${run.status}: ${JSON.stringify(run.error)}`);
  }
  const entries = streamed ?? (await api(conn, "GET", `/v1/runs/${runId}/journal`)).entries;
  const createdAt = Date.parse(entries[0].at);
  const lastAt = Date.parse(entries.at(-1).at);
  const metrics = {
    latency: seen - sent,
    startPath: createdAt - sentAt,
    engine: lastAt - createdAt,
    returnPath: seenAt - lastAt,
    answered,
  };
  return { runId, metrics };
}

/**
 * The run's entries from `GET /v1/runs/{id}/events`, read until the
 * attestation arrives (then the stream is dropped without waiting for it to close).
 * @param {Conn} conn @param {string} runId
 */
async function readEvents(conn, runId) {
  const response = await fetch(`${conn.baseUrl}/v1/runs/${runId}/events`, {
    headers: { authorization: `Bearer ${conn.token}`, accept: "text/event-stream" },
    signal: AbortSignal.timeout(120_000),
  });
  if (response.status !== 200 || response.body === null) {
    throw new Error(`GET /v1/runs/${runId}/events → ${response.status}: ${await response.text()}`);
  }
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  const entries = [];
  let buffered = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) {
      throw new Error(`the event stream of ${runId} ended before its attestation`);
    }
    buffered += value;
    let end;
    while ((end = buffered.indexOf("\n\n")) >= 0) {
      const data = buffered
        .slice(0, end)
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      buffered = buffered.slice(end + 2);
      if (data !== "") {
        entries.push(JSON.parse(data));
        if (entries.at(-1).kind === "attest") {
          void reader.cancel().catch(() => {});
          return entries;
        }
      }
    }
  }
}

/** The wait peer (`wait-peer.mjs`) in a child process; it exits when `stop()` closes its stdin. */
export async function startWaitPeerProcess() {
  const script = fileURLToPath(new URL("./wait-peer.mjs", import.meta.url));
  const child = spawn(process.execPath, [script], { stdio: ["pipe", "pipe", "inherit"] });
  const timer = setTimeout(() => child.kill(), 10_000);
  for await (const line of createInterface({ input: child.stdout })) {
    clearTimeout(timer);
    return { url: line, stop: () => child.stdin.end() };
  }
  throw new Error("the wait peer did not start");
}

/** How long the fan-out's action waits at the peer. */
export const ACTION_WAIT_MS = 100;

/** A task of one `context` step that sets `v` to 1: no I/O. */
export const noopTask = {
  steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }],
};

/** A task of one `http` step that GETs `url`. @param {string} ref @param {string} url */
function httpTask(ref, url) {
  return { steps: [{ ref, action: { kind: "http", implementation: { method: "GET", url_template: url } } }] };
}

/** A chain of `length` nodes running `task`, each `depends_on` the one before. @param {number} length @param {unknown} task */
function chainOf(length, task) {
  /** @type {Record<string, unknown>} */
  const nodes = {};
  for (let i = 0; i < length; i += 1) {
    nodes[`n${i}`] = { task, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
  }
  return nodes;
}

/** How many nodes the chains have. */
export const CHAIN_LENGTH = 200;

/**
 * The benchmark workflows, `<prefix>-single`, `-chain-200` (`context`
 * tasks), `-chain-http-200` (each task one `http` GET the peer answers at
 * once), `-fanout-100` and `-foreach-1000`, with the input each runs with.
 * Only features both today's tree and 720bfe6 accept (`npm run bench:ab`).
 * @param {string} prefix @param {string} peerUrl
 */
export function benchWorkflows(prefix, peerUrl) {
  const items = (/** @type {number} */ n) => ({ items: Array.from({ length: n }, (_, i) => i) });
  return {
    single: { workflow: { id: `${prefix}-single`, nodes: { only: { task: noopTask } } }, input: {} },
    chain: { workflow: { id: `${prefix}-chain-${CHAIN_LENGTH}`, nodes: chainOf(CHAIN_LENGTH, noopTask) }, input: {} },
    chainHttp: {
      workflow: {
        id: `${prefix}-chain-http-${CHAIN_LENGTH}`,
        nodes: chainOf(CHAIN_LENGTH, httpTask("get", `${peerUrl}/wait?ms=0`)),
      },
      input: {},
    },
    fanout: {
      workflow: {
        id: `${prefix}-fanout-100`,
        max_parallel: 100,
        nodes: {
          each: {
            foreach: { items: "$.input.items", max_parallel: 100 },
            task: httpTask("wait", `${peerUrl}/wait?ms=${ACTION_WAIT_MS}`),
          },
        },
      },
      input: items(100),
    },
    foreach: {
      workflow: {
        id: `${prefix}-foreach-1000`,
        max_parallel: 200,
        nodes: { each: { foreach: { items: "$.input.items" }, task: noopTask } },
      },
      input: items(1000),
    },
  };
}
