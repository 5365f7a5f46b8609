#!/usr/bin/env node
/**
 * `npm run bench:ab -- <git-ref> [scenario,…]`: is the working tree faster
 * than <git-ref>? On a noisy machine two separate `npm run bench` runs differ
 * by ±15%, more than most changes; this runs both side by side instead. It
 * checks <git-ref> out into a temporary worktree, starts `wrangler dev` for
 * each tree, and alternates runs between them, so drift hits both alike.
 *
 * Scenarios: fanout (100 × 100 ms http action, the default), chain (200
 * no-op nodes), foreach (1,000 no-op items). BENCH_REPEATS=N measured pairs
 * (default 11) after one unmeasured pair. Times are from each run's journal.
 * Prints, per scenario, both medians and in how many pairs the working tree
 * was faster.
 */
import { execFileSync, spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { createInterface } from "node:readline";
import { fileURLToPath } from "node:url";
import { repoRoot, startWranglerDev } from "./lib/wrangler-dev.mjs";

const [ref, scenarioList = "fanout"] = process.argv.slice(2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 11);
if (!ref) {
  console.error("usage: npm run bench:ab -- <git-ref> [fanout,chain,foreach]");
  process.exit(2);
}

const token = `ab-${randomBytes(8).toString("hex")}`;
const signingKey = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");

const noop = { steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }] };
/** @param {string} peerUrl */
function scenarios(peerUrl) {
  const chain = {};
  for (let i = 0; i < 200; i += 1) {
    chain[`n${i}`] = { task: noop, ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}) };
  }
  const wait = { steps: [{ ref: "wait", action: { kind: "http", implementation: { method: "GET", url_template: `${peerUrl}/wait?ms=100` } } }] };
  return {
    fanout: { workflow: { id: "ab-fanout", max_parallel: 100, nodes: { each: { foreach: { items: "$.input.items", max_parallel: 100 }, task: wait } } }, input: { items: Array.from({ length: 100 }, (_, i) => i) } },
    chain: { workflow: { id: "ab-chain", nodes: chain }, input: {} },
    foreach: { workflow: { id: "ab-foreach", max_parallel: 200, nodes: { each: { foreach: { items: "$.input.items" }, task: noop } } }, input: { items: Array.from({ length: 1000 }, (_, i) => i) } },
  };
}

async function api(base, method, path, body) {
  const response = await fetch(`${base}${path}`, {
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

/** Runs a workflow to completion; its duration from the journal (run.created → attestation). */
async function timedRun(base, workflowId, input) {
  const { run_id: runId } = await api(base, "POST", `/v1/workflows/${workflowId}/runs`, { input });
  const deadline = Date.now() + 120_000;
  for (;;) {
    const run = await api(base, "GET", `/v1/runs/${runId}`);
    if (run.status === "completed") {
      break;
    }
    if (run.status === "failed" || run.status === "cancelled" || Date.now() > deadline) {
      throw new Error(`run ${runId} ended ${run.status}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  const { entries } = await api(base, "GET", `/v1/runs/${runId}/journal`);
  return Date.parse(entries.at(-1).at) - Date.parse(entries[0].at);
}

async function startPeer() {
  const child = spawn(process.execPath, [fileURLToPath(new URL("./lib/wait-peer.mjs", import.meta.url))], { stdio: ["pipe", "pipe", "inherit"] });
  for await (const line of createInterface({ input: child.stdout })) {
    return { url: line, stop: () => child.stdin.end() };
  }
  throw new Error("the wait peer did not start");
}

async function main() {
  const worktree = mkdtempSync(join(tmpdir(), "trellis-ab-"));
  execFileSync("git", ["worktree", "add", "--detach", worktree, ref], { cwd: repoRoot, stdio: "ignore" });
  symlinkSync(join(repoRoot, "node_modules"), join(worktree, "node_modules"));
  const peer = await startPeer();
  const trees = [
    { label: ref, cwd: worktree },
    { label: "working tree", cwd: repoRoot },
  ];
  const devs = [];
  try {
    for (const tree of trees) {
      devs.push(await startWranglerDev({ cwd: tree.cwd, vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } }));
    }
    const all = scenarios(peer.url);
    const chosen = scenarioList.split(",").map((name) => {
      const scenario = all[/** @type {keyof typeof all} */ (name)];
      if (!scenario) {
        throw new Error(`unknown scenario ${name} (fanout, chain, foreach)`);
      }
      return [name, scenario];
    });
    for (const dev of devs) {
      await api(dev.url, "POST", "/v1/definitions", { workflows: chosen.map(([, scenario]) => scenario.workflow) });
    }
    for (const [name, { workflow, input }] of chosen) {
      const samples = devs.map(() => []);
      for (let pair = 0; pair <= REPEATS; pair += 1) {
        for (const [index, dev] of devs.entries()) {
          const ms = await timedRun(dev.url, workflow.id, input);
          if (pair > 0) {
            samples[index].push(ms);
          }
        }
      }
      const median = (values) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)];
      const wins = samples[1].filter((ms, pair) => ms < samples[0][pair]).length;
      console.log(
        `${name}: ${trees[0].label} median ${median(samples[0])} ms, working tree median ${median(samples[1])} ms ` +
          `(working tree faster in ${wins} of ${REPEATS} pairs)\n  ${trees[0].label}: ${samples[0].join(" ")}\n  working tree: ${samples[1].join(" ")}`,
      );
    }
  } finally {
    for (const dev of devs) {
      await dev.stop();
    }
    peer.stop();
    execFileSync("git", ["worktree", "remove", "--force", worktree], { cwd: repoRoot, stdio: "ignore" });
    rmSync(worktree, { recursive: true, force: true });
  }
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
