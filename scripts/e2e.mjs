#!/usr/bin/env node
/**
 * `npm run test:e2e`: the end-to-end smoke suite against `wrangler dev` (real
 * workerd, production code-generation rules), over HTTP.
 *
 * Starts one HTTP target and one `wrangler dev` (free port, temporary state,
 * fresh API token and journal key) for the whole suite, runs
 * `node --test test/e2e/*.test.mjs` with their addresses in TRELLIS_URL,
 * TRELLIS_TOKEN and TRELLIS_HTTP_TARGET_URL, then stops both and exits with the
 * test runner's code. Runs are exported as traces to a local OTLP receiver
 * (scripts/lib/otlp-receiver.mjs) at TRELLIS_OTLP_URL, whose key is TRELLIS_OTLP_KEY.
 *
 * Output: the spec reporter on stdout; a TAP copy in $TRELLIS_E2E_TAP (default
 * .test-results/e2e.tap, which scripts/test.mjs counts); wrangler's own output
 * in .test-results/wrangler.log (its tail is printed when something failed).
 * Extra arguments go to `node --test`, e.g.
 * `npm run test:e2e -- --test-name-pattern=greet`. Set TRELLIS_WRANGLER_ECHO=1
 * to see wrangler's output live.
 */
import { spawn } from "node:child_process";
import { generateKeyPairSync, randomBytes } from "node:crypto";
import { mkdirSync, readdirSync, rmSync, writeFileSync } from "node:fs";
import { dirname, join, relative, resolve } from "node:path";
import { startOtlpReceiver } from "./lib/otlp-receiver.mjs";
import { startPeers } from "./lib/peers.mjs";
import { repoRoot, resolveNode, startWranglerDev } from "./lib/wrangler-dev.mjs";

const SUITE_TIMEOUT_MS = 20 * 60_000;
const resultsDir = join(repoRoot, ".test-results");
const tapFile = resolve(process.env.TRELLIS_E2E_TAP ?? join(resultsDir, "e2e.tap"));
const wranglerLog = join(resultsDir, "wrangler.log");
const log = (/** @type {string} */ msg) => process.stderr.write(`[e2e] ${msg}\n`);

async function main() {
  mkdirSync(resultsDir, { recursive: true });
  mkdirSync(dirname(tapFile), { recursive: true });
  rmSync(tapFile, { force: true });

  const files = listTestFiles();
  if (files.length === 0) {
    log("no test/e2e/*.test.mjs files");
    return 1;
  }

  // The same peers as `npm run dev` (scripts/lib/peers.mjs): containers in local mode against the
  // shell server, the HTTP target, the LLM server and the MCP server, their URLs in WORKFLOW_VARS.
  const peers = await startPeers({ log });
  const target = { url: peers.vars.HTTP_TARGET_URL ?? "" };
  const token = `e2e-${randomBytes(12).toString("hex")}`;
  const signingKey = freshSigningKey();
  // The collector runs are exported to as traces (docs/telemetry.md), with a key of its own.
  const otlpKey = `otlp-${randomBytes(12).toString("hex")}`;
  const otlp = await startOtlpReceiver({ authorization: `Bearer ${otlpKey}` });

  const dev = await startDev({
    API_TOKENS: `${token},e2e-second-token`,
    JOURNAL_SIGNING_KEY: signingKey,
    ...peers.vars,
    ...peers.secrets,
    OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
    OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${otlpKey}`,
  });
  if (dev === null) {
    await peers.stop();
    await otlp.close();
    return 1;
  }
  log(`wrangler dev ready at ${dev.url} in ${dev.startupMs} ms; http target at ${target.url}`);

  let code = 1;
  /** @type {string[]} */
  const measurements = [];
  try {
    code = await runNodeTest(
      files,
      {
        TRELLIS_URL: dev.url,
        TRELLIS_TOKEN: token,
        TRELLIS_HTTP_TARGET_URL: target.url,
        TRELLIS_OTLP_URL: otlp.url,
        TRELLIS_OTLP_KEY: otlpKey,
      },
      measurements,
    );
  } finally {
    keepOutput(dev, code);
    await dev.stop();
    await peers.stop();
    await otlp.close();
  }
  for (const m of measurements) process.stdout.write(`${m}\n`);
  return code;
}

/**
 * Keeps what wrangler printed in .test-results/wrangler.log, and shows its end when the suite failed.
 * @param {{ output(): string }} dev @param {number} code
 */
function keepOutput(dev, code) {
  writeFileSync(wranglerLog, dev.output());
  if (code !== 0) {
    const tail = dev.output().trimEnd().split("\n").slice(-60).join("\n");
    log(`wrangler output (last 60 lines; all of it in ${relative(repoRoot, wranglerLog)}):\n${tail}`);
  }
}

/**
 * `wrangler dev` with the suite's vars; null when it does not start (what it printed is kept in
 * .test-results/wrangler.log).
 * @param {Record<string, unknown>} vars
 */
async function startDev(vars) {
  try {
    return await startWranglerDev({ vars });
  } catch (err) {
    writeFileSync(wranglerLog, String(/** @type {any} */ (err)?.output ?? ""));
    log(`wrangler dev did not start: ${/** @type {any} */ (err)?.message ?? err}`);
    return null;
  }
}

/** The suite's files, `test/e2e/*.test.mjs`, relative to the repository root. */
function listTestFiles() {
  const e2eDir = join(repoRoot, "test", "e2e");
  return readdirSync(e2eDir)
    .filter((f) => f.endsWith(".test.mjs"))
    .sort()
    .map((f) => relative(repoRoot, join(e2eDir, f)));
}

/** A new Ed25519 journal signing key: PKCS#8 DER, base64. */
function freshSigningKey() {
  return generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");
}

/**
 * Runs `node --test` on `files` (and this script's extra arguments) with
 * `env` added, copying its spec output to stdout and collecting the
 * measurement lines the tests print into `measurements`; gives its exit code.
 * @param {string[]} files
 * @param {Record<string, string>} env
 * @param {string[]} measurements
 * @returns {Promise<number>}
 */
function runNodeTest(files, env, measurements) {
  return new Promise((resolveCode) => {
    const child = spawn(
      resolveNode(),
      [
        "--test",
        "--test-concurrency=1",
        "--test-timeout=300000",
        "--test-reporter=spec",
        "--test-reporter-destination=stdout",
        "--test-reporter=tap",
        `--test-reporter-destination=${tapFile}`,
        ...process.argv.slice(2),
        ...files,
      ],
      {
        cwd: repoRoot,
        stdio: ["ignore", "pipe", "inherit"],
        env: { ...process.env, ...env },
      },
    );
    let pending = "";
    child.stdout?.on("data", (chunk) => {
      process.stdout.write(chunk);
      pending += chunk.toString("utf8");
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) {
        const m =
          /\b(chain\d+: total=\S+ per_node=\S+|fanout\d+: makespan=.*|gate_answer_to_resume: .*|containers: shell_true_run .*|restart: every run reached .*|browser: .*)$/.exec(
            line,
          );
        if (m?.[1]) measurements.push(m[1]);
      }
    });
    const timer = setTimeout(() => {
      log(`suite still running after ${SUITE_TIMEOUT_MS / 60_000} min: stopping it`);
      child.kill("SIGTERM");
    }, SUITE_TIMEOUT_MS);
    child.once("error", (err) => {
      log(`could not run node --test: ${err.message}`);
      clearTimeout(timer);
      resolveCode(1);
    });
    child.once("exit", (c, signal) => {
      clearTimeout(timer);
      resolveCode(c ?? (signal ? 1 : 0));
    });
  });
}

process.exitCode = await main().catch((err) => {
  log(`failed: ${err?.stack ?? err}`);
  return 1;
});
