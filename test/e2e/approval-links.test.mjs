// An approval link in a real browser with JavaScript turned off: headless Chromium (Debian's package,
// scripts/lib/chromium.mjs) driven by playwright-core against `wrangler dev`. The page must work as
// plain HTML under its strict policy (no script at all, styles of this origin only).
// Screenshots go to .test-results/screenshots/ (git-ignored).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { api, env, register, show, startRun, uid, waitForRun } from "./helpers.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");

/** A workflow whose one step is a high-risk action that only ops@example.com may approve. */
function guardedWorkflow(id) {
  return {
    id,
    nodes: {
      pay: {
        task: {
          steps: [
            {
              ref: "transfer",
              action: {
                kind: "context",
                risk: "high",
                approvers: { emails: ["ops@example.com"] },
                implementation: { updates: [{ path: "paid", expr: "true" }] },
              },
            },
          ],
        },
      },
    },
  };
}

/** Polls the run until its first gate is open. */
async function openGate(runId) {
  for (let i = 0; i < 200; i += 1) {
    const res = await api("GET", `/v1/runs/${runId}/gates`);
    const gate = res.json?.gates?.[0];
    if (gate?.status === "open") {
      return gate;
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(`run ${runId} opened no gate`);
}

describe("an approval link in headless Chromium without JavaScript", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;

  before(async () => {
    await env();
    const executablePath = await ensureChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
  });

  test("the page shows the prompt and decides nothing; its form approves once, as the link's approver", async () => {
    const id = uid("link");
    await register({ workflows: [guardedWorkflow(id)] });
    const started = await startRun(id, { input: {} });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    const gate = await openGate(runId);
    const made = await api("POST", `/v1/runs/${runId}/gates/${gate.gate_id}/links`, {
      body: { approver: "ops@example.com" },
    });
    assert.equal(made.status, 201, show(made));

    const context = await browser.newContext({ javaScriptEnabled: false, viewport: { width: 900, height: 800 } });
    const page = await context.newPage();
    const problems = [];
    page.on("console", (message) => message.type() === "error" && problems.push(message.text()));
    const styles = [];
    page.on("response", (res) => res.url().endsWith("/link.css") && styles.push(res.status()));

    const shown = await page.goto(made.json.url);
    assert.equal(shown?.status(), 200);
    assert.match(shown?.headers()["content-security-policy"] ?? "", /default-src 'none'/);
    await page.getByText("wants to run the high-risk context action").waitFor();
    await page.getByText("For ops@example.com").waitFor();
    // The stylesheet loaded and applied under the policy (the main panel is white on the grey page).
    assert.deepEqual(styles, [200]);
    const panel = await page.locator("main").evaluate((el) => getComputedStyle(el).backgroundColor);
    assert.equal(panel, "rgb(255, 255, 255)");
    await page.screenshot({ path: join(SCREENSHOTS, "approval-link.png"), fullPage: true });
    assert.equal((await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0].status, "open");

    await page.getByLabel("Approve").check();
    await page.getByLabel("Reason (optional)").fill("within budget");
    await page.getByRole("button", { name: "Send answer" }).click();
    await page.getByRole("heading", { name: "Answer recorded" }).waitFor();
    await page.screenshot({ path: join(SCREENSHOTS, "approval-link-answered.png"), fullPage: true });

    const run = await waitForRun(runId);
    assert.equal(run.status, "completed");
    const answered = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0];
    assert.deepEqual(answered.answered_by, { link: made.json.link_id, approver: "ops@example.com" });
    assert.deepEqual(answered.response, { approved: true, reason: "within budget" });

    assert.deepEqual(problems, []);

    // Back to the link (a browser may load it again from the network): the link is used.
    await page.goBack();
    const again = await page.goto(made.json.url);
    assert.equal(again?.status(), 409);
    await page.getByText("link.used").waitFor();
    await context.close();
  });
});
