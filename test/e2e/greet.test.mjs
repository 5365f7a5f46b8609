// A whole run through real workerd: register, run, poll, then verify the signed
// journal offline with the project's verifier CLI (and see it reject a tampered copy).
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { repoRoot, resolveNode } from "../../scripts/lib/wrangler-dev.mjs";
import { api, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

/** The greet workflow: one node, one inline task, one `context` step. */
export function greetWorkflow(/** @type {string} */ id) {
  return {
    id,
    input_schema: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
    nodes: {
      greet: {
        task: {
          id: `${id}-task`,
          steps: [
            {
              ref: "compute",
              action: {
                id: `${id}-compute`,
                kind: "context",
                implementation: { updates: [{ path: "greeting", expr: "'Hello, ' + input.name" }] },
              },
              input_mapping: { name: "$.input.name" },
              output_mapping: { "output.greeting": "$.greeting" },
            },
          ],
        },
        input_mapping: { name: "$.input.name" },
        output_mapping: { "output.greeting": "$.greeting" },
      },
    },
  };
}

/** The verifier CLI: scripts/verify-journal.ts (Node >= 22.18 strips its types), else .mjs. */
function verifierPath() {
  for (const name of ["verify-journal.ts", "verify-journal.mjs"]) {
    const p = join(repoRoot, "scripts", name);
    if (existsSync(p)) {
      return p;
    }
  }
  return undefined;
}

/**
 * `node scripts/verify-journal.ts <journal> <jwks> --require-attestation --run-id <id>`:
 * exit 0 verified, 1 not verified, 2 usage error.
 * @param {string} journalFile
 * @param {string} jwksFile
 * @param {string} runId
 */
function runVerifier(journalFile, jwksFile, runId) {
  const cli = verifierPath();
  assert.ok(cli, "the journal verifier CLI (scripts/verify-journal.ts) does not exist yet");
  const args = [cli, journalFile, jwksFile, "--require-attestation", "--run-id", runId];
  const r = spawnSync(resolveNode(), args, { encoding: "utf8", timeout: 60_000, cwd: repoRoot });
  return { code: r.status, out: `${r.stdout ?? ""}${r.stderr ?? ""}${r.error ? String(r.error) : ""}` };
}

/**
 * Changes exactly one byte of the journal text while keeping it valid JSON: the
 * "a" of the greeting's "Ada" if present, else a digit of the first timestamp.
 * @param {string} text
 */
function tamperOneByte(text) {
  const i = text.indexOf("Hello, Ada");
  if (i >= 0) {
    return `${text.slice(0, i + 9)}b${text.slice(i + 10)}`;
  }
  const m = /"at"\s*:\s*"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d/.exec(text);
  assert.ok(m, "found nothing to tamper with in the journal");
  const pos = m.index + m[0].length - 1;
  const digit = text[pos] === "0" ? "1" : "0";
  return `${text.slice(0, pos)}${digit}${text.slice(pos + 1)}`;
}

describe("greet: a one-node run", () => {
  const dir = mkdtempSync(join(tmpdir(), "trellis-e2e-greet-"));
  after(() => rmSync(dir, { recursive: true, force: true }));
  /** @type {any} */
  let run;

  test("registers, runs to completed, and outputs the greeting", async () => {
    const id = uid("greet");
    const reg = await register({ workflows: [greetWorkflow(id)] });
    assert.ok(Array.isArray(reg.created), `created should be a list: ${JSON.stringify(reg)}`);
    assert.ok(
      reg.created.some((/** @type {any} */ c) => c.id === id && c.version === 1),
      JSON.stringify(reg),
    );

    const started = await startRun(id, { input: { name: "Ada" } });
    assert.equal(started.status, 201, show(started));
    assert.equal(typeof started.json.run_id, "string");
    assert.deepEqual(started.json.workflow, { id, version: 1 });

    run = await waitForRun(started.json.run_id, { timeoutMs: 60_000 });
    assert.equal(run.status, "completed", `run: ${JSON.stringify(run)}`);
    assert.deepEqual(run.output, { greeting: "Hello, Ada" });
    assert.deepEqual(run.input, { name: "Ada" });
    assert.equal(run.nodes?.greet?.status, "completed", JSON.stringify(run.nodes));
    assert.equal(run.nodes.greet.attempts, 1);
  });

  test("a start with Prefer: wait answers with the ended run and its output", async () => {
    const id = uid("greet-wait");
    await register({ workflows: [greetWorkflow(id)] });
    const started = await api("POST", `/v1/workflows/${id}/runs`, {
      body: { input: { name: "Ada" } },
      headers: { prefer: "wait=20" },
    });
    assert.equal(started.status, 201, show(started));
    assert.equal(started.headers.get("preference-applied"), "wait=20");
    assert.equal(started.json.status, "completed", show(started));
    assert.deepEqual(started.json.output, { greeting: "Hello, Ada" });
    assert.equal(started.json.error, null);
    const journal = await api("GET", `/v1/runs/${started.json.run_id}/journal`);
    assert.equal(journal.json.entries.at(-1).kind, "attest", "attested before the answer left");
  });

  test("it is listed by GET /v1/runs from the run index (D1, migrated by the suite's start), and a bad filter is a 400", async (t) => {
    if (!run) {
      return t.skip("no completed run");
    }
    // The index is written after the run's commit: wait for it to show the final status.
    const deadline = Date.now() + 30_000;
    let listed;
    while (Date.now() < deadline) {
      const res = await api("GET", `/v1/runs?workflow=${run.workflow.id}`);
      assert.equal(res.status, 200, show(res));
      listed = res.json.runs.find((/** @type {any} */ r) => r.run_id === run.run_id);
      if (listed?.status === "completed") {
        break;
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    assert.equal(listed?.status, "completed", `never listed as completed: ${JSON.stringify(listed)}`);
    assert.deepEqual(listed.workflow, run.workflow);
    assert.equal(listed.created_at, run.created_at);
    const bad = await api("GET", "/v1/runs?status=finished&limit=500");
    assert.equal(bad.status, 400, show(bad));
    assert.deepEqual(bad.json.error.details.map((/** @type {any} */ d) => d.path).sort(), ["limit", "status.0"]);
    assert.equal((await api("GET", "/v1/runs", { token: null })).status, 401);
  });

  test("its journal verifies offline, and a one-byte change does not", async (t) => {
    if (!run) {
      return t.skip("no completed run");
    }
    const journal = await api("GET", `/v1/runs/${run.run_id}/journal`);
    assert.equal(journal.status, 200, show(journal));
    const entries = journal.json.entries;
    assert.ok(Array.isArray(entries) && entries.length >= 2, show(journal));
    entries.forEach((/** @type {any} */ e, /** @type {number} */ i) => {
      assert.equal(e.seq, i + 1, "seq starts at 1 without gaps");
      assert.equal(e.run_id, run.run_id);
      assert.equal(e.prev, i === 0 ? null : entries[i - 1].hash);
    });
    assert.equal(entries.at(-1).kind, "attest", "the terminal entry is an attestation");
    assert.equal(entries.at(-1).body?.outcome, "completed");

    const keys = await api("GET", "/v1/journal-keys");
    assert.equal(keys.status, 200, show(keys));
    assert.ok(Array.isArray(keys.json.keys) && keys.json.keys.length > 0, show(keys));

    const journalFile = join(dir, "journal.json");
    const jwksFile = join(dir, "jwks.json");
    writeFileSync(journalFile, journal.text);
    writeFileSync(jwksFile, keys.text);

    const good = runVerifier(journalFile, jwksFile, run.run_id);
    assert.equal(good.code, 0, `verifier should accept the journal:\n${good.out}`);

    const tampered = tamperOneByte(readFileSync(journalFile, "utf8"));
    assert.equal(Buffer.byteLength(tampered), Buffer.byteLength(journal.text));
    const tamperedFile = join(dir, "journal-tampered.json");
    writeFileSync(tamperedFile, tampered);
    const bad = runVerifier(tamperedFile, jwksFile, run.run_id);
    assert.equal(bad.code, 1, `verifier should reject the tampered journal with exit 1:\n${bad.out}`);
  });
});
