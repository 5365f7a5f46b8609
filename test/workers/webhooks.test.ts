import { runInDurableObject } from "cloudflare:test";
import { env, exports } from "cloudflare:workers";
import { afterEach, describe, it, vi } from "vitest";
import { HubStore } from "../../events/store.ts";
import { MAX_UNAUTHENTICATED_BODY_BYTES } from "../../lib/json-limits.ts";
import { receiveWebhook } from "../../src/webhooks.ts";
import { SCHEMES } from "../../webhooks/index.ts";
import { WEBHOOK_SECRETS } from "../secrets.ts";
import { api, detailsOf, journal, registerWorkflow, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Webhooks: `POST /v1/hooks/{id}` verifies a delivery by its scheme's
 * signature (no bearer token), refuses a bad or stale one with 401 and
 * nothing stored, and turns a verified one into an event, deduplicated by the
 * delivery's id. Standard Webhooks and GitHub are tested with their published
 * example signatures; Stripe publishes none, so its deliveries are signed
 * here with the documented scheme (`t=…,v1=HMAC-SHA256(t.body)`).
 */

const encoder = new TextEncoder();
const nowSeconds = () => Math.floor(Date.now() / 1000);

async function hmac(key: Uint8Array, message: string): Promise<Uint8Array> {
  const imported = await crypto.subtle.importKey("raw", new Uint8Array(key), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", imported, encoder.encode(message)));
}
const hex = (bytes: Uint8Array) => [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
const hmacHex = async (secret: string, message: string) => hex(await hmac(encoder.encode(secret), message));

/** A Standard Webhooks signature, computed from the specification (the secret's base64 after `whsec_` is the key). */
async function standardSignature(id: string, timestamp: number, body: string): Promise<string> {
  const key = Uint8Array.from(atob(WEBHOOK_SECRETS.WEBHOOK_STANDARD_SECRET.slice("whsec_".length)), (c) =>
    c.charCodeAt(0),
  );
  return `v1,${btoa(String.fromCharCode(...(await hmac(key, `${id}.${timestamp}.${body}`))))}`;
}

/** Sends a delivery as a provider would: no bearer token. */
async function deliver(hook: string, body: string | Uint8Array, headers: Record<string, string>) {
  const response = await exports.default.fetch(`http://trellis.test/v1/hooks/${hook}`, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body,
  });
  const text = await response.text();
  return { status: response.status, json: text ? JSON.parse(text) : null };
}

/** Registers a webhook whose events are named `name`, verified by `scheme` with the test secret `secret`. */
async function webhook(scheme: string, secret: keyof typeof WEBHOOK_SECRETS, extra: Record<string, unknown> = {}) {
  const id = uniqueId(scheme.replace(/[^a-z]/g, ""));
  const name = uniqueId(`hook.${scheme}`);
  const registered = await api("POST", "/v1/definitions", {
    webhooks: [{ id, verify: { scheme, secret: `$env:${secret}` }, event: { name }, ...extra }],
  });
  if (registered.status !== 201) {
    throw new Error(`registration failed: ${JSON.stringify(registered.json)}`);
  }
  return { id, name };
}

/** The events a name's hub stores (shard 0, which every event of the name reaches). */
function storedEvents(name: string): Promise<{ event_id: string; data: string; source: string | null }[]> {
  return runInDurableObject(env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name)), (_instance, state) =>
    state.storage.sql
      .exec<{ event_id: string; data: string; source: string | null }>("SELECT event_id, data, source FROM events")
      .toArray(),
  );
}

afterEach(() => {
  vi.restoreAllMocks();
});

describe("standard-webhooks deliveries", () => {
  const vector = {
    id: "msg_p5jXN8AQM9LWM0D4loKWxJek",
    timestamp: 1614265330,
    body: '{"test": 2432232314}',
    signature: "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=",
  };
  const vectorHeaders = (signature = vector.signature) =>
    new Headers({
      "webhook-id": vector.id,
      "webhook-timestamp": String(vector.timestamp),
      "webhook-signature": signature,
    });

  it("accept the specification's published example at the time it was signed, and refuse it tampered", async ({
    expect,
  }) => {
    const hook = await webhook("standard-webhooks", "WEBHOOK_STANDARD_SECRET");
    const at = vector.timestamp * 1000 + 10_000;
    const body = encoder.encode(vector.body);
    const accepted = await receiveWebhook(env, hook.id, { body, headers: vectorHeaders() }, at);
    expect(accepted).toEqual({ events: [{ event_id: vector.id, duplicate: false }] });
    const tampered = encoder.encode('{"test": 2432232315}');
    await expect(receiveWebhook(env, hook.id, { body: tampered, headers: vectorHeaders() }, at)).rejects.toMatchObject({
      code: "webhook.invalid_signature",
    });
    const stored = await storedEvents(hook.name);
    expect(stored.map((event) => [event.event_id, JSON.parse(event.data), JSON.parse(event.source ?? "null")])).toEqual(
      [[vector.id, { test: 2432232314 }, { kind: "webhook", webhook: hook.id }]],
    );
  });

  it("refuse the published example now, as stale, with 401 and nothing stored", async ({ expect }) => {
    const hook = await webhook("standard-webhooks", "WEBHOOK_STANDARD_SECRET");
    const refused = await deliver(hook.id, vector.body, Object.fromEntries(vectorHeaders()));
    expect(refused.status).toBe(401);
    expect(refused.json.error.code).toBe("webhook.stale");
    expect(await storedEvents(hook.name)).toEqual([]);
  });

  it("accept a fresh delivery once: its replay is a duplicate and stores nothing more", async ({ expect }) => {
    const hook = await webhook("standard-webhooks", "WEBHOOK_STANDARD_SECRET");
    const id = uniqueId("msg");
    const timestamp = nowSeconds();
    const body = JSON.stringify({ type: "invoice.paid", amount: 12 });
    const headers = {
      "webhook-id": id,
      "webhook-timestamp": String(timestamp),
      // Several signatures (a rotated secret): any one that matches verifies the delivery.
      "webhook-signature": `v1,${btoa("x".repeat(32))} ${await standardSignature(id, timestamp, body)}`,
    };
    const first = await deliver(hook.id, body, headers);
    expect(first).toEqual({ status: 202, json: { events: [{ event_id: id, duplicate: false }] } });
    const replayed = await deliver(hook.id, body, headers);
    expect(replayed).toEqual({ status: 202, json: { events: [{ event_id: id, duplicate: true }] } });
    expect((await storedEvents(hook.name)).map((event) => JSON.parse(event.data))).toEqual([
      { type: "invoice.paid", amount: 12 },
    ]);
  });

  it("refuse a wrong signature and a missing header with 401 and nothing stored", async ({ expect }) => {
    const hook = await webhook("standard-webhooks", "WEBHOOK_STANDARD_SECRET");
    const timestamp = nowSeconds();
    const body = '{"a":1}';
    const signature = await standardSignature("msg_other", timestamp, body);
    const wrong = await deliver(hook.id, body, {
      "webhook-id": "msg_1",
      "webhook-timestamp": String(timestamp),
      "webhook-signature": signature,
    });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe("webhook.invalid_signature");
    const missing = await deliver(hook.id, body, { "webhook-id": "msg_1", "webhook-signature": signature });
    expect(missing.status).toBe(401);
    expect(missing.json.error.code).toBe("webhook.missing_signature");
    expect(await storedEvents(hook.name)).toEqual([]);
  });
});

describe("github deliveries", () => {
  const githubHeaders = async (body: string, delivery: string) => ({
    "x-hub-signature-256": `sha256=${await hmacHex(WEBHOOK_SECRETS.WEBHOOK_GITHUB_SECRET, body)}`,
    "x-github-delivery": delivery,
    "x-github-event": "pull_request",
  });

  it("accept GitHub's published example signature", async ({ expect }) => {
    const hook = await webhook("github", "WEBHOOK_GITHUB_SECRET");
    const published = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    const delivery = uniqueId("gh");
    const accepted = await deliver(hook.id, "Hello, World!", {
      "x-hub-signature-256": published,
      "x-github-delivery": delivery,
    });
    expect(accepted).toEqual({ status: 202, json: { events: [{ event_id: delivery, duplicate: false }] } });
    // A body that is not JSON is the event's data as text.
    expect((await storedEvents(hook.name)).map((event) => JSON.parse(event.data))).toEqual(["Hello, World!"]);
  });

  it("accept a delivery once by X-GitHub-Delivery, and refuse a wrong or missing signature", async ({ expect }) => {
    const hook = await webhook("github", "WEBHOOK_GITHUB_SECRET");
    const body = JSON.stringify({ action: "opened", number: 7 });
    const headers = await githubHeaders(body, uniqueId("gh"));
    expect((await deliver(hook.id, body, headers)).json.events[0].duplicate).toBe(false);
    expect((await deliver(hook.id, body, headers)).json.events[0].duplicate).toBe(true);
    const forged = await deliver(hook.id, JSON.stringify({ action: "closed", number: 7 }), {
      ...headers,
      "x-github-delivery": uniqueId("gh"),
    });
    expect(forged.status).toBe(401);
    expect(forged.json.error.code).toBe("webhook.invalid_signature");
    const unsigned = await deliver(hook.id, body, { "x-github-delivery": uniqueId("gh") });
    expect(unsigned.status).toBe(401);
    expect(unsigned.json.error.code).toBe("webhook.missing_signature");
    expect((await storedEvents(hook.name)).map((event) => JSON.parse(event.data))).toEqual([
      { action: "opened", number: 7 },
    ]);
  });

  it("verify with the library as GitHub documents it, and refuse a malformed header", async ({ expect }) => {
    const secret = WEBHOOK_SECRETS.WEBHOOK_GITHUB_SECRET;
    const options = { secret, toleranceMs: 300_000, now: Date.now() };
    const delivery = (signature: string) => ({
      body: encoder.encode("Hello, World!"),
      headers: new Headers({ "x-hub-signature-256": signature }),
    });
    const published = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17";
    await expect(SCHEMES.github.verify(delivery(published), options)).resolves.toBeUndefined();
    // The same hex without its prefix, or with a character that is not hex, is not the documented form.
    for (const malformed of [published.slice("sha256=".length), `${published.slice(0, -1)}z`]) {
      await expect(SCHEMES.github.verify(delivery(malformed), options)).rejects.toMatchObject({
        code: "webhook.invalid_signature",
      });
    }
  });
});

describe("stripe deliveries", () => {
  const stripeHeader = async (body: string, timestamp: number) =>
    `t=${timestamp},v1=${await hmacHex(WEBHOOK_SECRETS.WEBHOOK_STRIPE_SECRET, `${timestamp}.${body}`)},v0=${"0".repeat(64)}`;
  const event = (id: string) => JSON.stringify({ id, object: "event", type: "checkout.session.completed" });

  it("accept a delivery signed as Stripe documents, once by the event's id", async ({ expect }) => {
    const hook = await webhook("stripe", "WEBHOOK_STRIPE_SECRET");
    const id = uniqueId("evt");
    const body = event(id);
    const first = await deliver(hook.id, body, { "stripe-signature": await stripeHeader(body, nowSeconds()) });
    expect(first).toEqual({ status: 202, json: { events: [{ event_id: id, duplicate: false }] } });
    // Stripe retries a delivery with a new timestamp and signature: the event id makes it a duplicate.
    const retried = await deliver(hook.id, body, { "stripe-signature": await stripeHeader(body, nowSeconds() - 5) });
    expect(retried).toEqual({ status: 202, json: { events: [{ event_id: id, duplicate: true }] } });
    expect(await storedEvents(hook.name)).toHaveLength(1);
  });

  it("refuse a wrong signature, and a stale one, with 401 and nothing stored", async ({ expect }) => {
    const hook = await webhook("stripe", "WEBHOOK_STRIPE_SECRET");
    const body = event(uniqueId("evt"));
    const header = await stripeHeader(body, nowSeconds());
    const wrong = await deliver(hook.id, event(uniqueId("evt")), { "stripe-signature": header });
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe("webhook.invalid_signature");
    const stale = await deliver(hook.id, body, { "stripe-signature": await stripeHeader(body, nowSeconds() - 301) });
    expect(stale.status).toBe(401);
    expect(stale.json.error.code).toBe("webhook.stale");
    expect(await storedEvents(hook.name)).toEqual([]);
  });

  it("take a tolerance_ms of the webhook's own", async ({ expect }) => {
    const hook = await webhook("stripe", "WEBHOOK_STRIPE_SECRET", {});
    const wide = uniqueId("stripe-wide");
    await api("POST", "/v1/definitions", {
      webhooks: [
        {
          id: wide,
          verify: { scheme: "stripe", secret: "$env:WEBHOOK_STRIPE_SECRET", tolerance_ms: 900_000 },
          event: { name: hook.name },
        },
      ],
    });
    const body = event(uniqueId("evt"));
    const header = await stripeHeader(body, nowSeconds() - 600);
    expect((await deliver(hook.id, body, { "stripe-signature": header })).status).toBe(401);
    expect((await deliver(wide, body, { "stripe-signature": header })).status).toBe(202);
  });
});

describe("hmac-sha256 deliveries", () => {
  const secret = WEBHOOK_SECRETS.WEBHOOK_HMAC_SECRET;

  it("accept X-Signature over the body, once: a replay of the same signed delivery is a duplicate", async ({
    expect,
  }) => {
    const hook = await webhook("hmac-sha256", "WEBHOOK_HMAC_SECRET");
    const body = JSON.stringify({ build: uniqueId("b"), ok: true });
    const headers = { "x-signature": `sha256=${await hmacHex(secret, body)}` };
    const first = await deliver(hook.id, body, headers);
    expect(first.status).toBe(202);
    expect(first.json.events[0]).toEqual({ event_id: await hmacHex(secret, body), duplicate: false });
    expect((await deliver(hook.id, body, headers)).json.events[0].duplicate).toBe(true);
    expect(await storedEvents(hook.name)).toHaveLength(1);
  });

  it("check X-Signature-Timestamp when sent: signed with the body, and within the tolerance", async ({ expect }) => {
    const hook = await webhook("hmac-sha256", "WEBHOOK_HMAC_SECRET");
    const body = JSON.stringify({ n: 1 });
    const signed = async (timestamp: number) => ({
      "x-signature": `sha256=${await hmacHex(secret, `${timestamp}.${body}`)}`,
      "x-signature-timestamp": String(timestamp),
    });
    expect((await deliver(hook.id, body, await signed(nowSeconds()))).status).toBe(202);
    const stale = await deliver(hook.id, body, await signed(nowSeconds() - 600));
    expect(stale.status).toBe(401);
    expect(stale.json.error.code).toBe("webhook.stale");
    // The timestamp is signed: moving it forward breaks the signature.
    const moved = { ...(await signed(nowSeconds() - 600)), "x-signature-timestamp": String(nowSeconds()) };
    const forged = await deliver(hook.id, body, moved);
    expect(forged.status).toBe(401);
    expect(forged.json.error.code).toBe("webhook.invalid_signature");
    expect(await storedEvents(hook.name)).toHaveLength(1);
  });
});

describe("a webhook's events and triggers", () => {
  it("start the workflows triggered by the event's name, each run's trigger naming the webhook", async ({ expect }) => {
    const hook = await webhook("hmac-sha256", "WEBHOOK_HMAC_SECRET");
    const workflow = uniqueId("on-hook");
    const step = {
      ref: "seen",
      action: { kind: "context", implementation: { updates: [{ path: "pr", expr: "input.pr" }] } },
    };
    const registered = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id: workflow,
          triggers: [{ event: hook.name, input: { pr: "$.data.pr" } }],
          nodes: { only: { task: { steps: [step] } } },
        },
      ],
    });
    expect(registered.status, JSON.stringify(registered.json)).toBe(201);
    const body = JSON.stringify({ pr: 42 });
    const secret = WEBHOOK_SECRETS.WEBHOOK_HMAC_SECRET;
    const delivered = await deliver(hook.id, body, { "x-signature": `sha256=${await hmacHex(secret, body)}` });
    expect(delivered.status).toBe(202);
    const eventId = delivered.json.events[0].event_id;
    const listed = await vi.waitUntil(
      async () => {
        const page = await api("GET", `/v1/runs?trigger=webhook&workflow=${workflow}`);
        return page.json.runs.length > 0 ? page : undefined;
      },
      { timeout: 10_000, interval: 50 },
    );
    const run = await waitForRun(listed.json.runs[0].run_id);
    expect(run.trigger).toEqual({ kind: "webhook", webhook: hook.id, event_id: eventId, name: hook.name });
    expect(run.input).toEqual({ pr: 42 });
    expect(listed.json.runs[0].created_by).toBe(`webhook:${hook.id}`);
  });
});

describe("the hooks route", () => {
  const signedGitHub = async (body: string) => ({
    "x-hub-signature-256": `sha256=${await hmacHex(WEBHOOK_SECRETS.WEBHOOK_GITHUB_SECRET, body)}`,
    "x-github-delivery": uniqueId("gh"),
  });

  it("needs no token, while every other route still does; an unknown hook is 404", async ({ expect }) => {
    const unknown = await deliver("no-such-hook", "{}", {});
    expect(unknown.status).toBe(404);
    expect(unknown.json.error.code).toBe("webhook.not_found");
    expect((await deliver("Not An Id", "{}", {})).status).toBe(404);
    expect((await api("POST", "/v1/events", { name: "x" }, null)).status).toBe(401);
    expect((await api("GET", "/v1/hooks/x", undefined, null)).status).toBe(401);
  });

  it("answer 413 to a body over the cap, before verifying or storing anything", async ({ expect }) => {
    const hook = await webhook("github", "WEBHOOK_GITHUB_SECRET");
    const body = `"${"a".repeat(MAX_UNAUTHENTICATED_BODY_BYTES)}"`;
    const refused = await deliver(hook.id, body, await signedGitHub(body));
    expect(refused.status).toBe(413);
    expect(refused.json.error.code).toBe("request.too_large");
    expect(await storedEvents(hook.name)).toEqual([]);
  });

  it("resume a run waiting in an event step for the webhook's event", async ({ expect }) => {
    const hook = await webhook("github", "WEBHOOK_GITHUB_SECRET");
    const workflow = uniqueId("await-hook");
    await registerWorkflow({
      id: workflow,
      nodes: {
        only: {
          task: {
            steps: [
              {
                ref: "wait",
                action: { kind: "event", implementation: { name: hook.name, match: "event.data.number == 7" } },
                output_mapping: { "output.got": "$" },
              },
            ],
          },
          output_mapping: { "output.got": "$.got" },
        },
      },
    });
    const runId = await start(workflow);
    await waitForRun(runId, (run) => run.waiting_for?.some((wait: { kind: string }) => wait.kind === "event"));
    const body = JSON.stringify({ action: "opened", number: 7 });
    const headers = await signedGitHub(body);
    expect((await deliver(hook.id, body, headers)).status).toBe(202);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output.got).toMatchObject({
      event_id: headers["x-github-delivery"],
      name: hook.name,
      data: { action: "opened", number: 7 },
    });
  });

  it("build the event's name, id and data from mappings over headers and body", async ({ expect }) => {
    const id = uniqueId("mapped");
    const prefix = uniqueId("gh");
    const registered = await api("POST", "/v1/definitions", {
      webhooks: [
        {
          id,
          verify: { scheme: "github", secret: "$env:WEBHOOK_GITHUB_SECRET" },
          event: {
            name: { template: `${prefix}.{{headers.[x-github-event]}}` },
            id: { expr: "'pr-' + string(body.number) + '-' + body.action" },
            data: { pr: "$.body.number", repo: { path: "$.body.repository.full_name", default: "unknown" } },
          },
        },
      ],
    });
    expect(registered.status).toBe(201);
    const body = JSON.stringify({ action: "opened", number: 42 });
    const headers = { ...(await signedGitHub(body)), "x-github-event": "pull_request" };
    const accepted = await deliver(id, body, headers);
    expect(accepted.json).toEqual({ events: [{ event_id: "pr-42-opened", duplicate: false }] });
    const stored = await storedEvents(`${prefix}.pull_request`);
    expect(stored.map((event) => JSON.parse(event.data))).toEqual([{ pr: 42, repo: "unknown" }]);
    // A delivery the mapping cannot make an event of is refused, after verification, and stores nothing.
    const push = JSON.stringify({ ref: "main" });
    const unmapped = await deliver(id, push, { ...(await signedGitHub(push)), "x-github-event": "push" });
    expect(unmapped.status).toBe(400);
    expect(unmapped.json.error.code).toBe("webhook.invalid_event");
    expect(await storedEvents(`${prefix}.push`)).toEqual([]);
  });

  it("answer 500 when the deployment does not set the webhook's secret", async ({ expect }) => {
    const id = uniqueId("unset");
    await api("POST", "/v1/definitions", {
      webhooks: [{ id, verify: { scheme: "github", secret: "$env:UNSET_SECRET" }, event: { name: "x" } }],
    });
    vi.spyOn(console, "error").mockImplementation(() => undefined);
    const refused = await deliver(id, "{}", { "x-hub-signature-256": `sha256=${"0".repeat(64)}` });
    expect(refused.status).toBe(500);
    expect(refused.json.error.code).toBe("webhook.misconfigured");
  });
});

describe("webhook secrets", () => {
  it("never appear in answers, logs, events or journals", async ({ expect }) => {
    const lines: string[] = [];
    for (const method of ["log", "info", "warn", "error", "debug"] as const) {
      vi.spyOn(console, method).mockImplementation((...args: unknown[]) => {
        lines.push(args.map(String).join(" "));
      });
    }
    const hook = await webhook("stripe", "WEBHOOK_STRIPE_SECRET");
    const workflow = uniqueId("await-stripe");
    await registerWorkflow({
      id: workflow,
      nodes: {
        only: { task: { steps: [{ ref: "wait", action: { kind: "event", implementation: { name: hook.name } } }] } },
      },
    });
    const runId = await start(workflow);
    await waitForRun(runId, (run) => run.waiting_for?.some((wait: { kind: string }) => wait.kind === "event"));
    const body = JSON.stringify({ id: uniqueId("evt") });
    const timestamp = nowSeconds();
    const good = `t=${timestamp},v1=${await hmacHex(WEBHOOK_SECRETS.WEBHOOK_STRIPE_SECRET, `${timestamp}.${body}`)}`;
    const answers = [
      await deliver(hook.id, body, { "stripe-signature": `t=${timestamp},v1=${"0".repeat(64)}` }),
      await deliver(hook.id, body, { "stripe-signature": good }),
    ];
    expect(answers.map((answer) => answer.status)).toEqual([401, 202]);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(lines.some((line) => line.includes("webhook delivery refused"))).toBe(true);
    const everything = JSON.stringify([answers, lines, await storedEvents(hook.name), run, await journal(runId)]);
    for (const secret of Object.values(WEBHOOK_SECRETS)) {
      expect(everything).not.toContain(secret);
    }
  });
});

describe("registering webhooks", () => {
  it("refuses a literal secret, a tolerance GitHub cannot check and event fields that cannot work, with paths", async ({
    expect,
  }) => {
    const refused = await api("POST", "/v1/definitions", {
      webhooks: [
        { id: uniqueId("a"), verify: { scheme: "github", secret: "It's a Secret to Everybody" }, event: { name: "x" } },
        {
          id: uniqueId("b"),
          verify: { scheme: "github", secret: "$env:WEBHOOK_GITHUB_SECRET", tolerance_ms: 60_000 },
          event: { name: 7, id: { expr: "body.id +" }, data: { who: { expr: "input.user" } } },
        },
        { id: uniqueId("c"), verify: { scheme: "stripe", secret: "$env:API_TOKENS" }, event: { name: "x" } },
        { id: uniqueId("d"), verify: { scheme: "svix", secret: "$env:WEBHOOK_HMAC_SECRET" }, event: { name: "x" } },
      ],
    });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("definition.invalid");
    const paths = detailsOf(refused.json).map((detail) => detail.path);
    expect(paths).toEqual(expect.arrayContaining(["webhooks.3.verify.scheme"]));
    const checked = await api("POST", "/v1/definitions", {
      webhooks: [
        { id: uniqueId("a"), verify: { scheme: "github", secret: "It's a Secret to Everybody" }, event: { name: "x" } },
        {
          id: uniqueId("b"),
          verify: { scheme: "github", secret: "$env:WEBHOOK_GITHUB_SECRET", tolerance_ms: 60_000 },
          event: { name: 7, id: { expr: "body.id +" }, data: { who: { expr: "input.user" } } },
        },
        { id: uniqueId("c"), verify: { scheme: "stripe", secret: "$env:API_TOKENS" }, event: { name: "x" } },
      ],
    });
    expect(checked.status).toBe(400);
    expect(detailsOf(checked.json).map((detail) => detail.path)).toEqual(
      expect.arrayContaining([
        "webhooks.0.verify.secret",
        "webhooks.1.verify.tolerance_ms",
        "webhooks.1.event.name",
        "webhooks.1.event.id.expr",
        "webhooks.1.event.data.who.expr",
        "webhooks.2.verify.secret",
      ]),
    );
    expect(JSON.stringify(checked.json)).not.toContain("It's a Secret to Everybody");
  });

  it("stores a webhook as a versioned definition, readable and listed like the others", async ({ expect }) => {
    const hook = await webhook("hmac-sha256", "WEBHOOK_HMAC_SECRET");
    const read = await api("GET", `/v1/webhooks/${hook.id}`);
    expect(read.status).toBe(200);
    expect(read.json).toMatchObject({ kind: "webhooks", id: hook.id, version: 1 });
    expect(read.json.definition.verify.secret).toBe("$env:WEBHOOK_HMAC_SECRET");
    const listed = await api("GET", "/v1/webhooks?limit=100");
    expect(listed.status).toBe(200);
  });
});

describe("the source of an event", () => {
  it("cannot be given by a client of POST /v1/events: only a verified delivery has one", async ({ expect }) => {
    const name = uniqueId("spoof");
    const sent = await api("POST", "/v1/events", { name, source: { kind: "webhook", webhook: "github-prs" } });
    expect(sent.status).toBe(400);
    expect(detailsOf(sent.json).map((detail) => detail.path)).toEqual(["source"]);
    expect(await storedEvents(name)).toEqual([]);
  });

  it("is kept by a hub whose table predates it: the column is added, its old events read without one", async ({
    expect,
  }) => {
    const name = uniqueId("old-hub");
    const records = await runInDurableObject(env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name)), (_instance, state) => {
      const sql = state.storage.sql;
      sql.exec("DROP TABLE events");
      sql.exec(`CREATE TABLE events (
        seq INTEGER PRIMARY KEY, event_id TEXT NOT NULL, name TEXT NOT NULL,
        data TEXT NOT NULL, received_at INTEGER NOT NULL, UNIQUE (name, event_id))`);
      sql.exec("INSERT INTO events (event_id, name, data, received_at) VALUES ('old', ?, '1', ?)", name, Date.now());
      const store = new HubStore(sql);
      const source = { kind: "webhook" as const, webhook: "gh" };
      store.insertEvent({ event_id: "new", name, data: 2, received_at: Date.now(), source });
      return [...store.eventsSince([name], 0, Date.now())].map((event) => event.record);
    });
    expect(records.map(({ event_id, source }) => ({ event_id, source }))).toEqual([
      { event_id: "old", source: undefined },
      { event_id: "new", source: { kind: "webhook", webhook: "gh" } },
    ]);
  });
});
