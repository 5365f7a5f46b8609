// Every example in examples/ runs to completion against real workerd and the
// peers `npm run dev` starts, driven by the very commands its header documents
// (`npx trellis define …`, `npx trellis run … --follow`, and `npx trellis answer …`
// when it waits for a person), through the CLI. So an example cannot rot: a
// change that breaks one, or its instructions, fails this suite.
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { describe, test } from "node:test";
import { fileURLToPath } from "node:url";
import { trellis } from "./helpers.mjs";

const root = fileURLToPath(new URL("../..", import.meta.url));
const EXAMPLES = readdirSync(join(root, "examples"))
  .filter((name) => name.endsWith(".yaml"))
  .sort();

/** The `npx trellis …` commands of an example's header comment, as argument lists. */
function documentedCommands(/** @type {string} */ text) {
  return text
    .split("\n")
    .filter((line) => /^#\s+npx trellis /.test(line))
    .map((line) => shellWords(line.replace(/^#\s+npx trellis /, "").replace(/\s+#.*$/, "")));
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

describe("examples/", () => {
  test("has the six examples the docs promise, each with its commands", () => {
    assert.ok(EXAMPLES.length >= 6, EXAMPLES.join(", "));
  });

  for (const name of EXAMPLES) {
    test(`${name} runs to completion as its header says`, async () => {
      const commands = documentedCommands(readFileSync(join(root, "examples", name), "utf8"));
      const define = commands.find((words) => words[0] === "define");
      const run = commands.find((words) => words[0] === "run");
      const answers = commands.filter((words) => words[0] === "answer");
      assert.ok(define && run, `${name} documents a define and a run command`);
      const defined = await trellis(define);
      assert.equal(defined.code, 0, defined.stderr);

      let runId = "";
      const finished = trellis(run, (line) => {
        runId ||= /^(run_[0-9a-f]{32})\s+started$/.exec(line)?.[1] ?? "";
      });
      for (const answer of answers) {
        const gate = await openGate(() => runId);
        const answered = await trellis(
          answer.map((word) => (word === "<run>" ? runId : word === "gate_1" ? gate : word)),
        );
        assert.equal(answered.code, 0, answered.stderr);
      }
      const result = await finished;
      assert.equal(result.code, 0, `${result.stdout}\n${result.stderr}`);
      assert.match(result.stdout, /attest\s+completed/);
      const verified = await trellis(["verify", runId]);
      assert.match(verified.stdout, /^OK: .* attested completed/);
    });
  }
});
