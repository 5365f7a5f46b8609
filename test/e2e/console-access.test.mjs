// The web console signed in through Cloudflare Access, in headless Chromium:
// a `wrangler dev` with ACCESS_TEAM_DOMAIN, ACCESS_AUD and ACCESS_ROLES set,
// its team's key set served by a local server (ACCESS_CERTS_URL, as the
// Worker tests do), and each browser sending the `Cf-Access-Jwt-Assertion`
// Access would add in front of it. No token is typed: the console asks
// GET /v1/whoami, names the identity in its header and shows only what its
// roles allow; an approver answers a gate, and the journal names them.
//
// This file starts its own `wrangler dev`, whatever scripts/e2e.mjs started
// for the other files.
import assert from "node:assert/strict";
import { createServer } from "node:http";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { exportJWK, generateKeyPair, SignJWT } from "jose";
import { chromium } from "playwright-core";
import { ensureChromium } from "../../scripts/lib/chromium.mjs";
import { repoRoot } from "../../scripts/lib/toolchain.mjs";
import { startWranglerDev } from "../../scripts/lib/wrangler-dev.mjs";
import { freshSigningKey, uid } from "./helpers.mjs";
import { client, until } from "./restart-kit.mjs";

const SCREENSHOTS = join(repoRoot, ".test-results", "screenshots");
const UI_TIMEOUT_MS = 30_000;
const TEAM = "trellis-e2e.cloudflareaccess.com";
const AUD = "0d6c5b4a39281706f5e4d3c2b1a09f8e7d6c5b4a39281706f5e4d3c2b1a09f8e";
const ROLES = { emails: { "support@example.com": ["reader"] }, groups: { finance: ["approver", "reader"] } };

/** @type {Awaited<ReturnType<typeof startWranglerDev>>} */
let dev;
/** @type {import("node:http").Server} */
let certs;
/** @type {import("playwright-core").Browser} */
let browser;
/** @type {CryptoKey} */
let privateKey;
const admin = `access-${uid("t")}`;

before(async () => {
  const pair = await generateKeyPair("RS256", { extractable: true });
  privateKey = pair.privateKey;
  const jwks = JSON.stringify({ keys: [{ ...(await exportJWK(pair.publicKey)), kid: "team-key", alg: "RS256" }] });
  certs = createServer((_request, response) =>
    response.writeHead(200, { "content-type": "application/json" }).end(jwks),
  );
  await new Promise((resolve) => certs.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = certs.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  dev = await startWranglerDev({
    vars: {
      API_TOKENS: admin,
      JOURNAL_SIGNING_KEY: freshSigningKey(),
      ACCESS_TEAM_DOMAIN: TEAM,
      ACCESS_AUD: AUD,
      ACCESS_ROLES: JSON.stringify(ROLES),
      ACCESS_CERTS_URL: `http://127.0.0.1:${port}/cdn-cgi/access/certs`,
    },
  });
  browser = await chromium.launch({ executablePath: await ensureChromium(), args: ["--no-sandbox"] });
  mkdirSync(SCREENSHOTS, { recursive: true });
});

after(async () => {
  await browser?.close();
  await dev?.stop();
  certs?.close();
});

/** The assertion Access adds for `email` in `groups`, signed by the team's key. */
function assertion(/** @type {string} */ email, /** @type {string[]} */ groups) {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ email, groups, type: "app" })
    .setProtectedHeader({ alg: "RS256", kid: "team-key" })
    .setIssuer(`https://${TEAM}`)
    .setAudience([AUD])
    .setIssuedAt(now - 10)
    .setExpirationTime(now + 600)
    .sign(privateKey);
}

/** A browser whose every request carries the identity's assertion, as it would behind Access. */
async function behindAccess(/** @type {string} */ email, /** @type {string[]} */ groups) {
  const context = await browser.newContext({
    viewport: { width: 1280, height: 900 },
    extraHTTPHeaders: { "cf-access-jwt-assertion": await assertion(email, groups) },
  });
  const page = await context.newPage();
  /** @type {string[]} */
  const problems = [];
  page.on("pageerror", (error) => problems.push(error.message));
  page.on("console", (message) => message.type() === "error" && problems.push(message.text()));
  return { context, page, problems };
}

/** A workflow whose one node waits at a human gate. */
function gated(/** @type {string} */ id) {
  const ask = {
    ref: "ask",
    action: {
      kind: "human",
      implementation: {
        prompt_template: "Pay the invoice?",
        input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
      },
    },
  };
  return { id, nodes: { pay: { task: { steps: [ask] } } } };
}

test("signs in through Cloudflare Access without a token, names the identity, shows what its roles allow, and an approver's answer is signed as theirs", async () => {
  const api = client(dev.url, admin);
  const id = uid("access-console");
  assert.equal((await api("POST", "/v1/definitions", { workflows: [gated(id)] })).status, 201);
  const runId = (await api("POST", `/v1/workflows/${id}/runs`, { input: {} })).json.run_id;
  await until("the gate to open", async () => (await api("GET", `/v1/runs/${runId}/gates`)).json?.gates?.length > 0);

  // A reader: signs in with one click, sees the run, no controls and no way to answer.
  const support = await behindAccess("support@example.com", []);
  await support.page.goto(`${dev.url}/`);
  await support.page.getByRole("button", { name: "Use Cloudflare Access" }).click();
  const whoami = support.page.locator("nav.top .whoami");
  await whoami.getByText("support@example.com (Access) · reader").waitFor({ timeout: UI_TIMEOUT_MS });
  await support.page.goto(`${dev.url}/runs/${runId}`);
  // The browser remembers the Access sign-in: this load asked for no token and showed no form.
  await whoami.getByText("support@example.com (Access)").waitFor({ timeout: UI_TIMEOUT_MS });
  const supportGate = support.page.locator('[data-gate="gate_1"]');
  await supportGate.getByText("You may not answer this gate.").waitFor({ timeout: UI_TIMEOUT_MS });
  assert.equal(await support.page.locator(".controls button").count(), 0);
  assert.deepEqual(support.problems, []);
  await support.context.close();

  // An approver by group: answers the gate from the console; the journal names them.
  const lead = await behindAccess("lead@example.com", ["finance"]);
  await lead.page.goto(`${dev.url}/`);
  await lead.page.getByRole("button", { name: "Use Cloudflare Access" }).click();
  await lead.page
    .locator("nav.top .whoami")
    .getByText("lead@example.com (Access) · approver, reader")
    .waitFor({ timeout: UI_TIMEOUT_MS });
  await lead.page.goto(`${dev.url}/runs/${runId}`);
  const leadGate = lead.page.locator('[data-gate="gate_1"]');
  await leadGate.getByLabel("ok").check();
  await leadGate.getByRole("button", { name: "Answer" }).click();
  await lead.page
    .locator('.verify[data-state="verified"]')
    .getByText("attested completed")
    .waitFor({ timeout: UI_TIMEOUT_MS });
  const answered = lead.page.locator("li.entry.kind-gate-answered .by");
  assert.equal(await answered.innerText(), "by Access user lead@example.com");
  // The approver holds no runner role: the finished run offers it no control (redrive, compensate) either.
  assert.equal(await lead.page.locator(".controls button").count(), 0);
  await lead.page.screenshot({ path: join(SCREENSHOTS, "access-approver.png"), fullPage: true });
  assert.deepEqual(lead.problems, []);
  await lead.context.close();

  const view = await api("GET", `/v1/runs/${runId}`);
  assert.deepEqual(view.json.gates[0].answered_by, { email: "lead@example.com" });

  // Without Access in front, the same button finds no identity and says so; the token form stays.
  const plain = await browser.newContext();
  const page = await plain.newPage();
  await page.goto(`${dev.url}/`);
  await page.getByRole("button", { name: "Use Cloudflare Access" }).click();
  await page.getByText("Cloudflare Access did not sign this browser in (401)").waitFor({ timeout: UI_TIMEOUT_MS });
  await page.getByLabel("API token").waitFor();
  await plain.close();
});
