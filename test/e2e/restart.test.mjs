// Recovery needs no reader, against real workerd: the whole `wrangler dev` is
// killed (SIGKILL to its process group) while five runs are mid-flight — a
// parent whose child is calling a peer, a wide foreach whose items are all
// calling it, a task resumed after a gate answer and calling it, a node
// waiting out a retry backoff, and a run queued for a delayed start — then
// restarted on the same state directory.
// Afterwards nothing reads a run: the test watches only the HTTP peer's
// counters (each run's last node marks the peer), then reads each run once
// and checks that it completed, that every node (and foreach item) completed
// exactly once, that the lost calls were journaled `task.lost` (never a
// timeout), that the delayed run started at its start_at (not before; late
// only by as long as the server was down past it), and that every journal
// verifies offline.
//
// A second test kills it during a `sleep` step and checks, again without
// reading the run until the step after the sleep has run, that the timer fired
// once, not before its time and soon after it (or after the restart, when that
// came later), and that the journal verifies.
//
// Two more kill an `event` wait's server: one after the wait registered at its
// event hub (the event is sent after the restart: the run takes it once), one
// right after `POST /v1/events` answered 202 while many runs wait (the hub's
// outbox, its delivery lease and its alarm deliver what the kill cut off: every
// run takes the event once).
//
// Each test starts its own HTTP target and its own `wrangler dev` (it kills
// it), whatever scripts/e2e.mjs started for the other files.
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

/** How long each interrupted peer call takes: long enough that the kill lands while it runs. */
const SLOW_MS = 4_000;
/** Items of the wide foreach, all in flight at once. */
const ITEMS = 30;
/** The retry's backoff: the kill lands inside it. */
const BACKOFF_MS = 4_000;
/** How late the delayed run may start: after its start_at, or after the restart when that came later. */
const START_SLACK_MS = 2_000;
/** Runs waiting on one event when the server is killed right after the event's 202: several delivery rounds. */
const EVENT_RUNS = 150;

/** @param {string} ref @param {string} url */
const httpStep = (ref, url) => ({
  ref,
  action: { kind: "http", implementation: { method: "GET", url_template: url } },
});

test("a killed and restarted wrangler dev finishes every interrupted run by itself: each node completed once, lost calls journaled task.lost, a delayed start on time, journals verified", async () => {
  const target = await startHttpTarget({ port: 0 });
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey(), HTTP_TARGET_URL: target.url };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const k = uid("rs");
    const ids = {
      child: uid("rs-child"),
      parent: uid("rs-parent"),
      wide: uid("rs-wide"),
      gate: uid("rs-gate"),
      retry: uid("rs-retry"),
      delayed: uid("rs-delayed"),
    };
    /** The run's last node: it marks the peer, which is how the test sees the run get there. */
    const done = (/** @type {string} */ name, /** @type {string} */ after) => ({
      depends_on: [after],
      task: { steps: [httpStep("mark", `${target.url}/mark/${k}-${name}-done`)] },
    });
    const registered = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id: ids.child,
          nodes: { wait: { task: { steps: [httpStep("wait", `${target.url}/slow/${k}-child?ms=${SLOW_MS}`)] } } },
        },
        { id: ids.parent, nodes: { sub: { workflow: ids.child }, done: done("parent", "sub") } },
        {
          id: ids.wide,
          max_parallel: ITEMS,
          nodes: {
            each: {
              foreach: { items: "$.input.items", max_parallel: ITEMS },
              task: { steps: [httpStep("wait", `${target.url}/slow/${k}-each?ms=${SLOW_MS}`)] },
            },
            done: done("wide", "each"),
          },
        },
        {
          id: ids.gate,
          nodes: {
            ask: {
              task: {
                steps: [
                  {
                    ref: "ask",
                    action: {
                      kind: "human",
                      implementation: { prompt_template: "go?", input_schema: { type: "object" } },
                    },
                  },
                  httpStep("after", `${target.url}/slow/${k}-gate?ms=${SLOW_MS}`),
                ],
              },
            },
            done: done("gate", "ask"),
          },
        },
        {
          id: ids.retry,
          nodes: {
            flaky: {
              retry: { max_attempts: 3, initial_delay_ms: BACKOFF_MS, jitter: false },
              task: {
                steps: [
                  { ...httpStep("call", `${target.url}/flaky/${k}-flaky?fail=1&status=503`), on_failure: "retry" },
                ],
              },
            },
            done: done("retry", "flaky"),
          },
        },
        {
          id: ids.delayed,
          nodes: { done: { task: { steps: [httpStep("mark", `${target.url}/mark/${k}-delayed-done`)] } } },
        },
      ],
    });
    assert.equal(registered.status, 201, registered.text);

    /** @param {string} id @param {unknown} input */
    const start = async (id, input) => {
      const started = await api("POST", `/v1/workflows/${id}/runs`, { input });
      assert.equal(started.status, 201, started.text);
      return /** @type {string} */ (started.json.run_id);
    };
    const runs = {
      parent: await start(ids.parent, {}),
      wide: await start(ids.wide, { items: Array.from({ length: ITEMS }, (_, i) => i) }),
      gate: await start(ids.gate, {}),
      retry: await start(ids.retry, {}),
    };
    // Before the kill, reading is fine: bring each run to the moment it is interrupted at.
    const gates = await until("the gate", async () => {
      const listed = await api("GET", `/v1/runs/${runs.gate}/gates`);
      return listed.json?.gates?.find((/** @type {{ status: string }} */ gate) => gate.status === "open");
    });
    const answered = await api("POST", `/v1/runs/${runs.gate}/gates/${gates.gate_id}`, { response: { ok: true } });
    assert.equal(answered.status, 200, answered.text);
    await until(
      "every call in flight",
      async () =>
        target.hits(`${k}-child`) === 1 && target.hits(`${k}-each`) === ITEMS && target.hits(`${k}-gate`) === 1,
    );
    await until("the retry's backoff", async () => {
      const entries = (await api("GET", `/v1/runs/${runs.retry}/journal`)).json.entries;
      return entries.some((/** @type {{ kind: string }} */ entry) => entry.kind === "task.retry_scheduled");
    });
    // Started last, due well after the restart should be done (twice the first start-up, plus 2 s):
    // the kill and the restart fall inside its delay, and only its stored alarm can start it.
    const delayMs = 2 * dev.startupMs + 2_000;
    const delayed = await api("POST", `/v1/workflows/${ids.delayed}/runs`, { input: {}, delay_ms: delayMs });
    assert.equal(delayed.status, 201, delayed.text);
    assert.equal(delayed.json.status, "queued");
    const delayedRun = /** @type {string} */ (delayed.json.run_id);
    const startAt = Date.parse((await api("GET", `/v1/runs/${delayedRun}`)).json.start_at);

    await dev.kill();
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);
    const restarted = Date.now();

    // Nothing reads a run now: each run's last node marks the peer when it gets there.
    for (const name of ["parent", "wide", "gate", "retry"]) {
      await until(`${name} to reach its last node`, async () => target.hits(`${k}-${name}-done`) >= 1);
    }
    // A measurement, not a threshold: it includes the re-sent calls' own ${SLOW_MS} ms.
    console.log(
      `restart: every run reached its last node ${Date.now() - restarted}ms after the restarted wrangler answered (interrupted calls take ${SLOW_MS}ms)`,
    );
    await until("the delayed run to reach its node", async () => target.hits(`${k}-delayed-done`) >= 1);

    const childRunIds = [];
    for (const [name, runId] of Object.entries({ ...runs, delayed: delayedRun })) {
      // The last mark's result may still be on its way into the journal: only now is the run read.
      const run = await until(`${name} to end`, async () => {
        const read = await api("GET", `/v1/runs/${runId}`);
        return TERMINAL.has(read.json?.status) ? read.json : undefined;
      });
      assert.equal(run.status, "completed", `${name}: ${JSON.stringify(run.error)}`);
      const entries = await journalOf(api, runId);
      assert.equal(entries.filter((entry) => entry.kind === "task.timeout").length, 0, `${name}: no timeout`);
      assertEachCompletedOnce(entries, name);
      if (name === "wide") {
        assert.equal(
          entries.filter((entry) => entry.kind === "task.completed" && entry.body.node === "each").length,
          ITEMS,
          "every item completed",
        );
      }
      const child = entries.find((entry) => entry.kind === "child.started");
      if (child) {
        childRunIds.push(String(child.body.child_run_id));
      }
    }
    assert.equal(childRunIds.length, 1, "the parent started one child");
    const childEntries = await journalOf(api, childRunIds[0]);
    assertEachCompletedOnce(childEntries, "child");

    // The calls in flight at the kill were lost and sent again, once each.
    const lost = async (/** @type {string} */ runId) =>
      (await journalOf(api, runId)).filter((entry) => entry.kind === "task.lost").length;
    assert.equal(
      childEntries.filter((entry) => entry.kind === "task.lost").length,
      1,
      "the child's call was lost once",
    );
    assert.equal(await lost(runs.wide), ITEMS, "every item's call was lost once");
    assert.equal(await lost(runs.gate), 1, "the resumed call was lost once");
    assert.equal(await lost(runs.retry), 0, "nothing was in flight during the backoff");
    assert.deepEqual(
      {
        child: target.hits(`${k}-child`),
        each: target.hits(`${k}-each`),
        gate: target.hits(`${k}-gate`),
        flaky: target.hits(`${k}-flaky`),
      },
      { child: 2, each: 2 * ITEMS, gate: 2, flaky: 2 },
    );
    for (const name of ["parent", "wide", "gate", "retry", "delayed"]) {
      assert.equal(target.hits(`${k}-${name}-done`), 1, `${name}: its last node ran once`);
    }

    // The delayed run started at its start_at, not before, and late only by the time the server was down past it.
    const delayedEntries = await journalOf(api, delayedRun);
    assert.equal(delayedEntries[0]?.body.start_at, new Date(startAt).toISOString());
    const running = delayedEntries.find((entry) => entry.kind === "run.status" && entry.body.to === "running");
    const startedAt = Date.parse(String(running?.at));
    assert.ok(startedAt >= startAt, `started ${startAt - startedAt}ms before its start_at`);
    assert.ok(
      startedAt <= Math.max(startAt, restarted) + START_SLACK_MS,
      `started ${startedAt - Math.max(startAt, restarted)}ms after it could have`,
    );
    console.log(
      `restart: the delayed run (delay_ms ${delayMs}) started ${startedAt - startAt}ms after its start_at; the restarted wrangler answered ${startAt - restarted}ms before it`,
    );

    const jwks = (await api("GET", "/v1/journal-keys")).json;
    for (const runId of [...Object.values(runs), delayedRun, ...childRunIds]) {
      const report = await verifyJournal(await journalOf(api, runId), jwks, { requireAttestation: true });
      assert.equal(report.ok, true, `${runId}: ${JSON.stringify(report)}`);
    }
  } finally {
    await dev?.stop();
    await target.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test("a sleep survives a killed and restarted wrangler dev: it wakes once, not before its time and soon after it, and its journal verifies", async () => {
  const target = await startHttpTarget({ port: 0 });
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-sleep-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey(), HTTP_TARGET_URL: target.url };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const k = uid("sl");
    const id = uid("rs-sleep");
    // Due well after the restart should be done (twice the first start-up, plus 2 s): the kill and
    // the restart fall inside the sleep, and only the run's stored alarm can wake it.
    const sleepMs = 2 * dev.startupMs + 2_000;
    const registered = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id,
          nodes: {
            nap: {
              task: {
                steps: [
                  { ref: "nap", action: { kind: "sleep", implementation: { duration_ms: sleepMs } } },
                  httpStep("mark", `${target.url}/mark/${k}-woke`),
                ],
              },
            },
          },
        },
      ],
    });
    assert.equal(registered.status, 201, registered.text);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    assert.equal(started.status, 201, started.text);
    const runId = /** @type {string} */ (started.json.run_id);
    const timer = await until("the run to wait on its timer", async () => {
      const run = (await api("GET", `/v1/runs/${runId}`)).json;
      return run?.status === "waiting"
        ? run.waiting_for.find((/** @type {{ kind: string }} */ wait) => wait.kind === "timer")
        : undefined;
    });
    assert.deepEqual(
      { ...timer, until: undefined },
      { kind: "timer", until: undefined, node: "nap", item: null, step: "nap" },
    );
    const due = Date.parse(timer.until);

    await dev.kill();
    assert.ok(Date.now() < due, "the kill landed during the sleep");
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);
    const restarted = Date.now();

    // Nothing reads the run now: the step after the sleep marks the peer when it gets there.
    await until("the step after the sleep", async () => target.hits(`${k}-woke`) >= 1);
    const run = await until("the run to end", async () => {
      const read = await api("GET", `/v1/runs/${runId}`);
      return TERMINAL.has(read.json?.status) ? read.json : undefined;
    });
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    assert.deepEqual(run.waiting_for, []);
    assert.equal(target.hits(`${k}-woke`), 1, "the step after the sleep ran once");

    const entries = await journalOf(api, runId);
    const count = (/** @type {string} */ kind) =>
      entries.filter((entry) => entry.kind === kind && entry.body.node === "nap").length;
    assert.deepEqual(
      { started: count("timer.started"), fired: count("timer.fired"), completed: count("task.completed") },
      { started: 1, fired: 1, completed: 1 },
    );
    assert.equal(count("timer.cancelled"), 0);
    const fired = entries.find((entry) => entry.kind === "timer.fired");
    const firedAt = Date.parse(String(fired?.at));
    assert.ok(firedAt >= due, `woke ${due - firedAt}ms before its time`);
    assert.ok(
      firedAt <= Math.max(due, restarted) + START_SLACK_MS,
      `woke ${firedAt - Math.max(due, restarted)}ms after it could have`,
    );
    console.log(
      `restart: the sleep (duration_ms ${sleepMs}) woke ${firedAt - due}ms after its time; the restarted wrangler answered ${due - restarted}ms before it`,
    );

    const jwks = (await api("GET", "/v1/journal-keys")).json;
    const report = await verifyJournal(entries, jwks, { requireAttestation: true });
    assert.equal(report.ok, true, JSON.stringify(report));
  } finally {
    await dev?.stop();
    await target.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test("an event wait survives a killed and restarted wrangler dev: the event sent after the restart resumes it once, and its journal verifies", async () => {
  const target = await startHttpTarget({ port: 0 });
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-event-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey(), HTTP_TARGET_URL: target.url };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const k = uid("ev");
    const id = uid("rs-event");
    const name = uid("order.paid");
    const steps = [
      { ref: "paid", action: { kind: "event", implementation: { name } } },
      httpStep("mark", `${target.url}/mark/${k}-paid`),
    ];
    const registered = await api("POST", "/v1/definitions", {
      workflows: [{ id, nodes: { pay: { task: { steps } } } }],
    });
    assert.equal(registered.status, 201, registered.text);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} });
    assert.equal(started.status, 201, started.text);
    const runId = /** @type {string} */ (started.json.run_id);
    await until("the run to wait for the event", async () => {
      const run = (await api("GET", `/v1/runs/${runId}`)).json;
      return (
        run?.status === "waiting" && run.waiting_for.some((/** @type {{ kind: string }} */ w) => w.kind === "event")
      );
    });
    // The wait is shown as soon as it opens; its registration at the hub (one call) follows it.
    await new Promise((resolve) => setTimeout(resolve, 1_000));

    await dev.kill();
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);
    const sent = await api("POST", "/v1/events", { name, data: { amount: 7 }, id: "paid-1" });
    assert.equal(sent.status, 202, sent.text);

    // Nothing reads the run now: the step after the wait marks the peer when it gets there.
    await until("the step after the event", async () => target.hits(`${k}-paid`) >= 1);
    const run = await until("the run to end", async () => {
      const read = await api("GET", `/v1/runs/${runId}`);
      return TERMINAL.has(read.json?.status) ? read.json : undefined;
    });
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    assert.equal(target.hits(`${k}-paid`), 1, "the step after the event ran once");
    const entries = await journalOf(api, runId);
    const matched = entries.filter((entry) => entry.kind === "event.matched");
    assert.deepEqual(
      matched.map((entry) => ({ event_id: entry.body.event_id, source: entry.body.source })),
      [{ event_id: "paid-1", source: "event" }],
    );
    assert.equal(entries.filter((entry) => entry.kind === "event.waiting").length, 1, "one wait");
    assertEachCompletedOnce(entries, "event");
    const report = await verifyJournal(entries, (await api("GET", "/v1/journal-keys")).json, {
      requireAttestation: true,
    });
    assert.equal(report.ok, true, JSON.stringify(report));
  } finally {
    await dev?.stop();
    await target.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

test(`an event accepted right before a kill still reaches all ${EVENT_RUNS} runs waiting for it after the restart: each takes it once, and its journal verifies`, async () => {
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-events-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey() };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const id = uid("rs-events");
    const name = uid("batch.ready");
    const steps = [{ ref: "ready", action: { kind: "event", implementation: { name } } }];
    const registered = await api("POST", "/v1/definitions", {
      workflows: [{ id, nodes: { wait: { task: { steps } } } }],
    });
    assert.equal(registered.status, 201, registered.text);
    const runIds = await startMany(api, id, EVENT_RUNS);
    // The run index lists a run as waiting once its wait is open; each registration follows it.
    await until(`${EVENT_RUNS} runs waiting`, async () => (await listed(api, id, "waiting")) === EVENT_RUNS);
    await new Promise((resolve) => setTimeout(resolve, 2_000));

    const postedAt = Date.now();
    const sent = await api("POST", "/v1/events", { name, id: "ready-1" });
    assert.equal(sent.status, 202, sent.text);
    const answeredMs = Date.now() - postedAt;
    await dev.kill();
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);
    const restarted = Date.now();

    // Nothing reads a run now: the run index (written by each run) says when all have completed.
    await until("every run to complete", async () => (await listed(api, id, "completed")) === EVENT_RUNS);
    const jwks = (await api("GET", "/v1/journal-keys")).json;
    let afterRestart = 0;
    for (const runId of runIds) {
      const entries = await journalOf(api, runId);
      const matched = entries.filter((entry) => entry.kind === "event.matched");
      assert.deepEqual(
        matched.map((entry) => entry.body.event_id),
        ["ready-1"],
        `${runId} took the event once`,
      );
      afterRestart += Date.parse(matched[0]?.at ?? "") >= restarted ? 1 : 0;
      const report = await verifyJournal(entries, jwks, { requireAttestation: true });
      assert.equal(report.ok, true, `${runId}: ${JSON.stringify(report)}`);
    }
    // A measurement, not a threshold: how many deliveries the kill cut off, resent by the hub after the restart.
    console.log(
      `restart: ${afterRestart} of ${EVENT_RUNS} runs took the event after the restart (the 202 came ${answeredMs}ms after the POST; the kill right after it)`,
    );
  } finally {
    await dev?.stop();
    rmSync(stateDir, { recursive: true, force: true });
  }
});

/**
 * Starts `count` runs of `workflow`, eight at a time; gives their ids.
 * @param {ReturnType<typeof client>} api @param {string} workflow @param {number} count
 */
async function startMany(api, workflow, count) {
  /** @type {string[]} */
  const ids = [];
  while (ids.length < count) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(8, count - ids.length) }, async () => {
        const started = await api("POST", `/v1/workflows/${workflow}/runs`, { input: {} });
        assert.equal(started.status, 201, started.text);
        return /** @type {string} */ (started.json.run_id);
      }),
    );
    ids.push(...batch);
  }
  return ids;
}

/**
 * How many runs of `workflow` the run index lists with `status`, every page followed.
 * @param {ReturnType<typeof client>} api @param {string} workflow @param {string} status
 */
async function listed(api, workflow, status) {
  let count = 0;
  let cursor = "";
  do {
    const page = await api("GET", `/v1/runs?workflow=${workflow}&status=${status}&limit=100${cursor}`);
    assert.equal(page.status, 200, page.text);
    count += page.json.runs.length;
    cursor = page.json.next_cursor ? `&cursor=${encodeURIComponent(page.json.next_cursor)}` : "";
  } while (cursor !== "");
  return count;
}

/**
 * One `task.completed` per node and foreach item, and one `node.completed` per node.
 * @param {{ kind: string, body: Record<string, unknown> }[]} entries
 * @param {string} name
 */
function assertEachCompletedOnce(entries, name) {
  const completions = entries
    .filter((entry) => entry.kind === "task.completed")
    .map((entry) => `${entry.body.node}[${entry.body.item}]`);
  assert.equal(
    new Set(completions).size,
    completions.length,
    `${name}: a task completed twice: ${completions.join(", ")}`,
  );
  const nodes = entries.filter((entry) => entry.kind === "node.completed").map((entry) => String(entry.body.node));
  assert.equal(new Set(nodes).size, nodes.length, `${name}: a node completed twice`);
}
