// The web console on what an agent run needs, in headless Chromium against
// `wrangler dev` (as test/e2e/console.test.mjs): approval gates answered with
// Approve and Reject (a reason and a confirmation first), each call of a step
// with its error and the wait before the retry, an llm step's model, prompt,
// answer, tokens and cost, an agent's loop as a conversation (its turns, its
// tool calls opened one by one, the budget used), the run's usage, node
// durations, the compensation, buttons only where the run accepts them, a
// cancel's reason, a plan run's graph, the open gates of every run ("Waiting
// for me"), and a 390 px screen.
// Screenshots go to .test-results/screenshots/ (git-ignored).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { startLlmServer } from "../../scripts/lib/llm-server.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { api, env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
const UI_TIMEOUT_MS = 30_000;

const context = (path, expr, extra = {}) => ({
  kind: "context",
  implementation: { updates: [{ path, expr }] },
  ...extra,
});
const oneStep = (ref, action, extra = {}) => ({ task: { steps: [{ ref, action, ...extra }] } });
const askAction = (prompt) => ({
  kind: "human",
  implementation: {
    prompt_template: prompt,
    input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
  },
});

/** Starts a run of a freshly registered workflow (plus `bundle`); returns its id. */
async function startWorkflow(workflow, bundle = {}) {
  await register({ ...bundle, workflows: [workflow] });
  const started = await startRun(workflow.id, { input: {} });
  assert.equal(started.status, 201, show(started));
  return started.json.run_id;
}

/** Polls the run until `check(run)` holds; returns the run. */
async function until(runId, check, what) {
  const deadline = Date.now() + UI_TIMEOUT_MS;
  for (;;) {
    const run = (await api("GET", `/v1/runs/${runId}`)).json;
    if (check(run)) {
      return run;
    }
    assert.ok(Date.now() < deadline, `run ${runId} never ${what}: ${JSON.stringify(run?.status)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/** Fails unless the page is no wider than its viewport. */
async function assertNoHorizontalOverflow(page, where) {
  const { scrollWidth, innerWidth } = await page.evaluate(() => ({
    scrollWidth: document.documentElement.scrollWidth,
    innerWidth: window.innerWidth,
  }));
  assert.ok(scrollWidth <= innerWidth, `${where}: the page is ${scrollWidth} px wide in a ${innerWidth} px viewport`);
}

describe("web console for agent runs in headless Chromium", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;
  /** @type {{ url: string, token: string, target: string }} */
  let e;
  /** @type {import("../../scripts/lib/llm-server.mjs").LlmServer} */
  let llm;
  /** The run of the llm test, seen again at 390 px. */
  let llmRunId = "";

  before(async () => {
    e = await env();
    llm = await startLlmServer({ port: 0 });
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath: await ensureChromium(), args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    await llm?.close();
  });

  /** A page signed in with the suite's token, at `width` px (default 1360). */
  async function openPage(path, width = 1360) {
    const browserContext = await browser.newContext({ viewport: { width, height: width < 600 ? 844 : 900 } });
    await browserContext.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), e.token);
    const page = await browserContext.newPage();
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    await page.goto(`${e.url}${path}`);
    return { page, problems, close: () => browserContext.close() };
  }

  test("an approval gate is approved with one click, and rejected only after a reason and a confirmation", async () => {
    const risky = (ref) => oneStep(ref, context("v", "1", { risk: "high" }));
    const runId = await startWorkflow({ id: uid("approvals"), nodes: { ship: risky("ship"), wipe: risky("wipe") } });
    const waiting = await until(runId, (run) => run.gates.filter((g) => g.status === "open").length === 2, "opened");
    const gateOf = (node) => waiting.gates.find((gate) => gate.node === node).gate_id;
    const { page, problems, close } = await openPage(`/runs/${runId}`);

    const ship = page.locator(`[data-gate="${gateOf("ship")}"]`);
    const wipe = page.locator(`[data-gate="${gateOf("wipe")}"]`);
    await ship.getByRole("button", { name: "Approve" }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await page.locator(".controls").getByRole("button").allInnerTexts(), ["cancel", "pause"]);
    await ship.getByLabel("Responder").fill("ada");
    await ship.getByRole("button", { name: "Approve" }).click();
    // Who answered is the signed-in token, not what the form's note says.
    await ship.getByText(/Answered by token API_TOKENS \(env:[0-9a-f]{16}\) at .* · Note: ada/).waitFor({
      timeout: UI_TIMEOUT_MS,
    });

    // One click on Reject answers nothing: it asks for a reason first.
    await wipe.getByRole("button", { name: "Reject" }).click();
    const reason = wipe.getByLabel("Reason for rejecting");
    await reason.waitFor();
    const stillOpen = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates.find((g) => g.node === "wipe");
    assert.equal(stillOpen.status, "open");
    assert.equal(await wipe.getByRole("button", { name: "Confirm rejection" }).isDisabled(), true);
    await reason.fill("not on a Friday");
    await page.screenshot({ path: join(SCREENSHOTS, "approval-reject.png"), fullPage: true });
    await wipe.getByRole("button", { name: "Confirm rejection" }).click();

    const failed = await waitForRun(runId);
    assert.equal(failed.status, "failed");
    assert.equal(failed.error.code, "approval.rejected");
    const answers = Object.fromEntries(failed.gates.map((gate) => [gate.node, gate.response]));
    assert.deepEqual(answers, { ship: { approved: true }, wipe: { approved: false, reason: "not on a Friday" } });
    // A failed run with nothing to undo accepts a redrive only: that is the one button left.
    await page.locator(".controls .control-redrive").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await page.locator(".controls").getByRole("button").allInnerTexts(), ["redrive"]);
    assert.deepEqual(problems, []);
    await close();
  });

  test("a run page shows each call with its error and wait, an llm step's model, prompt, answer, tokens and cost, usage and durations", async () => {
    const key = uid("flaky");
    const http = {
      kind: "http",
      implementation: { method: "GET", url_template: `${e.target}/flaky/${key}?fail=2` },
      execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 50, jitter: false } },
    };
    const ask = {
      kind: "llm",
      implementation: {
        prompt: {
          messages: [
            { role: "system", template: "You name things." },
            { role: "user", template: "Name {{thing}}" },
          ],
          produces: { type: "object", required: ["name"], properties: { name: { type: "string" } } },
        },
        model: {
          provider: "openai-compatible",
          model_id: "local",
          base_url: `${llm.url}/v1`,
          pricing: { input_per_mtok: 1, output_per_mtok: 2 },
        },
      },
    };
    const runId = await startWorkflow({
      id: uid("agent"),
      nodes: {
        fetch: oneStep("get", http),
        name: { ...oneStep("ask", ask, { input_mapping: { thing: "the sea" } }), depends_on: ["fetch"] },
      },
    });
    llmRunId = runId;
    const run = await waitForRun(runId);
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    const { page, problems, close } = await openPage(`/runs/${runId}`);
    await page.locator('.verify[data-state="verified"]').waitFor({ timeout: UI_TIMEOUT_MS });
    const usage = `LLM usage: ${run.usage.input_tokens} tokens in · ${run.usage.output_tokens} tokens out`;
    assert.match(await page.locator("[data-usage]").innerText(), new RegExp(`^${usage}`));
    await page.locator('[data-duration-node="fetch"] .bar').waitFor();
    await page.locator('[data-duration-node="name"] .bar').waitFor();

    await page.locator('[data-node="fetch"]').click();
    const calls = page.locator('[data-node-panel="fetch"] [data-step="get"] + tr.calls-row li.call');
    await calls.nth(2).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await calls.count(), 3);
    assert.match(await calls.nth(0).innerText(), /call 1 · failed · .*\n?.*http\.status: .*503/s);
    assert.match(await calls.nth(0).innerText(), /waited 50 ms \(backoff\) before call 2/);
    assert.match(await calls.nth(1).innerText(), /waited 100 ms \(backoff\) before call 3/);
    assert.match(await calls.nth(2).innerText(), /call 3 · completed .*→ 200/s);
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-attempts.png"), fullPage: true });

    await page.locator('[data-node="name"]').click();
    const llmPanel = page.locator('[data-node-panel="name"] .llm');
    await llmPanel.waitFor({ timeout: UI_TIMEOUT_MS });
    const shown = await llmPanel.innerText();
    assert.match(shown, /model\s+local \(openai-compatible\)/);
    assert.match(shown, /system\s+You name things\./);
    assert.match(shown, /user\s+Name the sea/);
    assert.match(shown, /answer\s+\{\s*"name":\s*"Name the sea"\s*\}/);
    const step = run.nodes.name.invocations[0].steps[0];
    assert.match(shown, new RegExp(`tokens\\s+${step.tokens.input} in · ${step.tokens.output} out`));
    assert.match(shown, /cost\s+\$0\.0000/);
    await page
      .locator("section.panel")
      .filter({ has: page.locator('[data-node-panel="name"]') })
      .screenshot({ path: join(SCREENSHOTS, "llm-step.png") });
    assert.deepEqual(problems, []);
    await close();
  });

  test("an agent's node panel shows its loop as a conversation: each turn, each tool call expandable, the budget used", async () => {
    const script = uid("script");
    const posted = await fetch(`${llm.url}/scripts/${script}`, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({
        turns: [
          { tool_calls: [{ name: "lookup", input: { ticket: "T-1" } }] },
          {
            tool_calls: [
              { name: "lookup", input: { ticket: "T-2" } },
              { name: "lookup", input: { ticket: "T-3" } },
            ],
          },
          { text: "All three tickets are printer fires." },
        ],
      }),
    });
    assert.equal(posted.status, 200, await posted.text());
    const lookup = {
      id: uid("lookup"),
      kind: "http",
      description: "Looks a ticket up",
      requires: { type: "object", required: ["ticket"], properties: { ticket: { type: "string" } } },
      implementation: { method: "POST", url_template: `${e.target}/echo/lookup`, body: { ticket: "$.input.ticket" } },
    };
    const agent = {
      kind: "llm",
      implementation: {
        prompt: { messages: [{ role: "user", template: `Triage the tickets [[script:${script}]]` }] },
        model: {
          provider: "openai-compatible",
          model_id: "local-agent",
          base_url: `${llm.url}/v1`,
          pricing: { input_per_mtok: 3, output_per_mtok: 15 },
        },
        tools: [{ action: lookup.id, name: "lookup" }],
        max_turns: 5,
        budget: { tokens: 50_000 },
      },
    };
    const runId = await startWorkflow(
      { id: uid("agent-loop"), nodes: { triage: oneStep("agent", agent) } },
      {
        actions: [lookup],
      },
    );
    const run = await waitForRun(runId);
    assert.equal(run.status, "completed", JSON.stringify(run.error));
    const { page, problems, close } = await openPage(`/runs/${runId}`);
    await page.locator('[data-node="triage"]').click();
    const loop = page.locator('[data-node-panel="triage"] [data-agent="agent"]');
    await loop.waitFor({ timeout: UI_TIMEOUT_MS });

    // The budget used: turns of max_turns, tokens of the budget, the cost.
    const tokens = (run.usage.input_tokens + run.usage.output_tokens).toLocaleString("en-US");
    assert.match(
      await loop.locator("[data-agent-budget]").innerText(),
      new RegExp(`^3 of 5 turns · ${tokens} of 50,000 tokens · \\$`),
    );
    // Each turn with its model, tokens and finish reason, then its calls; the last one's answer.
    const turns = loop.locator(".agent-turn");
    assert.equal(await turns.count(), 3);
    assert.match(
      await turns.nth(0).locator(".turn-head").innerText(),
      /turn 1 · local-agent \(openai-compatible\) · \d+ in · \d+ out · \$.* · tool-calls/,
    );
    assert.equal(await turns.nth(1).locator(".tool-call").count(), 2);
    assert.match(await turns.nth(2).innerText(), /stop\s+All three tickets are printer fires\./);

    // A call is one line until it is opened: then its input and its output.
    const call = loop.locator('[data-tool-call="2/1"]');
    assert.match(await call.locator("summary").innerText(), /lookup · completed · 1 attempt · \d+/);
    assert.equal(await call.locator("pre.json").first().isVisible(), false);
    await call.locator("summary").click();
    await call.locator("pre.json").first().waitFor({ state: "visible" });
    const opened = await call.innerText();
    assert.match(opened, /input\s+\{\s*"ticket": "T-3"\s*\}/);
    // The tool's output: what the echo target answered, the call's ticket in its body.
    assert.match(opened, /output\s+\{\s*"body": \{\s*"body": \{\s*"ticket": "T-3"/);
    assert.match(opened, /"status": 200\s*\}$/);
    // A dispatch's model call that asked for tools names them instead of an empty answer.
    const panel = page.locator("section.panel").filter({ has: page.locator('[data-node-panel="triage"]') });
    assert.match(await panel.locator(".llm").first().innerText(), /asked for tools\s+lookup/);
    await panel.screenshot({ path: join(SCREENSHOTS, "agent-loop.png") });
    assert.deepEqual(problems, []);
    await close();
  });

  test("a cancel asks for its reason, and the cancelled run shows it; a failed run's compensation is a panel", async () => {
    const runId = await startWorkflow({ id: uid("cancel"), nodes: { ask: oneStep("ask", askAction("Go?")) } });
    await until(runId, (run) => run.status === "waiting", "waited");
    const { page, close } = await openPage(`/runs/${runId}`);
    const controls = page.locator(".controls");
    await controls.getByRole("button", { name: "cancel" }).click();
    await controls.getByLabel("Reason").fill("wrong input");
    assert.equal((await api("GET", `/v1/runs/${runId}`)).json.status, "waiting");
    await controls.getByRole("button", { name: "Confirm cancel" }).click();
    await page.locator(".cancel-reason").getByText("Cancelled: wrong input").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await controls.getByRole("button").count(), 0);

    const unmark = { id: uid("unmark"), ...context("undone", "true") };
    const mark = { id: uid("mark"), ...context("marked", "true"), undo: { action: unmark.id } };
    const sagaId = await startWorkflow(
      {
        id: uid("saga"),
        compensate: "never",
        nodes: {
          book: oneStep("book", mark.id),
          boom: {
            ...oneStep("boom", {
              kind: "http",
              implementation: { method: "GET", url_template: `${e.target}/status/409/x` },
            }),
            depends_on: ["book"],
          },
        },
      },
      { actions: [unmark, mark] },
    );
    await waitForRun(sagaId);
    await page.goto(`${e.url}/runs/${sagaId}`);
    const panel = page.locator(".compensation");
    await panel.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await panel.getAttribute("data-compensation"), "none");
    assert.deepEqual(await controls.getByRole("button").allInnerTexts(), ["redrive", "compensate"]);
    await controls.getByRole("button", { name: "compensate" }).click();
    await page.locator('.compensation[data-compensation="completed"]').waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(
      await panel.locator('[data-undo="0"]').innerText(),
      new RegExp(`book / book\\s+context ${unmark.id}@1\\s+completed\\s+1`),
    );
    assert.equal(await controls.getByRole("button").count(), 0);
    await page.screenshot({ path: join(SCREENSHOTS, "compensation.png"), fullPage: true });
    await close();
  });

  test("a plan run is drawn from its plan: step names, tools and dependency edges", async () => {
    const listA = { id: uid("list-a"), ...context("items", "[1, 2]") };
    const listB = { id: uid("list-b"), ...context("count", "2") };
    await register({ actions: [listA, listB] });
    const started = await api("POST", "/v1/plans", {
      body: {
        plan: {
          steps: [
            { tool: listA.id, params: {} },
            { tool: listB.id, params: {}, depends_on: [0] },
          ],
        },
        tools: [listA.id, listB.id],
      },
    });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    await waitForRun(runId);
    const { page, close } = await openPage(`/runs/${runId}`);
    const selector = '[data-node="step-1"][data-status="completed"]';
    const second = page.locator(selector);
    // The node is drawn from the run view first; its tool comes with the plan, read from the journal.
    await page.waitForFunction(
      ([nodeSelector, tool]) => document.querySelector(nodeSelector)?.textContent?.includes(tool) ?? false,
      [selector, listB.id],
      { timeout: UI_TIMEOUT_MS },
    );
    // An SVG group has no innerText: its text content is the step id, its status and its tool.
    assert.match((await second.textContent()) ?? "", new RegExp(`step-1completed · ${listB.id}`));
    assert.equal(await page.locator("svg.dag path.dag-edge").count(), 1);
    await second.click();
    const row = page.locator('[data-node-panel="step-1"] tr.step-row');
    await row.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await row.innerText(), new RegExp(`^step-1 \\(${listB.id}\\)`));
    await page.screenshot({ path: join(SCREENSHOTS, "plan-run.png"), fullPage: true });
    await close();
  });

  test("Waiting for me lists the open gates of every run, linked from the navigation, and answers them", async () => {
    const inputRun = await startWorkflow({ id: uid("asks"), nodes: { ask: oneStep("ask", askAction("Publish?")) } });
    const approvalRun = await startWorkflow({
      id: uid("deploys"),
      nodes: { deploy: oneStep("push", context("v", "1", { risk: "high" })) },
    });
    const { page, problems, close } = await openPage("/");
    await page.getByRole("link", { name: "Waiting for me" }).click();
    await page.waitForURL(`${e.url}/gates`);
    const inputCard = page.locator(`[data-run="${inputRun}"][data-gate="gate_1"]`);
    const approvalCard = page.locator(`[data-run="${approvalRun}"][data-gate="gate_1"]`);
    await inputCard.getByText("Publish?").waitFor({ timeout: UI_TIMEOUT_MS });
    await approvalCard.getByRole("button", { name: "Approve" }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await approvalCard.innerText(), new RegExp(`run ${approvalRun} waiting of deploys-`));
    await page.screenshot({ path: join(SCREENSHOTS, "gates-page.png"), fullPage: true });

    await approvalCard.getByRole("button", { name: "Approve" }).click();
    assert.equal((await waitForRun(approvalRun)).status, "completed");
    await inputCard.getByLabel("ok").check();
    await inputCard.getByRole("button", { name: "Answer" }).click();
    assert.equal((await waitForRun(inputRun)).status, "completed");
    await inputCard.waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
    await approvalCard.waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
    assert.deepEqual(problems, []);
    await close();
  });

  test("at 390 px wide the runs list, a run page and the gates page fit the screen", async () => {
    assert.notEqual(llmRunId, "", "the llm test ran first");
    const gated = await startWorkflow({ id: uid("phone"), nodes: { ask: oneStep("ask", askAction("From a phone?")) } });
    const { page, close } = await openPage("/", 390);
    await page.locator("tbody tr").first().waitFor({ timeout: UI_TIMEOUT_MS });
    await assertNoHorizontalOverflow(page, "runs list");
    await page.screenshot({ path: join(SCREENSHOTS, "runs-list-390.png"), fullPage: true });

    await page.goto(`${e.url}/runs/${llmRunId}`);
    await page.locator('.verify[data-state="verified"]').waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator('[data-node="name"]').click();
    await page.locator('[data-node-panel="name"] .llm').waitFor({ timeout: UI_TIMEOUT_MS });
    await assertNoHorizontalOverflow(page, "run page");
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-390.png"), fullPage: true });

    await page.goto(`${e.url}/gates`);
    await page.locator(`[data-run="${gated}"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    await assertNoHorizontalOverflow(page, "gates page");
    await page.screenshot({ path: join(SCREENSHOTS, "gates-page-390.png"), fullPage: true });
    await close();
    await api("POST", `/v1/runs/${gated}/cancel`, { body: { reason: "test over" } });
  });
});
