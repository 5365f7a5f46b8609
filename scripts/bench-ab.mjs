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
import { execFileSync } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdtempSync, rmSync, symlinkSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { benchClient, benchWorkflows, startWaitPeerProcess } from "./lib/bench-client.mjs";
import { repoRoot, startWranglerDev } from "./lib/wrangler-dev.mjs";

const [ref, scenarioList = "fanout"] = process.argv.slice(2);
const REPEATS = Number(process.env.BENCH_REPEATS ?? 11);
if (!ref) {
  console.error("usage: npm run bench:ab -- <git-ref> [fanout,chain,foreach]");
  process.exit(2);
}

const token = `ab-${randomBytes(8).toString("hex")}`;
const signingKey = generateKeyPairSync("ed25519")
  .privateKey.export({ type: "pkcs8", format: "der" })
  .toString("base64");

async function main() {
  const worktree = mkdtempSync(join(tmpdir(), "trellis-ab-"));
  execFileSync("git", ["worktree", "add", "--detach", worktree, ref], { cwd: repoRoot, stdio: "ignore" });
  symlinkSync(join(repoRoot, "node_modules"), join(worktree, "node_modules"));
  const peer = await startWaitPeerProcess();
  const trees = [
    { label: ref, cwd: worktree },
    { label: "working tree", cwd: repoRoot },
  ];
  const devs = [];
  try {
    for (const tree of trees) {
      devs.push(
        await startWranglerDev({ cwd: tree.cwd, vars: { API_TOKENS: token, JOURNAL_SIGNING_KEY: signingKey } }),
      );
    }
    const all = benchWorkflows("ab", peer.url);
    const chosen = scenarioList.split(",").map((name) => {
      if (name !== "fanout" && name !== "chain" && name !== "foreach") {
        throw new Error(`unknown scenario ${name} (fanout, chain, foreach)`);
      }
      return /** @type {const} */ ([name, all[name]]);
    });
    const clients = devs.map((dev) => benchClient(dev.url, token));
    for (const client of clients) {
      await client.api("POST", "/v1/definitions", { workflows: chosen.map(([, scenario]) => scenario.workflow) });
    }
    for (const [name, { workflow, input }] of chosen) {
      const samples = devs.map(() => []);
      for (let pair = 0; pair <= REPEATS; pair += 1) {
        for (const [index, client] of clients.entries()) {
          const { ms } = await client.timedRun(workflow.id, input);
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
