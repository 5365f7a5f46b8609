#!/usr/bin/env node
/**
 * `node scripts/bench-start.mjs [git-ref]`: what a run start costs, with and
 * without the catalog Durable Object in its path ("What a run start costs" in
 * docs/architecture.md, the design, and docs/performance.md, its numbers).
 * Against `wrangler dev` (real workerd); timings are measurements printed in a
 * table, never assertions.
 *
 * Two one-node workflows: `closed` (an inline task: every reference pinned or
 * inline) and `floating` (its task referenced as `"id"`, the latest); and two
 * of 50 nodes, each running its own registered task: `wide` (`id@1`, closed)
 * and `wide-floating` (`"id"`). For each
 * start the client times the HTTP call, from request to answer:
 * - `preview` starts (`mode: "preview"`): resolution, input check and plan,
 *   nothing created: the catalog's share of a start, nearly alone;
 * - `approval` starts (`mode: "approval"`): the run is created (its
 *   coordinator object, its first journal entries) but does not execute, so
 *   runs in the background do not compete with the starts measured.
 * Each as `pinned` (`version: 1`) or `latest` (no version); each first one
 * at a time (latency), then CONCURRENCY at a time (starts per second).
 *
 * With a git ref (e.g. the commit before the snapshot caches), that tree is
 * exported (`git archive`, nothing in the repository changes) and measured
 * too: the sequential starts alternate between the trees one by one, and the
 * concurrent bursts take turns, so drift hits both alike.
 *
 * Options: BENCH_STARTS=N sequential starts per scenario and round (default
 * 100), BENCH_ROUNDS=N (default 3), BENCH_CONCURRENCY=N (default 16).
 */
import { execSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { benchClient, noopTask } from "./lib/bench-client.mjs";
import { repoRoot, startWranglerDev } from "./lib/wrangler-dev.mjs";

const STARTS = Number(process.env.BENCH_STARTS ?? 100);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 16);
const [ref] = process.argv.slice(2);

const token = `start-${randomBytes(8).toString("hex")}`;
const signingKey = generateKeyPairSync("ed25519")
  .privateKey.export({ type: "pkcs8", format: "der" })
  .toString("base64");

/** The scenarios: which workflow, and the start body. */
const SCENARIOS = [
  ["preview closed pinned", "closed", { version: 1, mode: "preview" }],
  ["preview closed latest", "closed", { mode: "preview" }],
  ["preview floating pinned", "floating", { version: 1, mode: "preview" }],
  ["start closed pinned", "closed", { version: 1, mode: "approval" }],
  ["start closed latest", "closed", { mode: "approval" }],
  ["start floating pinned", "floating", { version: 1, mode: "approval" }],
  ["preview wide pinned", "wide", { version: 1, mode: "preview" }],
  ["preview wide-floating pinned", "wide-floating", { version: 1, mode: "preview" }],
  ["start wide pinned", "wide", { version: 1, mode: "approval" }],
];

/** Nodes of the wide workflows: enough registered tasks that resolving reads and checks a real amount. */
const WIDE_NODES = 50;

/** The catalog calls a start makes with the snapshot caches warm (catalog/snapshots.ts). */
const CATALOG_CALLS = {
  "closed": { pinned: "0", latest: "1 (check)" },
  "floating": { pinned: "1 (check)" },
  "wide": { pinned: "0" },
  "wide-floating": { pinned: "1 (check)" },
};

/** @param {ReturnType<typeof benchClient>["api"]} api @param {string} prefix */
async function register(api, prefix) {
  const tasks = Array.from({ length: WIDE_NODES }, (_, i) => ({ id: `${prefix}-task-${i}`, ...noopTask }));
  const wide = (/** @type {string} */ suffix) =>
    Object.fromEntries(tasks.map((task, i) => [`n${i}`, { task: `${task.id}${suffix}` }]));
  await api("POST", "/v1/definitions", { tasks: [{ id: `${prefix}-task`, ...noopTask }, ...tasks] });
  await api("POST", "/v1/definitions", {
    workflows: [
      { id: `${prefix}-closed`, nodes: { only: { task: noopTask } } },
      { id: `${prefix}-floating`, nodes: { only: { task: `${prefix}-task` } } },
      // Every task pinned (`id@1`): a closed snapshot, 50 tasks to read and check on a resolve.
      { id: `${prefix}-wide`, nodes: wide("@1") },
      // The same tasks as `"id"`: the cached snapshot is checked with one versions call naming 50 ids.
      { id: `${prefix}-wide-floating`, nodes: wide("") },
    ],
  });
}

/** Milliseconds of one start, request to answer. */
async function timeStart(api, workflowId, body) {
  const started = performance.now();
  await api("POST", `/v1/workflows/${workflowId}/runs`, body);
  return performance.now() - started;
}

/**
 * `STARTS` starts in a row on each tree, interleaved (a start on one, then on
 * the next), so the machine's drift hits every tree alike; each tree's latencies.
 */
async function sequential(trees, workflowId, body) {
  const samples = trees.map(() => []);
  for (let i = 0; i < STARTS; i += 1) {
    for (const [index, tree] of trees.entries()) {
      samples[index].push(await timeStart(tree.api, workflowId, body));
    }
  }
  return samples;
}

/** `STARTS` starts, `CONCURRENCY` in flight at a time: starts per second. */
async function concurrent(api, workflowId, body) {
  let next = 0;
  const started = performance.now();
  const worker = async () => {
    while (next < STARTS) {
      next += 1;
      await timeStart(api, workflowId, body);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return STARTS / ((performance.now() - started) / 1000);
}

const quantile = (samples, q) => {
  const sorted = [...samples].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
};

async function main() {
  const trees = [{ label: "working tree", cwd: repoRoot }];
  let exported = null;
  if (ref) {
    exported = mkdtempSync(join(tmpdir(), "trellis-start-"));
    execSync(`git archive ${JSON.stringify(ref)} | tar -x -C ${JSON.stringify(exported)}`, { cwd: repoRoot });
    symlinkSync(join(repoRoot, "node_modules"), join(exported, "node_modules"));
    trees.unshift({ label: ref, cwd: exported });
  }
  const devs = [];
  try {
    for (const tree of trees) {
      const dev = await startWranglerDev({
        cwd: tree.cwd,
        vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey },
      });
      devs.push(dev);
      tree.api = benchClient(dev.url, token).api;
      tree.samples = new Map();
      tree.rates = new Map();
      await register(tree.api, "bench");
      // Warm-up: code paths, connections, and the caches this tree has.
      for (const [, workflow, body] of SCENARIOS) {
        for (let i = 0; i < 10; i += 1) {
          await timeStart(tree.api, `bench-${workflow}`, body);
        }
      }
    }
    for (let round = 0; round < ROUNDS; round += 1) {
      for (const [name, workflow, body] of SCENARIOS) {
        const samples = await sequential(trees, `bench-${workflow}`, body);
        // Throughput a tree at a time (16 in flight would not interleave), in turns from round to round.
        const order = round % 2 === 0 ? trees : [...trees].reverse();
        for (const tree of order) {
          tree.samples.set(name, [...(tree.samples.get(name) ?? []), ...samples[trees.indexOf(tree)]]);
          const rate = await concurrent(tree.api, `bench-${workflow}`, body);
          tree.rates.set(name, [...(tree.rates.get(name) ?? []), rate]);
        }
      }
      process.stderr.write(`round ${round + 1}/${ROUNDS} done\n`);
    }
    report(trees);
  } finally {
    await Promise.all(devs.map((dev) => dev.stop()));
    if (exported) {
      rmSync(exported, { recursive: true, force: true });
    }
  }
}

function report(trees) {
  console.log(`${STARTS} starts per scenario and round, ${ROUNDS} rounds; latency: ms from request to answer`);
  console.log(`tree | scenario | catalog calls (cached) | median ms | p90 ms | starts/s, ${CONCURRENCY} at a time`);
  for (const tree of trees) {
    for (const [name, workflow, body] of SCENARIOS) {
      const samples = tree.samples.get(name) ?? [];
      const calls = tree === trees.at(-1) ? CATALOG_CALLS[workflow][body.version ? "pinned" : "latest"] : "1 (resolve)";
      const rates = (tree.rates.get(name) ?? []).map((rate) => rate.toFixed(0)).join(" / ");
      const median = quantile(samples, 0.5).toFixed(2);
      console.log(`${tree.label} | ${name} | ${calls} | ${median} | ${quantile(samples, 0.9).toFixed(2)} | ${rates}`);
    }
  }
  const [before, after] = trees;
  if (after) {
    // Start i on one tree and start i on the other ran back to back: their difference cancels the drift.
    console.log(
      `\nscenario | median of paired differences, ${before.label} − working tree (ms) | working tree faster in`,
    );
    for (const [name] of SCENARIOS) {
      const a = before.samples.get(name) ?? [];
      const b = after.samples.get(name) ?? [];
      const differences = a.map((value, i) => value - (b[i] ?? value));
      const faster = differences.filter((difference) => difference > 0).length;
      console.log(`${name} | ${quantile(differences, 0.5).toFixed(2)} | ${faster} of ${differences.length}`);
    }
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
