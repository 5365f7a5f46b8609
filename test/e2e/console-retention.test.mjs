// The web console's page of a deleted run, in headless Chromium against `wrangler dev`
// (as test/e2e/console.test.mjs): it says the run was deleted and when, and shows and
// verifies the archived journal when there is one. Screenshots go to
// .test-results/screenshots/deleted-run*.png (git-ignored).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { api, env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
const UI_TIMEOUT_MS = 30_000;

/** A workflow of one `context` step, with the retention given. */
function quickWorkflow(id, retention) {
  const step = {
    ref: "mark",
    action: { kind: "context", implementation: { updates: [{ path: "ok", expr: "true" }] } },
  };
  return { id, retention, nodes: { only: { task: { steps: [step] } } } };
}

/** Starts a run of `workflow`, waits for it to complete, deletes it; the DELETE's answer. */
async function deletedRun(workflow) {
  const started = await startRun(workflow, { input: {} });
  assert.equal(started.status, 201, show(started));
  const runId = started.json.run_id;
  assert.equal((await waitForRun(runId)).status, "completed");
  const deleted = await api("DELETE", `/v1/runs/${runId}`);
  assert.equal(deleted.status, 200, show(deleted));
  return deleted.json;
}

describe("web console: a deleted run", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;
  /** @type {string} */
  let url;
  /** @type {string} */
  let token;

  before(async () => {
    ({ url, token } = await env());
    browser = await chromium.launch({ executablePath: await ensureChromium(), args: ["--no-sandbox"] });
    mkdirSync(SCREENSHOTS, { recursive: true });
  });
  after(async () => {
    await browser?.close();
  });

  test("the deleted run's page says it was deleted and when; an archived journal is shown and verified in the browser", async () => {
    const [kept, gone] = [uid("console-archived"), uid("console-deleted")];
    await register({ workflows: [quickWorkflow(kept, { archive: true }), quickWorkflow(gone, {})] });
    const archived = await deletedRun(kept);
    const plain = await deletedRun(gone);
    assert.equal(archived.archived, true);
    assert.equal(plain.archived, false);

    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));

    await page.goto(`${url}/runs/${archived.run_id}`);
    const note = page.locator(".deleted-run");
    await note.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(
      await note.innerText(),
      new RegExp(`deleted\\s+Run ${archived.run_id} was deleted at ${archived.deleted_at}`),
    );
    const verified = page.locator('.verify[data-state="verified"]');
    await verified.getByText("attested completed").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await verified.innerText(), /^archived journal · verified · \d+ entries/);
    assert.ok((await page.locator("li.entry").count()) > 0);
    await page.screenshot({ path: join(SCREENSHOTS, "deleted-run-archived.png"), fullPage: true });

    await page.goto(`${url}/runs/${plain.run_id}`);
    await page.getByText("Its journal was not archived").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(await page.locator(".deleted-run").innerText(), /was deleted at/);
    await page.screenshot({ path: join(SCREENSHOTS, "deleted-run.png"), fullPage: true });

    // The runs list keeps both rows, as deleted.
    await page.goto(`${url}/?workflow=${gone}`);
    await page.locator(`tr[data-run-id="${plain.run_id}"] .badge.status-deleted`).waitFor({ timeout: UI_TIMEOUT_MS });
    await page.screenshot({ path: join(SCREENSHOTS, "deleted-run-list.png"), fullPage: true });
    // A 410 is an answer, not a page error: the console logs none.
    assert.deepEqual(problems, []);
    await context.close();
  });
});
