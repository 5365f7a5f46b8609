// An agent's tool calls survive a killed `wrangler dev`, against real workerd:
// the model's first turn asks for two http tools at once, a fast one (`/mark`)
// and a slow one (`/slow`); the whole `wrangler dev` is killed (SIGKILL to its
// process group) once the fast call's `tool_call.completed` is in the journal
// while the slow one is still at the HTTP target, then restarted on the same
// state directory. Afterwards the run completes by itself with both results;
// the test checks that the completed call was never made again (the HTTP
// target counts each call under its key), that the model was asked for the
// first turn once (the LLM server lists the requests of its script), that the
// lost call was dispatched again (a second `tool_call.dispatched`, its work
// done twice since it never completed), and that the journal verifies offline.
//
// It starts its own HTTP target, LLM server and `wrangler dev` (it kills it),
// whatever scripts/e2e.mjs started for the other files.
import assert from "node:assert/strict";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { test } from "node:test";
import { verifyJournal } from "../../lib/journal/index.ts";
import { startHttpTarget } from "../../scripts/lib/http-target.mjs";
import { startLlmServer } from "../../scripts/lib/llm-server.mjs";
import { startWranglerDev } from "../../scripts/lib/wrangler-dev.mjs";
import { freshSigningKey, TERMINAL, uid } from "./helpers.mjs";
import { client, journalOf, until } from "./restart-kit.mjs";

/** How long the slow tool call takes: long enough that the kill lands while it runs. */
const SLOW_MS = 4_000;

/** An inline http tool the agent may call. @param {string} name @param {string} url */
const httpTool = (name, url) => ({
  name,
  action: { kind: "http", description: `GET ${name}`, implementation: { method: "GET", url_template: url } },
});

test("a wrangler dev killed while an agent's tool calls run: the completed call is not made again, the lost one is dispatched again, the model's turn is not asked again, and the journal verifies", async () => {
  const target = await startHttpTarget({ port: 0 });
  const llm = await startLlmServer({ port: 0 });
  const stateDir = mkdtempSync(join(tmpdir(), "trellis-restart-agent-"));
  const token = `restart-${uid("t")}`;
  const vars = { API_TOKENS: token, JOURNAL_SIGNING_KEY: freshSigningKey() };
  /** @type {Awaited<ReturnType<typeof startWranglerDev>> | undefined} */
  let dev;
  try {
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    let api = client(dev.url, token);
    const k = uid("ag");
    const script = uid("agent-script");
    const ids = { workflow: uid("rs-agent"), model: uid("rs-model") };
    const posted = await fetch(`${llm.url}/scripts/${script}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        turns: [
          {
            tool_calls: [
              { name: "mark", input: {} },
              { name: "slow", input: {} },
            ],
          },
          { text: "Both tools answered." },
        ],
      }),
    });
    assert.equal(posted.status, 200, await posted.text());
    const agent = {
      ref: "agent",
      action: {
        kind: "llm",
        implementation: {
          prompt: { messages: [{ role: "user", template: `Call both tools [[script:${script}]]` }] },
          model: ids.model,
          tools: [
            httpTool("mark", `${target.url}/mark/${k}-mark`),
            httpTool("slow", `${target.url}/slow/${k}-slow?ms=${SLOW_MS}`),
          ],
        },
      },
      output_mapping: { "output.agent": "$" },
    };
    const registered = await api("POST", "/v1/definitions", {
      models: [{ id: ids.model, provider: "openai-compatible", model_id: "local-echo", base_url: `${llm.url}/v1` }],
      workflows: [
        {
          id: ids.workflow,
          nodes: { triage: { task: { steps: [agent] }, output_mapping: { "output.agent": "$.agent" } } },
        },
      ],
    });
    assert.equal(registered.status, 201, registered.text);
    const started = await api("POST", `/v1/workflows/${ids.workflow}/runs`, { input: {} });
    assert.equal(started.status, 201, started.text);
    const runId = /** @type {string} */ (started.json.run_id);

    // The kill lands once the fast call's completion is journaled, while the slow call is at the target.
    const completedBeforeKill = await until("the fast call's completion", async () => {
      const entries = await journalOf(api, runId);
      const completed = entries.filter((entry) => entry.kind === "tool_call.completed");
      return completed.some((entry) => entry.body.name === "mark") ? completed : undefined;
    });
    assert.equal(target.hits(`${k}-slow`), 1, "the slow call is at the target");
    assert.deepEqual(
      completedBeforeKill.map((entry) => entry.body.name),
      ["mark"],
      "the slow call has not completed",
    );
    await dev.kill();
    dev = await startWranglerDev({ vars, persistTo: stateDir });
    api = client(dev.url, token);

    const run = await until("the run to end", async () => {
      const read = await api("GET", `/v1/runs/${runId}`);
      return TERMINAL.has(read.json?.status) ? read.json : undefined;
    });
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    const output = run.output.agent;
    assert.equal(output.content, "Both tools answered.");
    assert.equal(output.turns, 2);
    assert.deepEqual(
      output.tool_calls.map((/** @type {{ name: string, error?: unknown }} */ call) => [call.name, call.error]),
      [
        ["mark", undefined],
        ["slow", undefined],
      ],
    );
    assert.equal(output.tool_calls[0].output.body.key, `${k}-mark`);
    assert.equal(output.tool_calls[1].output.body.waited, SLOW_MS);

    // The completed call ran once; the lost one was sent again (its work done twice: it never completed).
    assert.equal(target.hits(`${k}-mark`), 1, "the completed call was not made again");
    assert.equal(target.hits(`${k}-slow`), 2, "the lost call was made again");
    const entries = await journalOf(api, runId);
    const calls = (/** @type {string} */ kind, /** @type {string} */ name) =>
      entries.filter((entry) => entry.kind === kind && entry.body.name === name);
    assert.equal(calls("tool_call.requested", "mark").length, 1);
    assert.equal(calls("tool_call.requested", "slow").length, 1);
    assert.deepEqual(
      calls("tool_call.dispatched", "mark").map((entry) => entry.body.attempt),
      [1],
    );
    assert.deepEqual(
      calls("tool_call.dispatched", "slow").map((entry) => entry.body.attempt),
      [1, 2],
    );
    assert.equal(calls("tool_call.completed", "mark").length, 1);
    assert.equal(calls("tool_call.completed", "slow").length, 1);
    assert.equal(entries.filter((entry) => entry.kind === "tool_call.failed").length, 0);

    // The model was asked for each turn once: the first turn (no assistant message yet) before the kill only.
    const seen = await (await fetch(`${llm.url}/requests/${script}`)).json();
    const assistantMessages = seen.requests.map(
      (/** @type {{ messages: { role: string }[] }} */ request) =>
        request.messages.filter((message) => message.role === "assistant").length,
    );
    assert.deepEqual(assistantMessages, [0, 1]);

    const report = await verifyJournal(entries, (await api("GET", "/v1/journal-keys")).json, {
      requireAttestation: true,
    });
    assert.equal(report.ok, true, JSON.stringify(report));
  } finally {
    await dev?.stop();
    await llm.close();
    await target.close();
    rmSync(stateDir, { recursive: true, force: true });
  }
});
