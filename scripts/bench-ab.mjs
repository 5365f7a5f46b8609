#!/usr/bin/env node
/**
 * `npm run bench:ab -- <git-ref> [scenario,…]`: is the working tree faster
 * than <git-ref>, and by how much? On a noisy machine two separate
 * `npm run bench` runs differ by ±15%, more than most changes; this runs both
 * side by side instead. It checks <git-ref> out into a temporary worktree,
 * starts `wrangler dev` for each tree (this repository's scripts/lib, run in
 * that tree: migrations are applied only if the tree has them), and runs the
 * trees pair by pair, alternating which goes first, so drift hits both alike.
 *
 * Scenarios (scripts/lib/bench-scenarios.mjs): chain, chain-http, single,
 * fanout, foreach (all five by default), idle (the CPU meter's zero).
 * BENCH_REPEATS=N measured pairs (default 11) after one unmeasured pair.
 *
 * Prints each scenario's samples as it goes, then one table: per metric, each
 * tree's median (min–max), the ratio working ÷ ref of the medians with the
 * min–max of the per-pair ratios, the project's target (docs/performance.md,
 * "Targets") and whether it is met
 * (and in how many pairs).
 */
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchClient, benchWorkflows, startWaitPeerProcess } from "./lib/bench-client.mjs";
import { chooseScenarios, fmt, median, medianSpread, printTable, SCENARIOS } from "./lib/bench-scenarios.mjs";
import { cpuMeter, TICK_MS } from "./lib/proc-cpu.mjs";
import { repoRoot, startWranglerDev } from "./lib/wrangler-dev.mjs";

const DEFAULT_SCENARIOS = "chain,chain-http,single,fanout,foreach";
const [ref, scenarioList = DEFAULT_SCENARIOS] = process.argv.slice(2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 11);
if (!ref || !Number.isInteger(REPEATS) || REPEATS < 1) {
  console.error(`usage: [BENCH_REPEATS=N] npm run bench:ab -- <git-ref> [${DEFAULT_SCENARIOS},idle]`);
  process.exit(2);
}

const token = `ab-${randomBytes(8).toString("hex")}`;
const signingKey = generateKeyPairSync("ed25519")
  .privateKey.export({ type: "pkcs8", format: "der" })
  .toString("base64");

async function main() {
  const chosen = chooseScenarios(scenarioList);
  const worktree = mkdtempSync(join(tmpdir(), "trellis-ab-"));
  execFileSync("git", ["worktree", "add", "--detach", worktree, ref], { cwd: repoRoot, stdio: "ignore" });
  symlinkSync(join(repoRoot, "node_modules"), join(worktree, "node_modules"));
  const devs = [];
  /** @type {Awaited<ReturnType<typeof startWaitPeerProcess>> | undefined} */
  let peer;
  try {
    peer = await startWaitPeerProcess();
    const labels = [ref, "working tree"];
    const trees = [];
    for (const cwd of [worktree, repoRoot]) {
      const dev = await startWranglerDev({ cwd, vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } });
      devs.push(dev);
      trees.push({
        client: benchClient(dev.url, token),
        meter: cpuMeter(dev.pid),
        flows: benchWorkflows("ab", peer.url),
      });
    }
    for (const tree of trees) {
      const workflows = Object.values(tree.flows).map((flow) => flow.workflow);
      await tree.client.api("POST", "/v1/definitions", { workflows });
      await tree.client.timedRun(tree.flows.single.workflow.id); // warms the isolate and the catalog
    }
    // The CPU meter's zero: both trees idle for a second read 0, give or take a tick.
    const idle = await Promise.all(trees.map(async (tree) => (await SCENARIOS.idle.measure(tree)).metrics.cpu));
    console.log(
      `${labels[0]} vs the working tree, ${REPEATS} measured pairs per scenario; CPU: utime+stime of ` +
        `${trees[0].meter.pids.length} and ${trees[1].meter.pids.length} workerd processes, ${TICK_MS} ms ticks; ` +
        `1 s idle reads ${idle.join(" and ")} ms\n`,
    );
    const results = [];
    for (const scenario of chosen) {
      results.push({ scenario, samples: await measurePairs(scenario, trees, labels) });
    }
    printResults(results, labels);
  } finally {
    for (const dev of devs) {
      await dev.stop();
    }
    peer?.stop();
    execFileSync("git", ["worktree", "remove", "--force", worktree], { cwd: repoRoot, stdio: "ignore" });
    rmSync(worktree, { recursive: true, force: true });
  }
}

/**
 * One unmeasured pair, then REPEATS measured pairs of `scenario`, the trees
 * taking turns going first. Gives, per tree, each metric's samples in pair order.
 * @param {ReturnType<typeof chooseScenarios>[number]} scenario
 * @param {import("./lib/bench-scenarios.mjs").Tree[]} trees
 * @param {string[]} labels
 */
async function measurePairs(scenario, trees, labels) {
  /** @type {Record<string, number[]>[]} */
  const samples = trees.map(() => Object.fromEntries(scenario.metrics.map((metric) => [metric.key, []])));
  for (let pair = 0; pair <= REPEATS; pair += 1) {
    const order = pair % 2 === 0 ? [0, 1] : [1, 0];
    for (const index of order) {
      const { metrics } = await scenario.measure(trees[index]);
      if (pair > 0) {
        for (const metric of scenario.metrics) {
          samples[index][metric.key].push(metrics[metric.key]);
        }
      }
    }
  }
  console.log(`${scenario.name}: ${scenario.title}`);
  for (const metric of scenario.metrics.filter((each) => each.target !== undefined || each.key === "cpu")) {
    for (const [index, label] of labels.entries()) {
      console.log(`  ${metric.label}, ${label}: ${samples[index][metric.key].map(fmt).join(" ")} ${metric.unit}`);
    }
  }
  return samples;
}

/**
 * The closing table: one row per metric of each scenario.
 * @param {{ scenario: ReturnType<typeof chooseScenarios>[number], samples: Record<string, number[]>[] }[]} results
 * @param {string[]} labels
 */
function printResults(results, labels) {
  const rows = [];
  for (const { scenario, samples } of results) {
    for (const metric of scenario.metrics) {
      const [refs, works] = [samples[0][metric.key], samples[1][metric.key]];
      const pairRatios = works.map((value, pair) => value / refs[pair]).filter(Number.isFinite);
      const ratio = median(works) / median(refs);
      rows.push([
        scenario.name,
        `${metric.label} (${metric.unit})`,
        medianSpread(refs),
        medianSpread(works),
        pairRatios.length > 0 ? `${fmt(ratio)} (${fmt(Math.min(...pairRatios))}–${fmt(Math.max(...pairRatios))})` : "–",
        targetText(metric.target),
        verdict(metric.target, ratio, works, pairRatios),
      ]);
    }
  }
  console.log(
    `\nnpm run bench:ab -- ${ref} ${scenarioList} (BENCH_REPEATS=${REPEATS}): median (min–max); ` +
      `ratio = working ÷ ${ref} of the medians (min–max of the per-pair ratios)\n`,
  );
  const header = ["scenario", "metric", `${labels[0]} median (spread)`, "working tree median (spread)"];
  printTable([...header, "ratio (pair spread)", "target", "met?"], rows);
}

/** @param {import("./lib/bench-scenarios.mjs").Metric["target"]} target */
function targetText(target) {
  if (target?.ratio !== undefined) {
    return `ratio ≤ ${target.ratio}`;
  }
  return target?.absolute !== undefined ? `≤ ${target.absolute} absolute` : "";
}

/**
 * "yes"/"no" on the medians, with how many pairs (or samples) met the target on their own.
 * @param {import("./lib/bench-scenarios.mjs").Metric["target"]} target
 * @param {number} ratio @param {number[]} works @param {number[]} pairRatios
 */
function verdict(target, ratio, works, pairRatios) {
  if (target?.ratio !== undefined) {
    const bound = target.ratio;
    return `${ratio <= bound ? "yes" : "no"} (${pairRatios.filter((value) => value <= bound).length}/${pairRatios.length} pairs)`;
  }
  if (target?.absolute !== undefined) {
    const bound = target.absolute;
    return `${median(works) <= bound ? "yes" : "no"} (${works.filter((value) => value <= bound).length}/${works.length} runs)`;
  }
  return "";
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
