// The web console on limits, in headless Chromium against `wrangler dev` (as
// test/e2e/console.test.mjs): the Limits page with each limit's budgets and
// its status (slots in use against its concurrency, the holders waiting) for
// the key "" and, from the key box, for another key; a run whose step waits
// for room in a limit says which limit and key, linked to that status; a run
// queued for its workflow's limit shows its priority and the limit waiting,
// then held once the slot is freed.
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
const UI_TIMEOUT_MS = 30_000;
/**
 * How long the first run's call holds the limit's one slot: long enough for
 * the second run to queue behind it, the page to load and read the status
 * (it refreshes every 3 s), and the second run's page to show its wait.
 */
const HOLD_MS = 12_000;

describe("limits in the web console", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;
  /** @type {string} */
  let url;
  /** @type {string} */
  let token;
  /** @type {string} */
  let target;

  before(async () => {
    ({ url, token, target } = await env());
    const executablePath = await ensureChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
  });

  /** A signed-in page (the token set before the console loads), failing the test on a page error. */
  async function signedInPage() {
    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    return { context, page, problems };
  }

  test("the Limits page shows a limit's slot in use and the call waiting for it; the waiting run names the limit and its key, linked to that key's status", async () => {
    const ids = { limit: uid("console-limit"), action: uid("console-limited"), workflow: uid("console-limits") };
    await register({
      limits: [{ id: ids.limit, description: "One partner call at a time per tenant", concurrency: 1 }],
      actions: [
        {
          id: ids.action,
          kind: "http",
          implementation: { method: "GET", url_template: `${target}/slow?ms=${HOLD_MS}` },
          limits: [{ limit: ids.limit, key: "input.tenant" }],
        },
      ],
      workflows: [
        {
          id: ids.workflow,
          nodes: {
            call: {
              input_mapping: { tenant: "$.input.tenant" },
              task: { steps: [{ ref: "get", action: ids.action, input_mapping: { tenant: "$.input.tenant" } }] },
            },
          },
        },
      ],
    });
    const first = await startRun(ids.workflow, { input: { tenant: "acme" } });
    assert.equal(first.status, 201, show(first));
    await waitFor("the first call to hold the slot", async () => (await limitStatus(ids.limit, "acme")).in_use === 1);
    const second = await startRun(ids.workflow, { input: { tenant: "acme" } });
    assert.equal(second.status, 201, show(second));
    const secondId = second.json.run_id;
    await waitFor("the second call to wait", async () => (await limitStatus(ids.limit, "acme")).waiting === 1);

    const { context, page, problems } = await signedInPage();
    await page.goto(`${url}/limits`);
    const card = page.locator(`li.limit[data-limit="${ids.limit}"]`);
    await card.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await card.locator("[data-budgets]").innerText(), "concurrency 1");
    await card.getByText("One partner call at a time per tenant").waitFor();
    // The key "" has nothing: the calls count under their tenant's key.
    const empty = card.locator('tr[data-key=""]');
    await empty.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await empty.locator("[data-in-use]").innerText(), "0/1");
    assert.equal(await empty.locator("[data-waiting]").innerText(), "0");
    await card.getByLabel("Key", { exact: true }).fill("acme");
    await card.getByRole("button", { name: "Show status" }).click();
    await page.waitForURL(`${url}/limits?limit=${ids.limit}&key=acme`);
    const acme = page.locator(`li.limit[data-limit="${ids.limit}"] tr[data-key="acme"]`);
    await acme.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await acme.locator("[data-in-use]").innerText(), "1/1");
    assert.equal(await acme.locator("[data-waiting]").innerText(), "1");
    await page.screenshot({ path: join(SCREENSHOTS, "limits-page.png"), fullPage: true });

    await page.goto(`${url}/runs/${secondId}`);
    const wait = page.locator('[data-waiting-for] [data-wait="limit"]');
    await wait.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(
      await wait.innerText(),
      new RegExp(`^call / get · room in limit ${ids.limit} for key "acme" · waiting (now|[0-9].*) \\(since .+\\)$`),
    );
    assert.equal(await page.locator("[data-run-limits] [data-priority]").innerText(), "5");
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-limit-wait.png"), fullPage: true });
    await wait.getByRole("link", { name: ids.limit }).click();
    await page.waitForURL(`${url}/limits?limit=${ids.limit}&key=acme`);
    await page.locator(`li.limit.selected[data-limit="${ids.limit}"] tr[data-key="acme"]`).waitFor();

    // Once the first call returns, the second holds the slot and the runs complete.
    for (const runId of [first.json.run_id, secondId]) {
      assert.equal((await waitTerminal(runId)).status, "completed");
    }
    const done = await limitStatus(ids.limit, "acme");
    assert.deepEqual([done.in_use, done.waiting], [0, 0]);
    assert.deepEqual(problems, []);
    await context.close();
  });

  test("a run queued for its workflow's limit shows its priority and the limit waiting, then held once the slot is freed", async () => {
    const ids = { limit: uid("console-runs"), workflow: uid("console-run-limit") };
    const nap = { ref: "nap", action: { kind: "sleep", implementation: { duration_ms: 60_000 } } };
    await register({
      limits: [{ id: ids.limit, concurrency: 1 }],
      workflows: [
        {
          id: ids.workflow,
          limits: [{ limit: ids.limit, key: "input.tenant" }],
          nodes: { rest: { task: { steps: [nap] } } },
        },
      ],
    });
    const first = await startRun(ids.workflow, { input: { tenant: "acme" } });
    assert.equal(first.status, 201, show(first));
    const second = await startRun(ids.workflow, { input: { tenant: "acme" }, priority: 8 });
    assert.equal(second.status, 201, show(second));
    const secondId = second.json.run_id;

    const { context, page, problems } = await signedInPage();
    await page.goto(`${url}/runs/${secondId}`);
    const line = page.locator("[data-run-limits]");
    await line.locator(`[data-run-limit="${ids.limit}"][data-status="waiting"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    assert.equal(await line.locator("[data-priority]").innerText(), "8");
    assert.match(await line.innerText(), new RegExp(`^priority 8 · limit ${ids.limit} key "acme" waiting since .+$`));
    const queued = page.locator(`[data-waiting-for] [data-wait="run-limit"][data-limit="${ids.limit}"]`);
    assert.match(
      await queued.innerText(),
      new RegExp(`^the run · a slot of limit ${ids.limit} for key "acme", before its first node, at priority 8 · `),
    );
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-queued-for-limit.png"), fullPage: true });

    const cancelled = await api("POST", `/v1/runs/${first.json.run_id}/cancel`, { body: {} });
    assert.equal(cancelled.status, 200, show(cancelled));
    await line.locator(`[data-run-limit="${ids.limit}"][data-status="held"]`).waitFor({ timeout: UI_TIMEOUT_MS });
    await queued.waitFor({ state: "detached", timeout: UI_TIMEOUT_MS });
    assert.equal((await api("POST", `/v1/runs/${secondId}/cancel`, { body: {} })).status, 200);
    assert.deepEqual(problems, []);
    await context.close();
  });
});

/** `GET /v1/limits/{id}/status?key=`, which must answer 200. */
async function limitStatus(limit, key) {
  const res = await api("GET", `/v1/limits/${limit}/status?key=${encodeURIComponent(key)}`);
  assert.equal(res.status, 200, show(res));
  return res.json;
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
  const deadline = Date.now() + UI_TIMEOUT_MS + HOLD_MS * 2;
  for (;;) {
    const res = await api("GET", `/v1/runs/${runId}`);
    if (["completed", "failed", "cancelled"].includes(res.json?.status)) {
      return res.json;
    }
    assert.ok(Date.now() < deadline, `run ${runId} did not finish: ${show(res)}`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
