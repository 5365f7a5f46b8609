// An erased run in a real browser and through the CLI: headless Chromium
// (scripts/lib/chromium.mjs) driven by playwright-core against `wrangler dev`.
// The journal verifies in the browser and with `trellis verify` before and
// after `POST /v1/runs/{run_id}/erase`, which then reports the values erased.
// Screenshots go to .test-results/screenshots/ (git-ignored).
import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { api, env, register, show, startRun, trellis, uid, waitForRun } from "./helpers.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
const UI_TIMEOUT_MS = 30_000;
const SECRET = "ada@example.com";

describe("an erased run in the console and the CLI", () => {
  /** @type {import("playwright-core").Browser} */
  let browser;
  /** @type {string} */
  let url;
  /** @type {string} */
  let token;

  before(async () => {
    ({ url, token } = await env());
    const executablePath = await ensureChromium();
    mkdirSync(SCREENSHOTS, { recursive: true });
    browser = await chromium.launch({ executablePath, args: ["--no-sandbox"] });
  });
  after(async () => {
    await browser?.close();
  });

  test("the journal verifies in the browser and with trellis verify before and after the erase, which it reports", async () => {
    const id = uid("console-erase");
    const greet = {
      ref: "greet",
      action: { kind: "context", implementation: { updates: [{ path: "hello", expr: "'Hello, ' + input.email" }] } },
      output_mapping: { "output.hello": "$.hello" },
    };
    await register({
      workflows: [
        {
          id,
          nodes: {
            greet: {
              input_mapping: { email: "$.input.email" },
              task: { steps: [greet] },
              output_mapping: { "output.hello": "$.hello" },
            },
          },
        },
      ],
    });
    const started = await startRun(id, { input: { email: SECRET } });
    assert.equal(started.status, 201, show(started));
    const runId = started.json.run_id;
    assert.equal((await waitForRun(runId)).status, "completed");

    const before = await trellis(["verify", runId]);
    assert.equal(before.code, 0, before.stdout + before.stderr);
    assert.match(before.stdout, /sealed values: \d+ match their digests, 0 erased/);

    const context = await browser.newContext({ viewport: { width: 1360, height: 900 } });
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    const problems = [];
    page.on("pageerror", (error) => problems.push(error.message));
    await page.goto(`${url}/runs/${runId}`);
    const verified = page.locator('.verify[data-state="verified"]');
    await verified.getByText("attested completed").waitFor({ timeout: UI_TIMEOUT_MS });
    assert.doesNotMatch(await verified.innerText(), /erased/);
    assert.match(await page.locator("body").innerText(), new RegExp(SECRET.replace(".", "\\.")));

    const erased = await api("POST", `/v1/runs/${runId}/erase`, { body: { reason: "the subject asked" } });
    assert.equal(erased.status, 200, show(erased));
    const seqs = erased.json.erased.seqs;
    assert.ok(seqs.length >= 3, show(erased));

    await page.reload();
    await verified.getByText("values erased").waitFor({ timeout: UI_TIMEOUT_MS });
    const entries = (await api("GET", `/v1/runs/${runId}/journal`)).json.entries;
    assert.equal(entries.at(-1).kind, "erased");
    assert.equal(
      await verified.innerText(),
      `verified · ${entries.length} entries · attested completed · values erased in ${seqs.length} entries`,
    );
    assert.match(await page.locator(".erased").innerText(), /the subject asked/);
    assert.doesNotMatch(await page.locator("body").innerText(), new RegExp(SECRET.replace(".", "\\.")));
    await page.screenshot({ path: join(SCREENSHOTS, "run-page-erased.png"), fullPage: true });
    assert.deepEqual(problems, []);
    await context.close();

    const afterErase = await trellis(["verify", runId]);
    assert.equal(afterErase.code, 0, afterErase.stdout + afterErase.stderr);
    assert.match(
      afterErase.stdout,
      new RegExp(`^OK: ${entries.length} entries, run ${runId}, attested completed$`, "m"),
    );
    assert.match(afterErase.stdout, new RegExp(`verified with values erased: ${seqs.length} entries`));
    assert.match(afterErase.stdout, /erased at seq \d+ \(.*\): the subject asked/);
  });

  test("a value put back into an erased journal fails verification in the browser", async () => {
    const id = uid("console-erase-forged");
    await register({
      workflows: [
        {
          id,
          nodes: {
            only: {
              task: {
                steps: [
                  { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } },
                ],
              },
            },
          },
        },
      ],
    });
    const started = await startRun(id, { input: { who: "ada" } });
    const runId = started.json.run_id;
    await waitForRun(runId);
    assert.equal((await api("POST", `/v1/runs/${runId}/erase`, { body: { reason: "test" } })).status, 200);

    const context = await browser.newContext();
    await context.addInitScript((value) => sessionStorage.setItem("trellis.api_token", value), token);
    const page = await context.newPage();
    // The erased run.created entry gets an input back that does not match its digest.
    await page.route(`**/v1/runs/${runId}/events`, async (route) => {
      const response = await route.fetch();
      const body = await response.text();
      const forged = body.replace(
        /"body":\{"\$sealed"/,
        '"body":{"input":{"who":"eve"},"$salt":"AAAAAAAAAAAAAAAAAAAAAA","$sealed"',
      );
      assert.notEqual(forged, body);
      await route.fulfill({ response, body: forged });
    });
    await page.goto(`${url}/runs/${runId}`);
    const failed = page.locator('.verify[data-state="failed"]');
    await failed.waitFor({ timeout: UI_TIMEOUT_MS });
    assert.match(
      await failed.innerText(),
      /^not verified: entry seq 1 \(index 0\): bad sealed value — the value at \/input/,
    );
    await context.close();
  });
});
