// The web console in a real browser: headless Chromium (Debian's package,
// scripts/lib/chromium.mjs) driven by playwright-core against `wrangler dev`,
// which serves the console as Workers static assets next to the API.
// Screenshots go to .test-results/screenshots/ (git-ignored).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { api, env, register, show, startRun, uid } from "./helpers.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
/** Long enough for the run index to catch up and the list to poll it again. */
const UI_TIMEOUT_MS = 30_000;
/** Set once `wrangler dev` is up and Chromium installed: the suite's time is the browser's (launch and tests). */
let suiteStarted = 0;

/** A workflow whose middle node waits at a human gate, with a foreach fan-out beside it. */
function gatedWorkflow(id) {
  const context = (path, expr) => ({ kind: "context", implementation: { updates: [{ path, expr }] } });
  return {
    id,
    input_schema: { type: "object", properties: { items: { type: "array" } } },
    nodes: {
      prepare: {
        input_mapping: { items: "$.input.items" },
        task: {
          steps: [{ ref: "count", action: context("n", "size(input.items)"), output_mapping: { "output.n": "$.n" } }],
        },
      },
      fan: {
        depends_on: ["prepare"],
        foreach: { items: "$.input.items" },
        input_mapping: { x: "$.item" },
        task: { steps: [{ ref: "double", action: context("y", "input.x * 2") }] },
      },
      ask: {
        depends_on: ["prepare"],
        input_mapping: { n: "$.state.prepare.n" },
        task: {
          steps: [
            {
              ref: "approve",
              action: {
                kind: "human",
                implementation: {
                  prompt_template: "Ship {{n}} items?",
                  input_schema: {
                    type: "object",
                    required: ["ok"],
                    properties: { ok: { type: "boolean" }, note: { type: "string" } },
                  },
                },
              },
              input_mapping: { n: "$.input.n" },
              output_mapping: { "output.ok": "$.response.ok" },
            },
          ],
        },
      },
      finish: {
        depends_on: ["ask", "fan"],
        input_mapping: { ok: "$.state.ask.ok" },
        task: {
          steps: [
            { ref: "done", action: context("shipped", "input.ok"), output_mapping: { "output.shipped": "$.shipped" } },
          ],
        },
        output_mapping: { "output.shipped": "$.shipped" },
      },
    },
  };
}

describe("web console in headless Chromium", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;
  /** @type {string} */
  let url;
  /** @type {string} */
  let token;

  before(async () => {
    ({ url, token } = await env());
    // On a fresh machine this installs Debian's chromium first (a minute or two, not counted below).
    const executablePath = await ensureChromium();
    suiteStarted = Date.now();
    mkdirSync(SCREENSHOTS, { recursive: true });
    // Root in CI and containers: Chromium's sandbox needs user namespaces it may not have there.
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
    process.stdout.write(`browser: suite=${((Date.now() - suiteStarted) / 1000).toFixed(1)}s\n`);
  });

  test("sign in, find the run in the list, watch it reach its gate, answer it, see it complete and verified", async () => {
    const id = uid("console");
    await register({ workflows: [gatedWorkflow(id)] });
    const started = await startRun(id, { input: { items: [1, 2, 3] } });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;

    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    const page = await context.newPage();
    const requests = [];
    page.on("request", (request) => requests.push({ url: request.url(), type: request.resourceType() }));
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    page.on("console", (message) => message.type() === "error" && problems.push(message.text()));
    const t0 = Date.now();

    await page.goto(`${url}/`);
    await page.getByLabel("API token").fill(token);
    await page.getByRole("button", { name: "Sign in" }).click();
    const row = page.locator(`tr[data-run-id="${runId}"]`);
    await row.waitFor({ timeout: UI_TIMEOUT_MS });
    await page.screenshot({ path: join(SCREENSHOTS, "runs-list.png"), fullPage: true });

    await row.getByRole("link", { name: runId }).click();
    await page.waitForURL(`${url}/runs/${runId}`);
    // The graph shows the gate's node waiting and the foreach's items settled.
    await page.locator('[data-node="ask"][data-status="waiting"]').waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator('[data-node="fan"]').getByText("3/3 items").waitFor({ timeout: UI_TIMEOUT_MS });
    const gate = page.locator('[data-gate="gate_1"]');
    await gate.getByText("Ship 3 items?").waitFor({ timeout: UI_TIMEOUT_MS });
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-gate.png"), fullPage: true });

    await gate.getByLabel("ok").check();
    await gate.getByLabel("note").fill("ship it");
    await gate.getByLabel("Responder").fill("e2e-browser");
    await gate.getByRole("button", { name: "Answer" }).click();

    const verified = page.locator('.verify[data-state="verified"]');
    await verified.getByText("attested completed").waitFor({ timeout: UI_TIMEOUT_MS });
    const journal = await api("GET", `/v1/runs/${runId}/journal`);
    assert.match(await verified.innerText(), new RegExp(`^verified · ${journal.json.entries.length} entries`));
    await page.locator('[data-node="finish"][data-status="completed"]').waitFor({ timeout: UI_TIMEOUT_MS });
    const signInToVerifiedMs = Date.now() - t0;
    // The timeline names who answered (the entry's signed by), and keeps the responder as a note.
    const answeredLine = page.locator("li.entry.kind-gate-answered .entry-line");
    assert.match(await answeredLine.locator(".by").innerText(), /^by token "API_TOKENS" \(env:[0-9a-f]{16}\)$/);
    assert.match(await answeredLine.locator(".summary").innerText(), /responder's note: e2e-browser/);
    // A node's box opens its invocations and step records.
    await page.locator('[data-node="fan"]').click();
    await page.locator('[data-node-panel="fan"]').getByText("invocation 2").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await page.locator('[data-node-panel="fan"] details').count(), 3);
    await page.locator('[data-node="ask"]').click();
    const askSteps = page.locator('[data-node-panel="ask"] table.steps');
    await askSteps.first().waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await askSteps.first().innerText(), /approve\s+human .*\s+suspended/);
    assert.match(await askSteps.last().innerText(), /approve\s+human .*\s+completed/);
    await page.screenshot({ path: join(SCREENSHOTS, "run-page.png"), fullPage: true });

    const run = await api("GET", `/v1/runs/${runId}`);
    assert.equal(run.json.status, "completed", show(run));
    assert.deepEqual(run.json.output, { shipped: true });
    assert.equal(run.json.gates[0].responder, "e2e-browser");
    assert.deepEqual(run.json.gates[0].response, { ok: true, note: "ship it" });

    // The event stream was read with fetch, and the token never went into a URL.
    assert.ok(requests.some((r) => r.url.includes(`/v1/runs/${runId}/events`) && r.type === "fetch"));
    assert.ok(!requests.some((r) => r.type === "eventsource"));
    assert.deepEqual(
      requests.filter((r) => r.url.includes(token)),
      [],
    );

    // Nothing failed in the page, the content security policy included.
    assert.deepEqual(problems, []);

    // A deep link survives a reload; the session keeps the token.
    await page.reload();
    await verified.getByText("attested completed").waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator("li.entry").first().locator("button").click();
    await page.getByText('"kind": "run.created"').waitFor();
    await context.close();
    process.stdout.write(`browser: sign_in_to_verified=${(signInToVerifiedMs / 1000).toFixed(1)}s\n`);
  });

  test("the runs list updates by itself while a run progresses", async () => {
    const id = uid("console-live");
    await register({ workflows: [gatedWorkflow(id)] });
    const started = await startRun(id, { input: { items: [1] } });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/?workflow=${id}`);
    const row = page.locator(`tr[data-run-id="${runId}"]`);
    await row.getByText("waiting").waitFor({ timeout: UI_TIMEOUT_MS });
    const answered = await api("POST", `/v1/runs/${runId}/gates/gate_1`, { body: { response: { ok: false } } });
    assert.equal(answered.status, 200, show(answered));
    // No navigation, no reload: the list's own refresh shows the new status.
    await row.getByText("completed").waitFor({ timeout: UI_TIMEOUT_MS });
    await context.close();
  });

  test("a workflow's page shows its versions and YAML and starts a run from its input form; the list filters by workflow", async () => {
    const id = uid("console-start");
    const workflow = (greeting) => ({
      id,
      input_schema: {
        type: "object",
        required: ["name"],
        properties: { name: { type: "string" }, times: { type: "integer" } },
      },
      nodes: {
        hello: {
          task: {
            steps: [
              {
                ref: "make",
                action: {
                  kind: "context",
                  implementation: { updates: [{ path: "greeting", expr: `'${greeting}, ' + input.name` }] },
                },
                output_mapping: { "output.greeting": "$.greeting" },
              },
            ],
          },
          input_mapping: { name: "$.input.name" },
          output_mapping: { "output.greeting": "$.greeting" },
        },
      },
    });
    await register({ workflows: [workflow("Hello")] });
    await register({ workflows: [workflow("Hi")] });

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/workflows/${id}`);
    await page.getByRole("button", { name: "v1" }).waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator("pre.yaml").getByText("'Hi, ' + input.name").waitFor();
    await page.getByRole("button", { name: "v1" }).click();
    await page.locator("pre.yaml").getByText("'Hello, ' + input.name").waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, "workflow-page.png"), fullPage: true });

    await page.getByLabel("name").fill("Ada");
    await page.getByLabel("times").fill("2");
    await page.getByRole("button", { name: "Start run" }).click();
    await page.waitForURL(/\/runs\/run_[0-9a-f]{32}$/);
    const runId = new URL(page.url()).pathname.split("/").at(-1);
    await page
      .locator('.verify[data-state="verified"]')
      .getByText("attested completed")
      .waitFor({ timeout: UI_TIMEOUT_MS });
    const run = await api("GET", `/v1/runs/${runId}`);
    assert.deepEqual(run.json.workflow, { id, version: 1 });
    assert.deepEqual(run.json.input, { name: "Ada", times: 2 });
    assert.deepEqual(run.json.output, { greeting: "Hello, Ada" });

    await page.getByRole("link", { name: "Runs", exact: true }).click();
    await page.getByLabel("Workflow").fill(id);
    await page.getByRole("button", { name: "Filter" }).click();
    await page.waitForURL(`${url}/?workflow=${id}`);
    // The filtered list settles on exactly this run (the unfiltered one it replaces had it too, among others).
    await page.waitForFunction(
      (expected) => {
        const rows = document.querySelectorAll("tbody tr");
        return rows.length === 1 && rows[0]?.getAttribute("data-run-id") === expected;
      },
      runId,
      { timeout: UI_TIMEOUT_MS },
    );
    await page.locator(`tr[data-run-id="${runId}"]`).getByText("completed").waitFor({ timeout: UI_TIMEOUT_MS });
    await context.close();
  });

  test("shows who is signed in, and only the buttons their roles allow: a reader none, a runner no Approve and no gate form", async () => {
    const gatedId = uid("console-roles");
    const draftedId = uid("console-drafted");
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } };
    await register({
      workflows: [gatedWorkflow(gatedId), { id: draftedId, nodes: { work: { task: { steps: [step] } } } }],
    });
    const drafted = (await startRun(draftedId, { input: {}, mode: "approval" })).json.run_id;
    const gated = (await startRun(gatedId, { input: { items: [1] } })).json.run_id;
    const made = async (name, roles) => {
      const answer = await api("POST", "/v1/tokens", { body: { name, roles } });
      assert.equal(answer.status, 201, show(answer));
      return answer.json.token;
    };
    const signedIn = async (secret) => {
      const context = await browser.newContext({ viewport: { width: 1280, height: 900 } });
      await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), secret);
      return { context, page: await context.newPage() };
    };

    const reader = await signedIn(await made("support desk", ["reader"]));
    await reader.page.goto(`${url}/runs/${drafted}`);
    const whoami = reader.page.locator("nav.top .whoami");
    await whoami.getByText('token "support desk" · reader').waitFor({ timeout: UI_TIMEOUT_MS });
    await reader.page.locator('.verify[data-state="verified"]').waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await reader.page.locator(".controls button").count(), 0);
    await reader.page.goto(`${url}/runs/${gated}`);
    const readerGate = reader.page.locator('[data-gate="gate_1"]');
    await readerGate.getByText("You may not answer this gate.").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await readerGate.locator("form, button").count(), 0);
    assert.equal(await reader.page.locator(".controls button").count(), 0);
    await reader.page.screenshot({ path: join(SCREENSHOTS, "reader-run-page.png"), fullPage: true });
    await reader.context.close();

    const runner = await signedIn(await made("cron", ["runner", "reader"]));
    await runner.page.goto(`${url}/runs/${drafted}`);
    await runner.page.locator("nav.top .whoami").getByText('token "cron" · runner, reader').waitFor();
    const controls = runner.page.locator(".controls");
    await controls.getByRole("button", { name: "cancel" }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await controls.getByRole("button").allInnerTexts(), ["cancel"]);
    await runner.page.goto(`${url}/runs/${gated}`);
    const runnerGate = runner.page.locator('[data-gate="gate_1"]');
    await runnerGate.getByText("You may not answer this gate.").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await runnerGate.getByRole("button").count(), 0);
    await runner.context.close();
    // Both runs are left to the admin: cancel them so they do not wait on.
    for (const runId of [drafted, gated]) {
      assert.equal((await api("POST", `/v1/runs/${runId}/cancel`, { body: {} })).status, 200);
    }
  });

  test("approve a drafted run with its button; its sub-workflow node links to the child run, which links back", async () => {
    const childId = uid("console-child");
    const parentId = uid("console-parent");
    const step = {
      ref: "s",
      action: { kind: "context", implementation: { updates: [{ path: "v", expr: "2 * 21" }] } },
    };
    await register({
      workflows: [
        { id: childId, nodes: { work: { task: { steps: [step] } } } },
        { id: parentId, nodes: { sub: { workflow: childId } } },
      ],
    });
    const started = await startRun(parentId, { input: {}, mode: "approval" });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/runs/${runId}`);
    const controls = page.locator(".controls");
    await controls.getByRole("button", { name: "approve" }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await controls.getByRole("button").allInnerTexts(), ["cancel", "approve"]);
    await controls.getByRole("button", { name: "approve" }).click();
    await page
      .locator('.verify[data-state="verified"]')
      .getByText("attested completed")
      .waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await controls.getByRole("button").count(), 0);

    const sub = page.locator('[data-node="sub"][data-status="completed"]');
    await sub.getByText("sub-workflow").waitFor({ timeout: UI_TIMEOUT_MS });
    await sub.getByText("child 1").click();
    await page.waitForURL(/\/runs\/run_[0-9a-f]{32}$/);
    const childRunId = new URL(page.url()).pathname.split("/").at(-1);
    assert.notEqual(childRunId, runId);
    await page.getByText("child of").waitFor({ timeout: UI_TIMEOUT_MS });
    await page
      .locator('.verify[data-state="verified"]')
      .getByText("attested completed")
      .waitFor({ timeout: UI_TIMEOUT_MS });
    await page.getByRole("link", { name: runId }).click();
    await page.waitForURL(`${url}/runs/${runId}`);
    await context.close();
  });

  test("a run queued for a delayed start shows how it was started, when it starts, and the controls it accepts while queued", async () => {
    const id = uid("console-delayed");
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } };
    await register({ workflows: [{ id, nodes: { work: { task: { steps: [step] } } } }] });
    const started = await startRun(id, { input: {}, delay_ms: 600_000 });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/runs/${runId}`);
    const startAt = page.locator("[data-start-at]");
    await startAt.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await startAt.innerText(), /starts/);
    assert.equal(await page.locator("[data-trigger]").innerText(), "started by the API");
    const controls = page.locator(".controls");
    await controls.getByRole("button", { name: "pause" }).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.deepEqual(await controls.getByRole("button").allInnerTexts(), ["cancel", "pause"]);
    await context.close();
    assert.equal((await api("POST", `/v1/runs/${runId}/cancel`, { body: {} })).status, 200);
  });

  test("a waiting run says what it waits for: a timer counting down, a link to its gate's card and one to its child run", async () => {
    const id = uid("console-waits");
    const childId = uid("console-waits-child");
    const nap = (ref) => ({ ref, action: { kind: "sleep", implementation: { duration_ms: 60_000 } } });
    const ask = { kind: "human", implementation: { prompt_template: "Go on?", input_schema: { type: "object" } } };
    await register({
      workflows: [
        { id: childId, nodes: { rest: { task: { steps: [nap("rest")] } } } },
        {
          id,
          nodes: {
            remind: { task: { steps: [nap("nap")] } },
            ask: { task: { steps: [{ ref: "approve", action: ask }] } },
            sub: { workflow: childId },
          },
        },
      ],
    });
    const started = await startRun(id, { input: {} });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    const run = await waitFor("three waits", async () => {
      const read = await api("GET", `/v1/runs/${runId}`);
      return read.json.waiting_for.length === 3 && read.json.waiting_for.every((w) => w.run_id !== null) && read.json;
    });
    const childRunId = run.waiting_for.find((wait) => wait.kind === "child").run_id;

    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/runs/${runId}`);
    const box = page.locator("[data-waiting-for]");
    const countdown = box.locator('[data-wait="timer"] [data-countdown]');
    await countdown.waitFor({ timeout: UI_TIMEOUT_MS });
    const first = secondsLeft(await countdown.innerText());
    assert.ok(first > 30 && first <= 60, `${first}s left of a 60 s sleep`);
    await page.waitForTimeout(1_500);
    const second = secondsLeft(await countdown.innerText());
    assert.ok(second < first, `the countdown went from ${first}s to ${second}s`);
    assert.match(
      await box.locator('[data-wait="timer"]').innerText(),
      /^remind \/ nap · sleeping · wakes in .+ \(at .+\)$/,
    );
    assert.equal(
      await box.locator('[data-wait="timer"] time').getAttribute("datetime"),
      run.waiting_for.find((wait) => wait.kind === "timer").until,
    );
    assert.equal(
      await box.locator('[data-wait="child"]').getByRole("link").getAttribute("href"),
      `/runs/${childRunId}`,
    );
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-waiting.png"), fullPage: true });
    // On a phone the box still fits the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    const widths = await box.evaluate((element) => ({ box: element.scrollWidth, page: window.innerWidth }));
    assert.ok(widths.box <= widths.page, `the box is ${widths.box} px wide in a ${widths.page} px viewport`);
    await page.setViewportSize({ width: 1360, height: 900 });

    // The gate's link goes to its card, further down the page.
    await box.locator('[data-wait="gate"]').getByRole("link", { name: "gate_1" }).click();
    await page.waitForURL(`${url}/runs/${runId}#gate-gate_1`);
    assert.equal(await page.locator("#gate-gate_1").getAttribute("data-gate"), "gate_1");
    await page.locator("#gate-gate_1").getByText("Go on?").waitFor({ timeout: UI_TIMEOUT_MS });

    const controls = page.locator(".controls");
    await controls.getByRole("button", { name: "cancel" }).click();
    await controls.getByRole("button", { name: "Confirm cancel" }).click();
    await page.locator(".run-head .badge.status-cancelled").waitFor({ timeout: UI_TIMEOUT_MS });
    await box.waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
    await context.close();
    assert.equal((await waitTerminal(runId)).status, "cancelled");
  });

  test("an event wait counts down to its timeout and takes a signal sent from its form: bad JSON refused inline, a non-matching signal kept, the matching one completes the run", async () => {
    const id = uid("console-event");
    const [replied, closed] = [uid("customer.replied"), uid("customer.closed")];
    const match = "event.data.ticket_id == input.ticket_id";
    await register({
      workflows: [
        {
          id,
          input_schema: { type: "object", required: ["ticket_id"], properties: { ticket_id: { type: "integer" } } },
          nodes: {
            await_reply: {
              task: {
                steps: [
                  {
                    ref: "reply",
                    action: { kind: "event", implementation: { name: [replied, closed], match, timeout_ms: 600_000 } },
                    input_mapping: { ticket_id: "$.input.ticket_id" },
                    output_mapping: { "output.got": "$" },
                  },
                ],
              },
              output_mapping: { "output.got": "$.got" },
            },
          },
        },
      ],
    });
    const started = await startRun(id, { input: { ticket_id: 7 } });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    const run = await waitFor("the event wait", async () => {
      const read = await api("GET", `/v1/runs/${runId}`);
      return read.json.waiting_for.some((wait) => wait.kind === "event") && read.json;
    });

    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    const signals = [];
    page.on("request", (request) => request.url().endsWith(`/v1/runs/${runId}/signals`) && signals.push(request));
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    await page.goto(`${url}/runs/${runId}`);
    const line = page.locator('[data-waiting-for] [data-wait="event"]');
    const countdown = line.locator("[data-countdown]");
    await countdown.waitFor({ timeout: UI_TIMEOUT_MS });
    const first = secondsLeft(await countdown.innerText());
    assert.ok(first > 500 && first <= 600, `${first}s left of a 600 s wait`);
    await page.waitForTimeout(1_500);
    const second = secondsLeft(await countdown.innerText());
    assert.ok(second < first, `the countdown went from ${first}s to ${second}s`);
    assert.match(
      (await line.innerText()).split("\n")[0],
      new RegExp(
        `^await_reply / reply · an event named ${replied} or ${closed} where ${match} · times out in .+ \\(at .+\\)$`,
      ),
    );
    assert.equal(await line.locator("time").getAttribute("datetime"), run.waiting_for[0].expires_at);

    // Data that is not JSON is refused in the form, and nothing is sent.
    await line.getByText("Send a signal").click();
    const form = line.locator("[data-signal-form]");
    const data = form.getByLabel("Data (JSON)");
    await data.fill("{ticket_id: 7}");
    await form.getByRole("button", { name: "Send signal" }).click();
    const dataError = form.locator("[data-signal-data-error]");
    await dataError.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await dataError.innerText(), /^Data is not JSON: /);
    assert.equal(await data.getAttribute("aria-invalid"), "true");
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-signal-invalid.png"), fullPage: true });
    assert.equal(signals.length, 0);

    // Another ticket's reply: accepted, kept by the run, and the wait goes on waiting.
    await data.fill('{"ticket_id": 8}');
    await form.getByLabel("Id").fill("reply-8");
    await form.getByRole("button", { name: "Send signal" }).click();
    const answer = form.locator("[data-signal-answer]");
    await answer.getByText("accepted as reply-8").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await dataError.count(), 0);
    await form.getByRole("button", { name: "Send signal" }).click();
    await answer.getByText("duplicate: reply-8 was accepted before").waitFor({ timeout: UI_TIMEOUT_MS });
    await page
      .locator("li.entry")
      .getByText(`signal ${replied} (reply-8) received`)
      .waitFor({ timeout: UI_TIMEOUT_MS });
    const still = await api("GET", `/v1/runs/${runId}`);
    assert.equal(still.json.status, "waiting", show(still));
    assert.equal(await line.count(), 1);
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-signal.png"), fullPage: true });
    // On a phone the box, its form open, still fits the screen.
    await page.setViewportSize({ width: 390, height: 844 });
    const widths = await page
      .locator("[data-waiting-for]")
      .evaluate((element) => ({ box: element.scrollWidth, page: window.innerWidth }));
    assert.ok(widths.box <= widths.page, `the box is ${widths.box} px wide in a ${widths.page} px viewport`);
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-signal-phone.png") });
    await page.setViewportSize({ width: 1360, height: 900 });

    // This ticket's, under the wait's other name: taken, and the run completes.
    await form.getByLabel("Name").selectOption(closed);
    await data.fill('{"ticket_id": 7, "text": "solved, thanks"}');
    await form.getByLabel("Id").fill("");
    await form.getByRole("button", { name: "Send signal" }).click();
    await page.locator(".run-head .badge.status-completed").waitFor({ timeout: UI_TIMEOUT_MS });
    await page.locator("[data-waiting-for]").waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
    await page
      .locator("li.entry")
      .getByText(new RegExp(`^took signal ${closed} \\(evt_`))
      .waitFor({ timeout: UI_TIMEOUT_MS });
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-signal-taken.png"), fullPage: true });
    assert.equal(signals.length, 3);
    assert.deepEqual(problems, []);
    await context.close();
    const ended = await waitTerminal(runId);
    assert.equal(ended.status, "completed");
    assert.deepEqual(
      {
        ...ended.output.got,
        event_id: ended.output.got.event_id.slice(0, 4),
        received_at: typeof ended.output.got.received_at,
      },
      {
        event_id: "evt_",
        name: closed,
        data: { ticket_id: 7, text: "solved, thanks" },
        received_at: "string",
        timed_out: false,
      },
    );
  });

  test("a journal altered on its way to the browser fails verification at the altered entry", async () => {
    const id = uid("console-tamper");
    await register({
      workflows: [
        {
          id,
          nodes: {
            only: {
              task: {
                steps: [
                  {
                    ref: "s",
                    action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1 + 1" }] } },
                  },
                ],
              },
            },
          },
        },
      ],
    });
    const started = await startRun(id, { input: { who: "ada" } });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    // The stream of a finished run ends after its attestation: alter the first entry's input.
    await page.route(`**/v1/runs/${runId}/events`, async (route) => {
      const response = await route.fetch();
      const body = (await response.text()).replace('"who":"ada"', '"who":"eve"');
      await route.fulfill({ response, body });
    });
    await waitTerminal(runId);
    await page.goto(`${url}/runs/${runId}`);
    const failed = page.locator('.verify[data-state="failed"]');
    await failed.waitFor({ timeout: UI_TIMEOUT_MS });
    // The input is sealed (docs/journal.md, "Sealed values and erasure"): its digest no longer matches.
    assert.match(
      await failed.innerText(),
      /^not verified: entry seq 1 \(index 0\): bad sealed value — the value at \/input/,
    );
    await context.close();
  });

  test("the schedules page shows next times and recent slots, triggers a run now, pauses and resumes", async () => {
    const workflowId = uid("console-nightly");
    const scheduleId = uid("console-schedule");
    const step = {
      ref: "s",
      action: { kind: "context", implementation: { updates: [{ path: "day", expr: "input.day" }] } },
    };
    await register({
      workflows: [
        { id: workflowId, nodes: { report: { task: { steps: [step] }, input_mapping: { day: "$.input.day" } } } },
      ],
      schedules: [
        {
          id: scheduleId,
          workflow: workflowId,
          cron: "30 2 * * 1-5",
          timezone: "Europe/Berlin",
          input: { day: { expr: "schedule.scheduled_at" } },
        },
      ],
    });
    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    await page.goto(`${url}/schedules`);
    const card = page.locator(`li.schedule[data-schedule="${scheduleId}"]`);
    await card.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await card.locator(".schedule-next time").count(), 5);
    await card.getByText("No slot yet.").waitFor();

    await card.getByRole("button", { name: "Trigger now" }).click();
    const row = card.locator("table.slots tbody tr").first();
    await row.locator("a.mono").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await row.locator("td").last().textContent(), "trigger");
    const runId = (await row.locator("a.mono").textContent()) ?? "";
    assert.match(runId, /^run_[0-9a-f]{32}$/);

    await card.getByRole("button", { name: "Pause" }).click();
    await card.getByRole("button", { name: "Resume" }).waitFor({ timeout: UI_TIMEOUT_MS });
    await card.locator(".badge.status-paused").waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, "schedules-page.png"), fullPage: true });
    assert.equal((await api("GET", `/v1/schedules/${scheduleId}/status`)).json.paused, true);
    await card.getByRole("button", { name: "Resume" }).click();
    await card.getByRole("button", { name: "Pause" }).waitFor({ timeout: UI_TIMEOUT_MS });

    await row.locator("a.mono").click();
    await page.waitForURL(`${url}/runs/${runId}`);
    const run = await waitTerminal(runId);
    assert.equal(run.status, "completed");
    await context.close();
  });

  test("deep links load the console; the API and /healthz still answer JSON to a browser navigation", async () => {
    const navigate = { "accept": "text/html", "sec-fetch-mode": "navigate", "sec-fetch-dest": "document" };
    for (const path of ["/", "/runs/run_00000000000000000000000000000000", "/workflows/anything"]) {
      const res = await fetch(`${url}${path}`, { headers: navigate });
      assert.equal(res.status, 200, path);
      assert.match(await res.text(), /<title>Trellis console<\/title>/, path);
      assert.match(res.headers.get("content-security-policy") ?? "", /script-src 'self'/, path);
      assert.match(res.headers.get("content-security-policy") ?? "", /frame-ancestors 'none'/, path);
    }
    const script = await fetch(`${url}/build/app.js`);
    assert.equal(script.status, 200);
    assert.match(script.headers.get("content-type") ?? "", /javascript/);
    const apiRes = await fetch(`${url}/v1/runs/run_00000000000000000000000000000000`, { headers: navigate });
    assert.equal(apiRes.status, 401);
    assert.equal((await apiRes.json()).error.code, "auth.missing_token");
    const health = await fetch(`${url}/healthz`, { headers: navigate });
    assert.deepEqual(await health.json(), { ok: true });
  });
});

/** The seconds a countdown such as `wakes in 1m 05s`, `wakes in 59s` or `times out in 9m 58s` names. */
function secondsLeft(text) {
  const match = /(?:wakes|times out) in (?:(\d+)m )?(\d+)s/.exec(text);
  assert.ok(match, `not a countdown: ${text}`);
  return Number(match[1] ?? 0) * 60 + Number(match[2]);
}

/** Polls `probe` until it gives a truthy value. */
async function waitFor(what, probe) {
  const deadline = Date.now() + UI_TIMEOUT_MS;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    assert.ok(Date.now() < deadline, `timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitTerminal(runId) {
  const deadline = Date.now() + UI_TIMEOUT_MS;
  for (;;) {
    const res = await api("GET", `/v1/runs/${runId}`);
    if (["completed", "failed", "cancelled"].includes(res.json?.status)) {
      return res.json;
    }
    assert.ok(Date.now() < deadline, `run ${runId} did not finish: ${show(res)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
