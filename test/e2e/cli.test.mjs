// The `trellis` CLI against real workerd: define bundles from files, run with
// --follow, answer a gate, tail, show and verify — every step through the CLI
// as a user types it (TRELLIS_URL and TRELLIS_TOKEN come from the suite).
import assert from "node:assert/strict";
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, mkdirSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, describe, test } from "node:test";
import { api, CLI, cliEnv, trellis, uid } from "./helpers.mjs";

const dir = mkdtempSync(join(tmpdir(), "trellis-cli-"));
after(() => rmSync(dir, { recursive: true, force: true }));

const task = (id) => `# A task in a file of its own: the workflow in another file names it.
tasks:
  - id: ${id}
    steps:
      - ref: check
        action: { kind: context, implementation: { updates: [{ path: checked, expr: "input.n > 0" }] } }
      - ref: ask
        action:
          kind: human
          implementation:
            prompt_template: "Go on with {{n}}?"
            input_schema: { type: object, required: [ok], properties: { ok: { type: boolean } } }
        input_mapping: { n: "$.input.n" }
        output_mapping: { "output.answer": "$.response.ok" }
`;
const workflow = (id, taskId) => `workflows:
  - id: ${id}
    input_schema: { type: object, required: [n], properties: { n: { type: integer } } }
    nodes:
      main: { task: ${taskId} }
`;

describe("the trellis CLI", () => {
  test("defines files from a folder as one bundle, runs with --follow, answers the gate, tails, shows and verifies", async () => {
    const ids = { task: uid("cli-task"), workflow: uid("cli-flow") };
    const folder = join(dir, ids.workflow);
    mkdirSync(join(folder, "tasks"), { recursive: true });
    writeFileSync(join(folder, "tasks", "ask.yaml"), task(ids.task));
    writeFileSync(join(folder, "flow.yml"), workflow(ids.workflow, ids.task));

    const defined = await trellis(["define", folder]);
    assert.equal(defined.code, 0, defined.stderr);
    assert.match(defined.stdout, new RegExp(`created\\s+workflows\\s+${ids.workflow}@1`));
    assert.match(defined.stdout, new RegExp(`created\\s+tasks\\s+${ids.task}@1`));
    assert.match((await trellis(["define", folder])).stdout, new RegExp(`reused\\s+workflows\\s+${ids.workflow}@1`));

    // --follow without a TTY prints one line per journal entry until the run ends.
    let runId = "";
    const followed = trellis(["run", ids.workflow, "--input", '{"n": 41}', "--follow"], (line) => {
      runId ||= /^(run_[0-9a-f]{32})\s+started$/.exec(line)?.[1] ?? "";
    });
    const gate = await waitFor(async () => {
      if (runId === "") {
        return undefined;
      }
      const gates = await trellis(["gates", runId, "--json"]);
      return JSON.parse(gates.stdout).gates.find((candidate) => candidate.status === "open");
    });
    assert.equal(gate.prompt, "Go on with 41?");
    const answered = await trellis(["answer", runId, gate.gate_id, "--json", '{"ok": true}']);
    assert.equal(answered.code, 0, answered.stderr);
    const run = await followed;
    assert.equal(run.code, 0, run.stderr);
    assert.match(run.stdout, /gate\.opened/);
    assert.match(run.stdout, /attest\s+completed/);

    const tail = await trellis(["tail", runId]);
    assert.equal(tail.code, 0);
    assert.match(tail.stdout.trim().split("\n").at(-1) ?? "", /attest\s+completed$/);
    const shown = await trellis(["show", runId, "--json"]);
    assert.equal(JSON.parse(shown.stdout).status, "completed");
    const verified = await trellis(["verify", runId]);
    assert.equal(verified.code, 0, verified.stdout);
    assert.match(verified.stdout, /^OK: /);
    // The run index catches up moments after the run ends (docs/architecture.md, "The run index").
    const listed = await waitFor(async () => {
      const runs = JSON.parse((await trellis(["runs", "--workflow", ids.workflow, "--json"])).stdout).runs;
      return runs[0]?.status === "completed" ? runs : undefined;
    });
    assert.deepEqual(
      listed.map((run) => run.run_id),
      [runId],
    );
    assert.match(
      (await trellis(["runs", "--workflow", ids.workflow])).stdout,
      new RegExp(`^${runId}\\s+${ids.workflow}@1\\s+completed`),
    );
  });

  test("--follow on a terminal redraws one progress line: spinner, status, nodes done/total, foreach items", async () => {
    const id = uid("cli-tty");
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    await api("POST", "/v1/definitions", {
      body: {
        workflows: [
          {
            id,
            nodes: {
              fan: { foreach: { items: "$.input.items" }, task: { steps: [step] } },
              after: { depends_on: ["fan"], task: { steps: [step] } },
            },
          },
        ],
      },
    });
    // `script` gives the CLI a pseudo-terminal, as a person's shell would.
    const command = [CLI, "run", id, "--input", JSON.stringify({ items: [1, 2, 3] }), "--follow"]
      .map((word) => `'${word.replaceAll("'", "'\\''")}'`)
      .join(" ");
    const ttyEnv = await cliEnv();
    const tty = await new Promise((resolve, reject) => {
      const child = spawn("script", ["-qec", `${JSON.stringify(process.execPath)} ${command}`, "/dev/null"], {
        env: ttyEnv,
        stdio: ["ignore", "pipe", "pipe"],
      });
      let out = "";
      child.stdout.on("data", (chunk) => (out += chunk));
      child.on("error", reject);
      child.on("close", (code) => resolve({ code, out }));
    });
    assert.equal(tty.code, 0, tty.out);
    assert.ok(tty.out.includes("\r\u001b[2K"), "redraws the line in place");
    assert.match(tty.out, /completed\s+2\/2 nodes {2}fan 3\/3/);
    assert.doesNotMatch(tty.out, /task\.dispatched/, "no per-entry lines on a terminal");
  });

  test("previews a run's plan, then shows the fan-out it ran by its items, in dependency order, through a URL ending in /v1", async () => {
    const id = uid("cli-preview");
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    await api("POST", "/v1/definitions", {
      body: {
        workflows: [
          {
            id,
            nodes: {
              after: { depends_on: ["fan"], task: { steps: [step] } },
              fan: { foreach: { items: "$.input.items" }, task: { steps: [step] } },
            },
          },
        ],
      },
    });
    const input = JSON.stringify({ items: [1, 2, 3] });
    const url = `${(await cliEnv()).TRELLIS_URL}/v1`;
    const preview = await trellis(["run", id, "--input", input, "--mode", "preview", "--url", url]);
    assert.equal(preview.code, 0, preview.stderr);
    assert.match(preview.stdout, new RegExp(`^preview: ${id}@1, 2 node\\(s\\) in 2 layer\\(s\\); nothing ran\n`));
    assert.match(
      preview.stdout,
      /^ {2}layer 1: fan\n {2}layer 2: after\n {2}fan {2}task \S+@0 {2}once per item of \$\.input\.items\n {6}s {2}context {2}\S+@0 {2}risk low\n {2}after {2}task \S+@0 {2}after fan\n/m,
    );
    assert.match(preview.stdout, /^high-risk, each waits for an approval: none$/m);
    const run = await trellis(["run", id, "--input", input, "--wait", "--url", url]);
    assert.equal(run.code, 0, run.stderr);
    // `after` sorts first by name; the run lists `fan`, which it depends on, first.
    assert.match(
      run.stdout,
      /^ {2}completed {2}fan {2}3 items: 3 completed {2}attempts 1 per item\n {6}s {2}completed 3 {2}calls 1 per item\n {2}completed {2}after {2}attempts 1$/m,
    );
  });

  test("verifies saved files and names the entry a changed byte breaks", async () => {
    const id = uid("cli-saved");
    await api("POST", "/v1/definitions", {
      body: {
        workflows: [
          {
            id,
            nodes: {
              a: {
                task: {
                  steps: [
                    { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } },
                  ],
                },
              },
            },
          },
        ],
      },
    });
    const started = await trellis(["run", id, "--wait", "--json"]);
    assert.equal(started.code, 0, started.stderr);
    const runId = JSON.parse(started.stdout).run_id;
    const journal = (await api("GET", `/v1/runs/${runId}/journal`)).json;
    const keys = (await api("GET", "/v1/journal-keys")).json;
    writeFileSync(join(dir, "journal.json"), JSON.stringify(journal));
    writeFileSync(join(dir, "keys.json"), JSON.stringify(keys));
    assert.equal((await trellis(["verify", join(dir, "journal.json"), join(dir, "keys.json")])).code, 0);
    journal.entries[1].body.mode = journal.entries[1].body.mode === "auto" ? "auto " : "auto";
    writeFileSync(join(dir, "journal.json"), JSON.stringify(journal));
    const tampered = await trellis(["verify", join(dir, "journal.json")]);
    assert.equal(tampered.code, 1);
    assert.match(tampered.stdout, new RegExp(`^FAIL: .*seq ${journal.entries[1].seq}`));
  });

  test("lists limits with their status, prints one key's status, starts a run with --priority and shows it queued for its workflow's limit", async () => {
    const ids = { limit: uid("cli-limit"), workflow: uid("cli-limited") };
    const folder = join(dir, ids.workflow);
    mkdirSync(folder);
    writeFileSync(
      join(folder, "limited.yaml"),
      `limits:
  - { id: ${ids.limit}, concurrency: 1, rate: { limit: 10, period_ms: 60000 } }
workflows:
  - id: ${ids.workflow}
    limits: [{ limit: ${ids.limit}, key: input.tenant }]
    nodes:
      rest: { task: { steps: [{ ref: nap, action: { kind: sleep, implementation: { duration_ms: 60000 } } }] } }
`,
    );
    assert.equal((await trellis(["define", folder])).code, 0);
    const input = ["--input", '{"tenant": "acme"}'];
    const first = /^(run_[0-9a-f]{32})\s/.exec((await trellis(["run", ids.workflow, ...input])).stdout)?.[1];
    const started = await trellis(["run", ids.workflow, ...input, "--priority", "8"]);
    assert.equal(started.code, 0, started.stderr);
    const second = /^(run_[0-9a-f]{32})\s+queued$/m.exec(started.stdout)?.[1];
    assert.ok(first && second, `${first} ${started.stdout}`);

    const status = await waitFor(async () => {
      const answer = await trellis(["limits", "status", ids.limit, "--key", "acme"]);
      return /in use {3}1\/1\n {2}waiting {2}1\n/.test(answer.stdout) ? answer.stdout : undefined;
    });
    assert.match(status, new RegExp(`^${ids.limit}@1 {2}key "acme" {2}concurrency 1 · rate 10 per 1m\n`));
    assert.match(status, /\n {2}rate 1\/10 per 1m {2}resets \d{4}-\d\d-\d\dT/);
    const listed = await trellis(["limits"]);
    assert.equal(listed.code, 0, listed.stderr);
    assert.match(listed.stdout, /^id +budgets +in use +waiting +window used +resets at\n/);
    // The key "" is another budget: nothing holds or waits there.
    assert.match(
      listed.stdout,
      new RegExp(`\n${ids.limit}@1 +concurrency 1 · rate 10 per 1m +0/1 +0 +rate 0/10 per 1m +- *(\n|$)`),
    );
    const shown = await trellis(["show", second]);
    assert.match(shown.stdout, /\npriority 8\n/);
    assert.match(shown.stdout, new RegExp(`\n {2}limit ${ids.limit} key "acme" waiting since `));
    const bad = await trellis(["run", ids.workflow, "--priority", "10"]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^error: cli\.invalid_priority: /);
    for (const runId of [second, first]) {
      assert.equal((await trellis(["cancel", runId])).code, 0);
    }
  });

  test("prints the API's code, message and each problem's path in terms of its file, and exits 1", async () => {
    const folder = join(dir, uid("cli-bad"));
    mkdirSync(folder);
    writeFileSync(join(folder, "a.yaml"), "workflows:\n  - id: ok-one\n    nodes: { a: { task: { steps: [] } } }\n");
    writeFileSync(join(folder, "b.yaml"), "workflows:\n  - id: bad-one\n    nodez: {}\n");
    const bad = await trellis(["define", folder]);
    assert.equal(bad.code, 1);
    assert.match(bad.stderr, /^error: definition\.invalid: /);
    assert.match(bad.stderr, /b\.yaml: workflows\.0/);
    const missing = await trellis(["cancel", "run_0123456789abcdef0123456789abcdef"]);
    assert.equal(missing.code, 1);
    assert.match(missing.stderr, /^error: run\.not_found: /);
  });
});

/** Polls `probe` until it returns something, for up to 30 s. */
async function waitFor(probe) {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const value = await probe();
    if (value !== undefined) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error("timed out");
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
