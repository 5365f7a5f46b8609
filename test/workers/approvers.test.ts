import { exports } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import { createApp } from "../../src/app.ts";
import { accessEnv, assertion, makeKey, serveKeys } from "./access-keys.ts";
import { api, gateOpenOrSettled, journal, register, start, uniqueId, verified, waitForRun } from "./helpers.ts";

/** Verified approvers and approval links (docs/definitions.md, "Verified approvers"; docs/api.md, "Approval links"). */

const humanStep = (approvers?: Record<string, unknown>) => ({
  ref: "ask",
  action: {
    kind: "human",
    implementation: {
      prompt_template: "Ship release {{version}}?",
      input_schema: {
        type: "object",
        required: ["ok"],
        properties: {
          ok: { type: "boolean" },
          channel: { type: "string", enum: ["stable", "beta"] },
          count: { type: "integer" },
        },
      },
      ...(approvers ? { approvers } : {}),
    },
  },
  output_mapping: { "output.answer": "$.response" },
});

const riskyStep = (approvers: Record<string, unknown>) => ({
  ref: "pay",
  action: {
    kind: "context",
    risk: "high",
    approvers,
    implementation: { updates: [{ path: "paid", expr: "true" }] },
  },
});

/** Registers a one-step workflow, starts it and waits for its gate; answers the run id and the gate. */
async function openGate(step: unknown): Promise<{ runId: string; gate: Record<string, any> }> {
  const id = uniqueId("approvers");
  await register({ workflows: [{ id, nodes: { main: { task: { steps: [step] } } } }] });
  const runId = await start(id, { input: { version: "1.2" } });
  const run = await waitForRun(runId, gateOpenOrSettled);
  return { runId, gate: run.gates[0] };
}

/** The body of the run's first journal entry of `kind`. */
async function bodyOf(runId: string, kind: string): Promise<Record<string, unknown> | undefined> {
  return (await journal(runId)).find((entry) => entry.kind === kind)?.body as Record<string, unknown> | undefined;
}

describe("verified approvers", () => {
  it("refuses an answer from a caller the gate's approvers do not name, with 403 naming who may answer", async ({
    expect,
  }) => {
    const { runId, gate } = await openGate(humanStep({ tokens: ["release-bot"], emails: ["ops@example.com"] }));
    expect(gate.approvers).toEqual({ tokens: ["release-bot"], emails: ["ops@example.com"] });
    // An API_TOKENS token is an admin, yet not one of the tokens or emails named.
    const refused = await api("POST", `/v1/runs/${runId}/gates/${gate.gate_id}`, { response: { ok: true } });
    expect(refused.status).toBe(403);
    expect(refused.json.error).toEqual({
      code: "auth.forbidden",
      message: `gate ${gate.gate_id} may be answered only by tokens release-bot; emails ops@example.com`,
    });
    expect((await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0].status).toBe("open");
    await api("POST", `/v1/runs/${runId}/cancel`);
  });

  it("records a matching token as answered_by and keeps responder as its note, in the gate and the signed journal", async ({
    expect,
  }) => {
    const { runId, gate } = await openGate(humanStep({ tokens: ["API_TOKENS"] }));
    const answer = { response: { ok: true }, responder: "ops@example.com, on call" };
    const answered = await api("POST", `/v1/runs/${runId}/gates/${gate.gate_id}`, answer);
    expect(answered.status).toBe(200);
    expect(answered.json).toMatchObject({
      status: "answered",
      responder: "ops@example.com, on call",
      answered_by: { token_id: expect.stringMatching(/^env:[0-9a-f]{16}$/), name: "API_TOKENS" },
    });
    expect((await waitForRun(runId)).status).toBe("completed");
    expect(await bodyOf(runId, "gate.answered")).toMatchObject({
      responder: "ops@example.com, on call",
      by: answered.json.answered_by,
    });
    expect(await verified(runId)).toBe(true);
  });

  it("lets a Cloudflare Access identity named in emails answer a high-risk action's approval", async ({ expect }) => {
    const key = await makeKey("approvers-key");
    const app = createApp();
    const accessed = accessEnv(await serveKeys([key]));
    const { runId, gate } = await openGate(riskyStep({ emails: ["ops@example.com"] }));
    expect(gate).toMatchObject({ kind: "approval", approvers: { emails: ["ops@example.com"] } });
    const answer = async (email: string) =>
      app.request(
        `/v1/runs/${runId}/gates/${gate.gate_id}`,
        {
          method: "POST",
          headers: {
            "content-type": "application/json",
            "cf-access-jwt-assertion": await assertion(key, { email, groups: ["eng"] }),
          },
          body: JSON.stringify({ response: { approved: true, reason: "budgeted" } }),
        },
        accessed,
      );
    // dev@ holds the role approver (through its group eng) but is not one of this gate's approvers.
    const refused = await answer("dev@example.com");
    expect(refused.status).toBe(403);
    expect(await refused.json()).toMatchObject({
      error: { message: expect.stringContaining("emails ops@example.com") },
    });
    const granted = await answer("ops@example.com");
    expect(granted.status).toBe(200);
    expect(((await granted.json()) as { answered_by: unknown }).answered_by).toEqual({ email: "ops@example.com" });
    expect((await waitForRun(runId)).status).toBe("completed");
    expect(await bodyOf(runId, "approval.granted")).toMatchObject({ by: { email: "ops@example.com" } });
    expect(await verified(runId)).toBe(true);
  });

  it("refuses approvers on an action that is not high-risk when it is registered", async ({ expect }) => {
    const step = { ...riskyStep({ emails: ["ops@example.com"] }) };
    const action = { ...step.action, risk: "low" };
    const response = await api("POST", "/v1/definitions", {
      workflows: [{ id: uniqueId("lowrisk"), nodes: { main: { task: { steps: [{ ...step, action }] } } } }],
    });
    expect(response.status).toBe(400);
    expect(response.json.error.details).toEqual([
      expect.objectContaining({
        path: "workflows.0.nodes.main.task.steps.0.action.approvers",
        code: "definition.invalid_approvers",
      }),
    ]);
  });
});

/** A link's page or form answer: its status and HTML. */
async function visit(url: string, form?: Record<string, string>): Promise<{ status: number; html: string }> {
  const path = new URL(url).pathname;
  const init = form
    ? {
        method: "POST",
        headers: { "content-type": "application/x-www-form-urlencoded" },
        body: new URLSearchParams(form).toString(),
      }
    : {};
  const response = await exports.default.fetch(`http://trellis.test${path}`, init);
  return { status: response.status, html: await response.text() };
}

describe("approval links", () => {
  it("shows the gate on GET without deciding, answers once on POST as the link's approver, then is 409", async ({
    expect,
  }) => {
    const { runId, gate } = await openGate(riskyStep({ emails: ["ops@example.com"] }));
    const links = `/v1/runs/${runId}/gates/${gate.gate_id}/links`;
    const stranger = await api("POST", links, { approver: "eve@example.com" });
    expect(stranger.status).toBe(403);
    expect(stranger.json.error.code).toBe("auth.forbidden");
    const made = await api("POST", links, { approver: "ops@example.com" });
    expect(made.status).toBe(201);
    expect(made.json.url).toMatch(
      /^http:\/\/trellis\.test\/v1\/links\/run_[0-9a-f]{32}\/lnk_[0-9a-f]{16}\/[0-9a-f]{64}$/,
    );
    expect(Date.parse(made.json.expires_at) - Date.now()).toBeGreaterThan(23 * 3_600_000);

    // A GET (a mail scanner's prefetch, or the approver reading) decides nothing.
    for (let i = 0; i < 2; i += 1) {
      const page = await visit(made.json.url);
      expect(page.status).toBe(200);
      expect(page.html).toContain("wants to run the high-risk context action");
      expect(page.html).toContain('<input type="radio" name="decision" value="approve" required>');
      expect(page.html).not.toContain("<script");
    }
    expect((await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0].status).toBe("open");

    const posted = await visit(made.json.url, { decision: "approve", reason: "looks right", note: "from my phone" });
    expect(posted.status).toBe(200);
    expect(posted.html).toContain("Answer recorded");
    const answered = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0];
    expect(answered).toMatchObject({
      status: "answered",
      response: { approved: true, reason: "looks right" },
      responder: "from my phone",
      answered_by: { link: made.json.link_id, approver: "ops@example.com" },
    });
    expect(answered).not.toHaveProperty("links");

    const again = await visit(made.json.url, { decision: "reject" });
    expect(again.status).toBe(409);
    expect(again.html).toContain("link.used");
    expect((await visit(made.json.url)).status).toBe(409);
    expect((await waitForRun(runId)).status).toBe("completed");
    expect(await bodyOf(runId, "approval.granted")).toMatchObject({
      by: { link: made.json.link_id, approver: "ops@example.com" },
    });
    const text = JSON.stringify(await journal(runId));
    expect(text).not.toContain(new URL(made.json.url).pathname.split("/").at(-1));
    expect(await verified(runId)).toBe(true);
  });

  it("is 410 past its expiry, 409 once its gate is answered otherwise, and 404 with another secret", async ({
    expect,
  }) => {
    const { runId, gate } = await openGate(humanStep());
    const links = `/v1/runs/${runId}/gates/${gate.gate_id}/links`;
    const short = (await api("POST", links, { approver: "ops@example.com", expires_in_ms: 1_000 })).json;
    const long = (await api("POST", links, { approver: "Release manager" })).json;
    const forged = long.url.replace(/[0-9a-f]{64}$/, "0".repeat(64));
    expect((await visit(forged)).status).toBe(404);
    await vi.waitUntil(async () => (await visit(short.url)).status === 410, { timeout: 5_000, interval: 200 });
    expect((await visit(short.url, { "f.ok": "true" })).status).toBe(410);

    // An input gate's form is built from its schema: a checkbox, a choice, a number.
    const page = await visit(long.url);
    expect(page.html).toContain('<input type="checkbox" name="f.ok" value="true">');
    expect(page.html).toContain('<select name="f.channel"><option value=""></option><option>stable</option>');
    expect(page.html).toContain('<input type="number" step="1" name="f.count">');
    const wrong = await visit(long.url, { "f.ok": "true", "f.count": "1.5" });
    expect(wrong.status).toBe(400);
    expect(wrong.html).toContain("gate.invalid_response");

    expect((await api("POST", `/v1/runs/${runId}/gates/${gate.gate_id}`, { response: { ok: false } })).status).toBe(
      200,
    );
    const closed = await visit(long.url, { "f.ok": "true" });
    expect(closed.status).toBe(409);
    expect(closed.html).toContain("gate.answered");
    expect((await waitForRun(runId)).status).toBe("completed");
  });

  it("answers an input gate from its form fields, leaving out empty optional ones; a gate keeps 20 links", async ({
    expect,
  }) => {
    const { runId, gate } = await openGate(humanStep());
    const links = `/v1/runs/${runId}/gates/${gate.gate_id}/links`;
    const made = (await api("POST", links, { approver: "Release manager" })).json;
    for (let i = 1; i < 20; i += 1) {
      expect((await api("POST", links, { approver: `helper ${i}` })).status).toBe(201);
    }
    const full = await api("POST", links, { approver: "one too many" });
    expect(full.status).toBe(409);
    expect(full.json.error.code).toBe("gate.too_many_links");
    const posted = await visit(made.url, { "f.ok": "true", "f.channel": "beta", "f.count": "" });
    expect(posted.status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.gates[0]).toMatchObject({
      response: { ok: true, channel: "beta" },
      answered_by: { link: made.link_id, approver: "Release manager" },
    });
  });
});
