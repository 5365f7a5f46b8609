// Every example in examples/ runs against real workerd and the peers `npm run
// dev` starts, driven by the very commands its header documents (`npx trellis
// define …`, `npx trellis run … --follow`, `npx trellis answer …` when it waits
// for a person or an approval, an agent's tool call's included, `npx trellis
// events send …` once it waits for an event, `npx trellis plan …` for an agent
// plan, `npx trellis schedule <id> trigger --follow` for a schedule, `npx trellis
// show <run>`), through the CLI. A run completes unless its
// command's comment says it fails (the saga), and then its compensation must
// complete; every tool call of an agent succeeds. So an example cannot
// rot: a change that breaks one, or its instructions, fails this suite.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { api, trellis } from "./helpers.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLES = readdirSync(join(root, "examples"))
  .filter((name) => name.endsWith(".yaml"))
  .sort();

/**
 * The `npx trellis …` commands of an example's header comment, as argument
 * lists, each with the comment after it (`# fails at ship` says the run is
 * meant to fail).
 */
function documentedCommands(/** @type {string} */ text) {
  return text
    .split("\n")
    .filter((line) => /^#\s+npx trellis /.test(line))
    .map((line) => {
      const [command = "", note = ""] = line.replace(/^#\s+npx trellis /, "").split(/\s+#\s*/, 2);
      return Object.assign(shellWords(command), { note });
    });
}

/** Splits a command line into words: spaces separate, '…' and "…" quote. Enough for the headers. */
function shellWords(/** @type {string} */ line) {
  /** @type {string[]} */
  const words = [];
  const pattern = /'([^']*)'|"([^"]*)"|(\S+)/g;
  for (const match of line.matchAll(pattern)) {
    words.push(match[1] ?? match[2] ?? match[3] ?? "");
  }
  return words;
}

/** Polls until a gate of the run is open, and returns its id. */
async function openGate(/** @type {() => string} */ runId) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (runId() !== "") {
      const { stdout } = await trellis(["gates", runId(), "--json"]);
      const gate = JSON.parse(stdout).gates.find(
        (/** @type {{ status: string }} */ candidate) => candidate.status === "open",
      );
      if (gate) {
        return gate.gate_id;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("no gate opened within 30 s");
}

/** Polls until the run waits for an event (its view's `waiting_for` has one). */
async function waitingForEvent(/** @type {() => string} */ runId) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    if (runId() !== "") {
      const view = JSON.parse((await trellis(["show", runId(), "--json"])).stdout);
      if (view.waiting_for.some((/** @type {{ kind: string }} */ wait) => wait.kind === "event")) {
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error("the run did not wait for an event within 30 s");
}

const RUN_ID = /^(run_[0-9a-f]{32})\s+started$/m;

/** A command that starts a run and follows it: `run …`, or a schedule's `schedule <id> trigger --follow`. */
const startsRun = (/** @type {string[]} */ words) =>
  words[0] === "run" || (words[0] === "schedule" && words[2] === "trigger");

/** Polls the run until its compensation (if it has one) is over, and returns the view. */
async function settledCompensation(/** @type {string} */ runId) {
  const deadline = Date.now() + 30_000;
  while (Date.now() < deadline) {
    const view = JSON.parse((await trellis(["show", runId, "--json"])).stdout);
    if (!["none", "running"].includes(view.compensation?.status ?? "completed")) {
      return view;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`the compensation of ${runId} did not end within 30 s`);
}

/** A workflow example: its run command (answering its gates), then its `show <run>` commands. */
async function runWorkflowExample(
  /** @type {string} */ name,
  /** @type {ReturnType<typeof documentedCommands>} */ commands,
) {
  const run = commands.find(startsRun);
  assert.ok(run, `${name} documents a run or a plan command`);
  const fails = /\bfails\b/.test(run.note);
  let runId = "";
  const finished = trellis(run, (line) => {
    runId ||= RUN_ID.exec(line)?.[1] ?? "";
  });
  for (const answer of commands.filter((words) => words[0] === "answer")) {
    const gate = await openGate(() => runId);
    const answered = await trellis(answer.map((word) => (word === "<run>" ? runId : word === "gate_1" ? gate : word)));
    assert.equal(answered.code, 0, answered.stderr);
  }
  const sends = commands.filter((words) => words[0] === "events" || words[0] === "signal");
  for (const send of sends) {
    await waitingForEvent(() => runId);
    const sent = await trellis(send.map((word) => (word === "<run>" ? runId : word)));
    assert.equal(sent.code, 0, sent.stderr);
    assert.match(sent.stdout, /\saccepted$/m);
  }
  const result = await finished;
  assert.equal(result.code, fails ? 1 : 0, `${result.stdout}\n${result.stderr}`);
  assert.match(result.stdout, fails ? /attest\s+failed/ : /attest\s+completed/);
  if (fails) {
    // A run meant to fail shows, once it ended, how it undid what it did.
    const view = await settledCompensation(runId);
    assert.equal(view.compensation?.status ?? "none", "completed", JSON.stringify(view.compensation));
  }
  // Each event or signal the header sends was taken by a wait of the run (not timed out instead).
  const entries = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
  assert.equal(
    entries.filter((/** @type {{ kind: string }} */ entry) => entry.kind === "event.matched").length,
    sends.length,
  );
  // Every tool call an agent made succeeded: a high-risk one ran once its approval was answered.
  assert.deepEqual(
    entries
      .filter((/** @type {{ kind: string }} */ entry) => entry.kind === "tool_call.failed")
      .map((/** @type {{ body: { name: string, error: unknown } }} */ entry) => [entry.body.name, entry.body.error]),
    [],
  );
  for (const show of commands.filter((words) => words[0] === "show")) {
    const shown = await trellis(show.map((word) => (word === "<run>" ? runId : word)));
    assert.equal(shown.code, 0, shown.stderr);
    assert.match(shown.stdout, fails ? /compensation: completed[\s\S]*undo of/ : new RegExp(runId));
  }
  const verified = await trellis(["verify", runId]);
  assert.match(verified.stdout, fails ? /^OK: / : /^OK: .* attested completed/);
}

/** A plan example: each `plan` command; a run prints its results, and its journal verifies. */
async function runPlanExample(/** @type {ReturnType<typeof documentedCommands>} */ plans) {
  for (const plan of plans) {
    const result = await trellis(plan);
    assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
    if (plan.includes("preview")) {
      assert.match(result.stdout, /^preview: \w+ plan, \d+ step\(s\) in \d+ layer\(s\)/);
      continue;
    }
    const runId = RUN_ID.exec(result.stdout)?.[1] ?? "";
    assert.match(result.stdout, /completed[\s\S]*results:\n {2}ok /);
    // Every step succeeded; a fallback that had nothing to answer is listed as skipped.
    assert.doesNotMatch(result.stdout, /^ {2}failed /m);
    const verified = await trellis(["verify", runId]);
    assert.match(verified.stdout, /^OK: .* attested completed/);
  }
}

describe("examples/", () => {
  test("has the six examples the docs promise, each with its commands", () => {
    assert.ok(EXAMPLES.length >= 6, EXAMPLES.join(", "));
  });

  for (const name of EXAMPLES) {
    test(`${name} runs as its header says`, async () => {
      const commands = documentedCommands(readFileSync(join(root, "examples", name), "utf8"));
      const define = commands.find((words) => words[0] === "define");
      assert.ok(define, `${name} documents a define command`);
      const defined = await trellis(define);
      assert.equal(defined.code, 0, defined.stderr);
      const plans = commands.filter((words) => words[0] === "plan");
      if (plans.length > 0) {
        await runPlanExample(plans);
      } else if (commands.some(startsRun)) {
        await runWorkflowExample(name, commands);
        for (const list of commands.filter((words) => words[0] === "schedules")) {
          const listed = await trellis(list);
          assert.equal(listed.code, 0, listed.stderr);
          assert.match(listed.stdout, /\sactive\s+next \d{4}-/);
        }
      } else {
        // A bundle that other examples use (plan-tools.yaml): one of their headers defines it.
        const users = EXAMPLES.filter(
          (other) => other !== name && readFileSync(join(root, "examples", other), "utf8").includes(`examples/${name}`),
        );
        assert.ok(users.length > 0, `${name} has no run or plan command, and no other example uses it`);
      }
    });
  }
});
