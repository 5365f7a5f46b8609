#!/usr/bin/env node
/**
 * `npm run deploy:check`: before `npm run deploy`, checks that wrangler.toml
 * has every binding the code expects, as the kind it expects
 * (scripts/lib/deploy-expectations.mjs), that no secret sits in [vars], then
 * runs `wrangler deploy --dry-run` (no Docker needed: containers are not
 * rolled out) and reports the bundle's size. Offline; exits 1 on any problem.
 */
import { mkdtempSync, readdirSync, rmSync, statSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { spawnSync } from "node:child_process";
import { unstable_readConfig } from "wrangler";
import { checkConfig } from "./lib/deploy-expectations.mjs";
import { offlineEnv, repoRoot, resolveNode, resolveWrangler } from "./lib/wrangler-dev.mjs";

const config = unstable_readConfig({ config: join(repoRoot, "wrangler.toml") }, { hideWarnings: true });
const lines = checkConfig(config);
for (const { ok, what } of lines) process.stdout.write(`${ok ? "ok  " : "FAIL"}  ${what}\n`);

const outdir = mkdtempSync(join(tmpdir(), "trellis-dry-run-"));
const dry = spawnSync(
  resolveNode(),
  [resolveWrangler(), "deploy", "--dry-run", "--outdir", outdir, "--containers-rollout=none"],
  { cwd: repoRoot, env: offlineEnv(), encoding: "utf8" },
);
const bytes = readdirSync(outdir).reduce((sum, name) => sum + statSync(join(outdir, name)).size, 0);
rmSync(outdir, { recursive: true, force: true });
const dryOk = dry.status === 0;
process.stdout.write(
  `${dryOk ? "ok  " : "FAIL"}  wrangler deploy --dry-run (output ${(bytes / 1024 / 1024).toFixed(2)} MiB)\n`,
);
if (!dryOk) process.stdout.write(`${dry.stdout}\n${dry.stderr}\n`);

const failed = lines.filter((l) => !l.ok).length + (dryOk ? 0 : 1);
process.stdout.write(failed === 0 ? "deploy check passed\n" : `deploy check: ${failed} problem(s)\n`);
process.exit(failed === 0 ? 0 : 1);
