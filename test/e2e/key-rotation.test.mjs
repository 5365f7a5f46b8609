// A rotation of the journal's signing key, end to end (docs/journal.md,
// "Rotation"): a run waits at a gate under key A; `wrangler dev` is stopped and
// started again on the same state with key B in JOURNAL_SIGNING_KEY, A's JWKS
// in JOURNAL_RETIRED_KEYS and A in TOKEN_HASH_KEY, as the documented steps
// say; the gate is answered and the run finishes under B. Its journal, signed
// partly by each key, then verifies with all three verifiers against the
// published JWKS: `trellis verify`, `npm run verify` and the console's
// in-browser check. Without the retired key it does not, which shows the
// rotation is what the test crosses.
//
// This file starts its own `wrangler dev` (twice), whatever scripts/e2e.mjs
// started for the other files.
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot, resolveNode } from "../../scripts/lib/toolchain.mjs";
import { startWranglerDev } from "../../scripts/lib/wrangler-dev.mjs";
import { CLI, freshSigningKey, TERMINAL, uid } from "./helpers.mjs";
import { client, journalOf, until } from "./restart-kit.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
const UI_TIMEOUT_MS = 30_000;

/** A workflow whose one node waits at a human gate, then records the answer. */
function gatedWorkflow(/** @type {string} */ id) {
  return {
    id,
    nodes: {
      ask: {
        task: {
          steps: [
            {
              ref: "ask",
              action: {
                kind: "human",
                implementation: {
                  prompt_template: "Go on?",
                  input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
                },
              },
              output_mapping: { "output.ok": "$.response.ok" },
            },
          ],
        },
        output_mapping: { "output.ok": "$.ok" },
      },
    },
  };
}

/**
 * Runs a command from the repository root to its end.
 * @param {string} command
 * @param {string[]} args
 * @param {Record<string, string>} [extraEnv]
 * @returns {Promise<{ code: number | null, stdout: string, stderr: string }>}
 */
function runCommand(command, args, extraEnv = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: repoRoot, env: { ...process.env, ...extraEnv }, stdio: "pipe" });
    let stdout = "";
    let stderr = "";
    child.stdout.on("data", (chunk) => (stdout += chunk));
    child.stderr.on("data", (chunk) => (stderr += chunk));
    child.on("error", reject);
    child.on("close", (code) => resolve({ code, stdout, stderr }));
  });
}

/** The console's run page, signed in with `token`: the in-browser verifier's line once it has an answer. */
async function verifyInConsole(/** @type {string} */ url, /** @type {string} */ token, /** @type {string} */ runId) {
  const browser = await chromium.launch({ executablePath: await ensureChromium(), args: ["--no-sandbox"] });
  try {
    const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    await page.goto(`${url}/`);
    await page.getByLabel("API token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.goto(`${url}/runs/${runId}`);
    const line = page.locator(".verify[data-state]:not([data-state='waiting'])");
    await line.getByText(/verified|not verified/).waitFor({ timeout: UI_TIMEOUT_MS });
    await page.getByText("attested completed").first().waitFor({ timeout: UI_TIMEOUT_MS });
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.screenshot({ path: join(SCREENSHOTS, "key-rotation.png"), fullPage: true });
    return { state: await line.getAttribute("data-state"), text: await line.innerText(), problems };
  } finally {
    await browser.close();
  }
}

test("a run that spans a rotation of the journal key verifies with trellis verify, npm run verify and the console", async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-rotation-"));
  const files = mkdtempSync(join(tmpdir(), "trellis-rotation-files-"));
  const admin = `rotation-${uid("t")}`;
  const keyA = freshSigningKey();
  const keyB = freshSigningKey();
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars: { API_TOKENS: admin, JOURNAL_SIGNING_KEY: keyA }, persistTo: stateDir });
    let api = client(dev.url, admin);
    const id = uid("rotation");
    assert.equal((await api("POST", "/v1/definitions", { workflows: [gatedWorkflow(id)] })).status, 201);
    // A stored token starts the run and answers the gate: its keyed hash must survive the rotation too.
    const made = await api("POST", "/v1/tokens", { name: "rotation-ops", roles: ["runner", "approver", "reader"] });
    assert.equal(made.status, 201, made.text);
    const ops = client(dev.url, made.json.token);
    const started = await ops("POST", `/v1/workflows/${id}/runs`, { input: {} });
    assert.equal(started.status, 201, started.text);
    const runId = started.json.run_id;
    await until("the gate to open", async () => (await ops("GET", `/v1/runs/${runId}/gates`)).json?.gates?.length > 0);
    const oldJwks = (await api("GET", "/v1/journal-keys")).json;
    assert.equal(oldJwks.keys.length, 1);
    const kidA = oldJwks.keys[0].kid;
    await dev.stop();
    dev = undefined;

    // The documented rotation: the old JWKS retired, the new private key, the token hash key kept.
    dev = await startWranglerDev({
      vars: {
        API_TOKENS: admin,
        JOURNAL_SIGNING_KEY: keyB,
        JOURNAL_RETIRED_KEYS: JSON.stringify(oldJwks),
        TOKEN_HASH_KEY: keyA,
      },
      persistTo: stateDir,
    });
    api = client(dev.url, admin);
    const opsAfter = client(dev.url, made.json.token);
    const answered = await opsAfter("POST", `/v1/runs/${runId}/gates/gate_1`, { response: { ok: true } });
    assert.equal(answered.status, 200, answered.text);
    const run = await until("the run to end", async () => {
      const view = await opsAfter("GET", `/v1/runs/${runId}`);
      return TERMINAL.has(view.json?.status) ? view.json : undefined;
    });
    assert.equal(run.status, "completed", JSON.stringify(run.error));

    const jwks = (await api("GET", "/v1/journal-keys")).json;
    const kidB = jwks.keys[0].kid;
    assert.notEqual(kidB, kidA);
    assert.deepEqual(
      jwks.keys.map((/** @type {{ kid: string }} */ key) => key.kid),
      [kidB, kidA],
    );
    const entries = await journalOf(api, runId);
    const kids = entries.map((/** @type {{ kid: string }} */ entry) => entry.kid);
    const firstB = kids.indexOf(kidB);
    assert.ok(firstB > 0, `the journal starts under key A and goes on under key B: ${kids.join(" ")}`);
    assert.deepEqual(new Set(kids.slice(0, firstB)), new Set([kidA]));
    assert.deepEqual(new Set(kids.slice(firstB)), new Set([kidB]));
    const answerEntry = entries.find((/** @type {{ kind: string }} */ entry) => entry.kind === "gate.answered");
    assert.equal(answerEntry?.kid, kidB);

    // 1. trellis verify <run id>: the journal and the published keys from the server.
    const cli = await runCommand(resolveNode(), [CLI, "verify", runId], {
      TRELLIS_URL: dev.url,
      TRELLIS_TOKEN: made.json.token,
    });
    assert.equal(cli.code, 0, cli.stdout + cli.stderr);
    const byOps = `by token "rotation-ops" (${made.json.token_id})`;
    // Each sealed value of each entry (its input, outputs, the answer) checked against its digest.
    const sealedCount = entries.reduce(
      (/** @type {number} */ sum, /** @type {{ body: { $sealed?: object } }} */ entry) =>
        sum + Object.keys(entry.body.$sealed ?? {}).length,
      0,
    );
    assert.equal(
      cli.stdout,
      [
        `OK: ${entries.length} entries, run ${runId}, attested completed`,
        `  sealed values: ${sealedCount} match their digests, 0 erased`,
        `  seq 1 run.created ${byOps}`,
        `  seq ${answerEntry?.seq} gate.answered ${byOps}`,
        "",
      ].join("\n"),
    );

    // 2. npm run verify on saved files: against the published JWKS it verifies; against either key alone it does not.
    writeFileSync(join(files, "journal.json"), JSON.stringify({ entries }));
    writeFileSync(join(files, "jwks.json"), JSON.stringify(jwks));
    writeFileSync(join(files, "new-only.json"), JSON.stringify({ keys: [jwks.keys[0]] }));
    writeFileSync(join(files, "old-only.json"), JSON.stringify(oldJwks));
    const npmVerify = (/** @type {string} */ keys) =>
      runCommand("npm", [
        "run",
        "--silent",
        "verify",
        "--",
        join(files, "journal.json"),
        join(files, keys),
        "--require-attestation",
        `--run-id=${runId}`,
      ]);
    const verified = await npmVerify("jwks.json");
    assert.equal(verified.code, 0, verified.stdout + verified.stderr);
    assert.match(verified.stdout, new RegExp(`^OK: ${entries.length} entries, run ${runId}, attested completed\n`));
    const newOnly = await npmVerify("new-only.json");
    assert.equal(newOnly.code, 1);
    assert.match(newOnly.stdout, /^FAIL: entry seq 1 \(index 0\): unknown kid/);
    const oldOnly = await npmVerify("old-only.json");
    assert.equal(oldOnly.code, 1);
    assert.match(oldOnly.stdout, new RegExp(`^FAIL: entry seq ${firstB + 1} \\(index ${firstB}\\): unknown kid`));

    // 3. The console's in-browser verifier, against the keys the server publishes.
    const shown = await verifyInConsole(dev.url, made.json.token, runId);
    assert.equal(shown.state, "verified", shown.text);
    assert.match(shown.text, new RegExp(`^verified · ${entries.length} entries · attested completed`));
    assert.deepEqual(shown.problems, []);
  } finally {
    await dev?.stop();
    rmSync(stateDir, { recursive: true, force: true });
    rmSync(files, { recursive: true, force: true });
  }
});
