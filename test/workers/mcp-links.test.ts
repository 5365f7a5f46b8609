import { env, exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import type { RunView } from "../../schemas/api.ts";
import type { Principal } from "../../schemas/auth.ts";
import { linkTtlMs, mayLinkForSelf, REPORT_LINK_TTL_MS, reportLinks } from "../../src/mcp/links.ts";
import { runResult } from "../../src/mcp/results.ts";
import { api, gateOpenOrSettled, journal, register, start, uniqueId, waitForRun } from "./helpers.ts";

/**
 * Approval links in the MCP server's "needs input" reports (src/mcp/links.ts):
 * a link for the caller itself, only where it could have made one over the
 * API, once per gate while it is live.
 */

const ORIGIN = "http://trellis.test";

function token(name: string, roles: Principal["roles"]): Principal {
  return { kind: "token", token_id: `tok_${name}`, name, roles, workflows: null, created_by: `token:tok_${name}` };
}

function person(email: string, roles: Principal["roles"]): Principal {
  return { kind: "access", email, groups: [], roles, workflows: null, created_by: `access:${email}` };
}

/** Registers a one-step workflow asking a gate (with these approvers), starts it and waits for the gate. */
async function openGate(approvers?: Record<string, unknown>): Promise<RunView> {
  const id = uniqueId("mcp-link");
  const implementation = {
    prompt_template: "Refund order 42?",
    input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
    ...(approvers ? { approvers } : {}),
  };
  const step = { ref: "ask", action: { kind: "human", implementation } };
  await register({ workflows: [{ id, nodes: { main: { task: { steps: [step] } } } }] });
  const runId = await start(id, { input: {} });
  return (await waitForRun(runId, gateOpenOrSettled)) as RunView;
}

async function linkEntries(runId: string): Promise<unknown[]> {
  return (await journal(runId)).filter((entry) => entry.kind === "gate.link_created").map((entry) => entry.body);
}

describe("approval links in needs-input reports", () => {
  it("makes the caller a link of the open gate once, for itself, that opens the gate's page", async ({ expect }) => {
    const view = await openGate();
    const gateId = view.gates[0]?.gate_id ?? "";
    const agent = token("agent", ["runner", "approver"]);
    const links = await reportLinks(env, view, agent, ORIGIN);
    const link = links[gateId];
    expect(link?.approver).toBe("agent");
    expect(link?.url).toMatch(new RegExp(`^${ORIGIN}/v1/links/${view.run_id}/lnk_[0-9a-f]{16}/[0-9a-f]{64}$`));
    const ttl = Date.parse(link?.expires_at ?? "") - Date.now();
    expect(ttl).toBeGreaterThan(REPORT_LINK_TTL_MS - 60_000);
    expect(ttl).toBeLessThanOrEqual(REPORT_LINK_TTL_MS);
    const page = await exports.default.fetch(link?.url ?? "");
    expect(page.status).toBe(200);
    expect(await page.text()).toContain("Refund order 42?");

    // A later report (a client polling trellis_wait_run) makes no second link while this one is live.
    const again = await reportLinks(env, view, agent, ORIGIN);
    expect(again[gateId]).toEqual({ url: null, approver: "agent", expires_at: link?.expires_at });
    // Another caller gets its own.
    const other = await reportLinks(env, view, token("other", ["approver"]), ORIGIN);
    expect(other[gateId]?.url).toMatch(/^http:\/\/trellis\.test\/v1\/links\//);
    const made = await linkEntries(view.run_id);
    expect(made).toHaveLength(2);
    expect(made[0]).toMatchObject({ gate_id: gateId, approver: "agent", by: { token_id: "tok_agent", name: "agent" } });

    const result = runResult(view, { origin: ORIGIN, outputSchema: undefined, waitedSeconds: 0, asked: [], links });
    expect(result.structuredContent).toMatchObject({
      needs_input: [{ gate_id: gateId, answer_with: "trellis_answer_gate", approval_link: link }],
    });
    expect(result.content[0]).toMatchObject({ text: expect.stringContaining(link?.url ?? "") });
  });

  it("makes none the caller could not make over the API, nor for a gate it may not answer", async ({ expect }) => {
    const open = await openGate();
    const reader = await reportLinks(env, open, token("reader", ["reader", "runner"]), ORIGIN);
    expect(reader).toEqual({});

    const byEmail = await openGate({ emails: ["ops@example.com"], roles: ["approver"] });
    const gate = byEmail.gates[0];
    if (gate === undefined) {
      throw new Error("no gate");
    }
    // The role lets a token answer, but a link answers as { link, approver }, matched by emails only.
    expect(mayLinkForSelf(gate, token("agent", ["approver"]))).toBe(false);
    expect(await reportLinks(env, byEmail, token("agent", ["approver"]), ORIGIN)).toEqual({});
    // An Access identity among the emails gets a link for its email; one not among them (no role) none.
    expect(await reportLinks(env, byEmail, person("eve@example.com", ["runner"]), ORIGIN)).toEqual({});
    const ops = await reportLinks(env, byEmail, person("OPS@example.com", ["approver"]), ORIGIN);
    expect(ops[gate.gate_id]).toMatchObject({
      approver: "OPS@example.com",
      url: expect.stringContaining("/v1/links/"),
    });
    expect(await linkEntries(byEmail.run_id)).toHaveLength(1);
  });

  it("leaves half of a gate's links to the API: reports make at most 10", async ({ expect }) => {
    const view = await openGate();
    const gateId = view.gates[0]?.gate_id ?? "";
    for (let i = 0; i < 10; i += 1) {
      const made = await reportLinks(env, view, token(`caller${i}`, ["approver"]), ORIGIN);
      expect(made[gateId]?.url).toMatch(/\/v1\/links\//);
    }
    expect(await reportLinks(env, view, token("caller10", ["approver"]), ORIGIN)).toEqual({});
    const byApi = await api("POST", `/v1/runs/${view.run_id}/gates/${gateId}/links`, { approver: "ops@example.com" });
    expect(byApi.status).toBe(201);
    expect(await linkEntries(view.run_id)).toHaveLength(11);
  });

  it("makes none for a run that ended, and bounds a link by the gate's own expiry", async ({ expect }) => {
    const view = await openGate();
    const gateId = view.gates[0]?.gate_id ?? "";
    expect((await api("POST", `/v1/runs/${view.run_id}/gates/${gateId}`, { response: { ok: true } })).status).toBe(200);
    const ended = (await waitForRun(view.run_id)) as RunView;
    expect(await reportLinks(env, ended, token("agent", ["approver"]), ORIGIN)).toEqual({});

    const now = Date.parse("2026-11-28T12:00:00Z");
    expect(linkTtlMs({ expires_at: null }, now)).toBe(REPORT_LINK_TTL_MS);
    expect(linkTtlMs({ expires_at: "2026-11-28T12:10:00Z" }, now)).toBe(600_000);
    expect(linkTtlMs({ expires_at: "2026-11-28T12:00:00.500Z" }, now)).toBeNull();
  });
});
