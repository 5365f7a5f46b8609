/**
 * What `npm run bench` and `npm run bench:ab` share: the API client that runs
 * a workflow and times it from its journal, the wait peer in a process of its
 * own, and the benchmark workflows.
 */
import { spawn } from "node:child_process";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";

/**
 * A client of one Trellis instance.
 * @param {string} baseUrl
 * @param {string} token
 */
export function benchClient(baseUrl, token) {
  /** @param {string} method @param {string} path @param {unknown} [body] */
  async function api(method, path, body) {
    const response = await fetch(`${baseUrl}${path}`, {
      method,
      headers: { "authorization": `Bearer ${token}`, "content-type": "application/json" },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const json = await response.json();
    if (response.status >= 400) {
      throw new Error(`${method} ${path} → ${response.status}: ${JSON.stringify(json)}`);
    }
    return json;
  }

  /**
   * Starts a run, waits for it to complete and returns its duration (ms, from
   * `run.created` to the attestation, in its journal) and its journal entries.
   * @param {string} workflowId @param {unknown} [input]
   */
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

  return { api, timedRun };
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

/**
 * The benchmark workflows, `<prefix>-single`, `-chain-200`, `-fanout-100` and
 * `-foreach-1000`, with the input each runs with.
 * @param {string} prefix @param {string} peerUrl
 */
export function benchWorkflows(prefix, peerUrl) {
  /** @type {Record<string, unknown>} */
  const chain = {};
  for (let i = 0; i < 200; i += 1) {
    chain[`n${i}`] = { task: noopTask, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
  }
  const wait = {
    steps: [
      {
        ref: "wait",
        action: {
          kind: "http",
          implementation: { method: "GET", url_template: `${peerUrl}/wait?ms=${ACTION_WAIT_MS}` },
        },
      },
    ],
  };
  const items = (/** @type {number} */ n) => ({ items: Array.from({ length: n }, (_, i) => i) });
  return {
    single: { workflow: { id: `${prefix}-single`, nodes: { only: { task: noopTask } } }, input: {} },
    chain: { workflow: { id: `${prefix}-chain-200`, nodes: chain }, input: {} },
    fanout: {
      workflow: {
        id: `${prefix}-fanout-100`,
        max_parallel: 100,
        nodes: { each: { foreach: { items: "$.input.items", max_parallel: 100 }, task: wait } },
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
