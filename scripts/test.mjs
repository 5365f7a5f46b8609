#!/usr/bin/env node
/**
 * `npm test`: every test, in two stages, stopping at the first that fails.
 *
 *   1. `vitest run` — the `workers` project (inside workerd) and the `node`
 *      project (local tools), counted from vitest's JSON report
 *      (.test-results/vitest.json).
 *   2. `node scripts/e2e.mjs` — the end-to-end suite against `wrangler dev`,
 *      counted from its TAP report (.test-results/e2e.tap).
 *
 * The very last line of output is, alone on its line:
 *
 *   tests: <passed> passed, <failed> failed
 *
 * summed over both stages (CI reads it). A stage that exits non-zero without a
 * failed test in its report (a crash, a setup error) counts as one failure, so
 * the line never says "0 failed" for a failing run. The exit code is non-zero
 * when anything failed.
 */
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { repoRoot, resolveNode } from "./lib/wrangler-dev.mjs";

const resultsDir = join(repoRoot, ".test-results");
const vitestJson = join(resultsDir, "vitest.json");
const e2eTap = join(resultsDir, "e2e.tap");

/**
 * Runs a command with inherited stdio; resolves with its exit code.
 * @param {string} cmd
 * @param {string[]} args
 * @param {NodeJS.ProcessEnv} [env]
 * @returns {Promise<number>}
 */
function run(cmd, args, env = process.env) {
  return new Promise((resolve) => {
    const child = spawn(cmd, args, { cwd: repoRoot, stdio: ["ignore", "inherit", "inherit"], env });
    /** @param {NodeJS.Signals} sig */
    const forward = (sig) => {
      try {
        child.kill(sig);
      } catch {
        /* gone */
      }
    };
    const signals = /** @type {NodeJS.Signals[]} */ (["SIGINT", "SIGTERM", "SIGHUP"]);
    for (const sig of signals) process.on(sig, forward);
    const done = (/** @type {number} */ code) => {
      for (const sig of signals) process.off(sig, forward);
      resolve(code);
    };
    child.once("error", (err) => {
      process.stderr.write(`[test] could not run ${cmd}: ${err.message}\n`);
      done(1);
    });
    child.once("exit", (code, signal) => done(code ?? (signal ? 1 : 0)));
  });
}

/** @returns {{ passed: number, failed: number }} */
function vitestCounts() {
  if (!existsSync(vitestJson)) return { passed: 0, failed: 0 };
  try {
    const report = JSON.parse(readFileSync(vitestJson, "utf8"));
    return { passed: Number(report.numPassedTests) || 0, failed: Number(report.numFailedTests) || 0 };
  } catch {
    return { passed: 0, failed: 0 };
  }
}

/** Counts from the TAP summary that node's test runner writes last (`# pass N`, `# fail N`, `# cancelled N`). */
function tapCounts() {
  if (!existsSync(e2eTap)) return { passed: 0, failed: 0 };
  const text = readFileSync(e2eTap, "utf8");
  const last = (/** @type {string} */ name) => {
    const all = [...text.matchAll(new RegExp(`^# ${name} (\\d+)\\s*$`, "gm"))];
    return all.length ? Number(all[all.length - 1]?.[1]) : 0;
  };
  return { passed: last("pass"), failed: last("fail") + last("cancelled") };
}

/**
 * Stage 0: strict TS, the lint rules (no `any`, no code generation, no import
 * cycles), the format, and no function over 60 lines.
 * Returns the first non-zero exit code, or 0.
 */
async function staticChecks() {
  process.stderr.write("[test] stage 0: typecheck, lint, format, sizes\n");
  const bin = (/** @type {string} */ name) => join(repoRoot, "node_modules", ".bin", name);
  /** @type {[string, string, string[]][]} */
  const checks = [
    ...["tsconfig.json", "test/tsconfig.json", "test/tsconfig.node.json", "console/tsconfig.json"].map(
      (config) =>
        /** @type {[string, string, string[]]} */ ([`typecheck (${config})`, bin("tsc"), ["-p", config, "--noEmit"]]),
    ),
    ["lint", bin("oxlint"), ["-c", ".oxlintrc.json", "--deny-warnings", "."]],
    ["format (npm run format)", bin("prettier"), ["--check", "--log-level=warn", "."]],
    ["size bounds", process.execPath, [join(repoRoot, "scripts", "check-size.mjs")]],
  ];
  for (const [name, cmd, args] of checks) {
    const code = await run(cmd, args);
    if (code !== 0) {
      process.stderr.write(`[test] ${name} failed; skipping the tests\n`);
      return code;
    }
  }
  return 0;
}

async function main() {
  mkdirSync(resultsDir, { recursive: true });
  rmSync(vitestJson, { force: true });
  rmSync(e2eTap, { force: true });
  const node = resolveNode();
  let passed = 0;
  let failed = 0;
  const finish = (/** @type {number} */ code) => {
    process.stdout.write(`\ntests: ${passed} passed, ${failed} failed\n`);
    return code;
  };

  // Stage 0: the types, the lint rules, the format and the size bounds hold.
  const staticCode = await staticChecks();
  if (staticCode !== 0) {
    failed += 1;
    return finish(staticCode);
  }

  process.stderr.write("[test] stage 1/2: vitest (workers + node projects)\n");
  const vitestCode = await run(node, [
    join(repoRoot, "node_modules", "vitest", "vitest.mjs"),
    "run",
    "--reporter=default",
    "--reporter=json",
    `--outputFile.json=${vitestJson}`,
  ]);
  const v = vitestCounts();
  passed += v.passed;
  failed += v.failed;
  if (vitestCode !== 0) {
    if (v.failed === 0) failed += 1;
    process.stderr.write(`[test] vitest failed (exit ${vitestCode}); skipping the end-to-end suite\n`);
    return finish(vitestCode);
  }

  process.stderr.write("[test] stage 2/2: end-to-end suite against wrangler dev\n");
  const e2eCode = await run(node, [join(repoRoot, "scripts", "e2e.mjs")], { ...process.env, TRELLIS_E2E_TAP: e2eTap });
  const e = tapCounts();
  passed += e.passed;
  failed += e.failed;
  if (e2eCode !== 0 && e.failed === 0) failed += 1;
  return finish(e2eCode);
}

process.exitCode = await main().catch((err) => {
  process.stderr.write(`[test] ${err?.stack ?? err}\n`);
  process.stdout.write(`\ntests: 0 passed, 1 failed\n`);
  return 1;
});
