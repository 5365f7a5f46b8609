// A limit's slot held by a server killed mid-call comes back after its lease,
// against real workerd: a limit of one call at a time, a run whose call holds
// the slot at the HTTP target (`/slow`), a second run whose call waits for it;
// the whole `wrangler dev` is killed (SIGKILL to its process group) while the
// first call runs, then restarted on the same state directory with the same
// short lease. Afterwards the limit object's alarm reclaims the dead call's
// lapsed slot and serves the waiting run, whose call goes first (it waited
// longest); the first run's lost dispatch is sent again, waits its turn, and
// both runs complete. The calls that completed never overlapped at the target
// (one slot, never counted twice), the first run's journal shows it waited
// for its slot again, the status route ends at nothing held and nobody
// waiting, and both journals verify offline.
//
// It starts its own HTTP target and `wrangler dev` (it kills it), whatever
// scripts/e2e.mjs started for the other files.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { verifyJournal } from "../../lib/journal/index.ts";
import { startHttpTarget } from "../../scripts/lib/http-target.mjs";
import { startWranglerDev } from "../../scripts/lib/wrangler-dev.mjs";
import { freshSigningKey, TERMINAL, uid } from "./helpers.mjs";
import { client, journalOf, until } from "./restart-kit.mjs";

/** How long each call takes at the target: the kill lands while the first one runs. */
const CALL_MS = 6_000;
/** The lease a step's slot has without a renewal (LIMIT_LEASE_MS): short, so the test waits little. */
const LEASE_MS = 2_000;

test("a wrangler dev killed while a call holds a limit's only slot: the slot comes back after its lease, the waiting run goes first, both complete, the completed calls never overlap", async () => {
  const target = await startHttpTarget({ port: 0 });
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-limit-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey(), LIMIT_LEASE_MS: String(LEASE_MS) };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const ids = { limit: uid("one-call"), action: uid("slow-call"), workflow: uid("rs-limit") };
    const key = uid("slow");
    const registered = await api("POST", "/v1/definitions", {
      limits: [{ id: ids.limit, concurrency: 1 }],
      actions: [
        {
          id: ids.action,
          kind: "http",
          implementation: { method: "GET", url_template: `${target.url}/slow/${key}?ms=${CALL_MS}&stamp=1` },
          limits: [{ limit: ids.limit }],
        },
      ],
      workflows: [
        {
          id: ids.workflow,
          nodes: {
            call: {
              task: { steps: [{ ref: "get", action: ids.action, output_mapping: { "output.call": "$.body" } }] },
              output_mapping: { "output.call": "$.call" },
            },
          },
        },
      ],
    });
    assert.equal(registered.status, 201, registered.text);
    const startRun = async () => {
      const started = await api("POST", `/v1/workflows/${ids.workflow}/runs`, { input: {} });
      assert.equal(started.status, 201, started.text);
      return /** @type {string} */ (started.json.run_id);
    };
    const first = await startRun();
    await until("the first call at the target", async () => target.hits(key) === 1);
    const second = await startRun();
    await until("the second run waiting for the slot", async () => {
      const read = await api("GET", `/v1/runs/${second}`);
      return read.json?.waiting_for?.some((/** @type {{ kind: string }} */ wait) => wait.kind === "limit");
    });

    await dev.kill();
    // Dead for longer than the lease, whatever wrangler's start time: the slot has lapsed when it is back.
    await new Promise((resolve) => setTimeout(resolve, LEASE_MS + 500));
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);

    const runs = await until("both runs to end", async () => {
      const reads = await Promise.all([first, second].map((id) => api("GET", `/v1/runs/${id}`)));
      return reads.every((read) => TERMINAL.has(read.json?.status)) ? reads.map((read) => read.json) : undefined;
    });
    for (const run of runs) {
      assert.equal(run.status, "completed", JSON.stringify(run.error));
    }
    const [firstCall, secondCall] = runs.map(
      (run) => /** @type {{ started_at: number, finished_at: number }} */ (run.output.call),
    );
    // One slot: the completed calls never overlapped, and the waiting run's went first.
    assert.ok(secondCall.finished_at <= firstCall.started_at, `${JSON.stringify(runs.map((run) => run.output.call))}`);
    // Three calls reached the target: the one lost with the kill, then one per run.
    assert.equal(target.hits(key), 3);

    const firstEntries = await journalOf(api, first);
    const kinds = firstEntries.map((entry) => entry.kind);
    assert.ok(kinds.includes("task.lost"), kinds.join(", "));
    assert.ok(kinds.includes("limit.waiting"), "the first run's lost call waited for the slot again");
    const secondEntries = await journalOf(api, second);
    const granted = secondEntries.find((entry) => entry.kind === "limit.granted");
    assert.ok(granted, "the second run was served");

    const status = await api("GET", `/v1/limits/${ids.limit}/status`);
    assert.equal(status.status, 200, status.text);
    assert.equal(status.json.in_use, 0);
    assert.equal(status.json.waiting, 0);

    const jwks = (await api("GET", "/v1/journal-keys")).json;
    for (const entries of [firstEntries, secondEntries]) {
      const report = await verifyJournal(entries, jwks, { requireAttestation: true });
      assert.equal(report.ok, true, JSON.stringify(report.problems));
    }
  } finally {
    await dev?.stop();
    await target.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});
