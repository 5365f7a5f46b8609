import { exports } from "cloudflare:workers";
import { beforeAll, describe, it } from "vitest";
import { ROLES, type Principal, type Role } from "../../schemas/auth.ts";
import { accessOf, authorize, globMatches } from "../../src/access.ts";
import { API_ROUTES, type Grant, type RouteRole } from "../../src/contracts/routes.ts";
import { TrellisApi } from "../../src/rpc.ts";
import { api, uniqueId, waitForRun } from "./helpers.ts";

/**
 * One table drives the checks (src/contracts/routes.ts): every route of the
 * API is tried with a token of each role, with an admin of API_TOKENS, and
 * with a token that holds every role but admin and is limited to another
 * workflow; each cell's status is the one the table's row says.
 */

/** The role and grant of every route, written out here: the table must say the same. */
const EXPECTED_ACCESS: Record<string, [RouteRole, Grant] | "public"> = {
  health: "public",
  journalKeys: "public",
  definitionsSchema: "public",
  openApi: "public",
  receiveWebhook: "public",
  registerDefinitions: ["author", "every"],
  listDefinitions: ["reader", "listing"],
  listVersions: ["reader", "definition"],
  getDefinition: ["reader", "definition"],
  getDefinitionVersion: ["reader", "definition"],
  startRun: ["runner", "workflow"],
  startPlan: ["runner", "every"],
  signalRun: ["runner", "run"],
  sendEvents: ["runner", "every"],
  eventTriggers: ["reader", "every"],
  mcpServerTools: ["reader", "any"],
  listRuns: ["reader", "listing"],
  getRun: ["reader", "run"],
  deleteRun: ["admin", "run"],
  getNode: ["reader", "run"],
  getJournal: ["reader", "run"],
  getBlob: ["reader", "listing"],
  runEvents: ["reader", "run"],
  cancelRun: ["runner", "run"],
  pauseRun: ["runner", "run"],
  resumeRun: ["runner", "run"],
  redriveRun: ["runner", "run"],
  compensateRun: ["runner", "run"],
  eraseRun: ["admin", "run"],
  approveRun: ["approver", "run"],
  listGates: ["reader", "run"],
  listOpenGates: ["reader", "listing"],
  answerGate: ["approver", "run"],
  linkGate: ["approver", "run"],
  scheduleStatus: ["reader", "every"],
  pauseSchedule: ["author", "every"],
  resumeSchedule: ["author", "every"],
  triggerSchedule: ["runner", "every"],
  backfillSchedule: ["runner", "every"],
  limitStatus: ["reader", "any"],
  createToken: ["admin", "every"],
  listTokens: ["admin", "every"],
  revokeToken: ["admin", "every"],
  whoami: ["any", "any"],
  mcp: ["any", "any"],
};

/** What the fixture is: a workflow with one human gate, and a run of it that completed after its gate was answered. */
interface Fixture {
  workflow: string;
  runId: string;
  gateId: string;
  eventId: string;
  eventName: string;
}

/**
 * Each route as a request against the fixture, and the status it answers a
 * caller the table lets through: the calls leave the fixture as it was (a
 * control on a completed run is 409, a start is a preview, a registration
 * finds its version, a token revoked is one that does not exist).
 */
function requests(f: Fixture): Record<string, { method: string; path: string; body?: unknown; ok: number }> {
  const run = `/v1/runs/${f.runId}`;
  const controls = ["cancel", "pause", "resume", "redrive", "compensate", "approve"].map((control) => [
    `${control}Run`,
    { method: "POST", path: `${run}/${control}`, ok: 409 },
  ]);
  return {
    health: { method: "GET", path: "/healthz", ok: 200 },
    journalKeys: { method: "GET", path: "/v1/journal-keys", ok: 200 },
    definitionsSchema: { method: "GET", path: "/v1/schemas/definitions.json", ok: 200 },
    openApi: { method: "GET", path: "/v1/openapi.json", ok: 200 },
    receiveWebhook: { method: "POST", path: "/v1/hooks/no-such-hook", body: {}, ok: 404 },
    registerDefinitions: { method: "POST", path: "/v1/definitions", body: bundle(f.workflow), ok: 201 },
    listDefinitions: { method: "GET", path: "/v1/workflows", ok: 200 },
    listVersions: { method: "GET", path: `/v1/workflows/${f.workflow}/versions`, ok: 200 },
    getDefinition: { method: "GET", path: `/v1/workflows/${f.workflow}`, ok: 200 },
    getDefinitionVersion: { method: "GET", path: `/v1/workflows/${f.workflow}/versions/1`, ok: 200 },
    startRun: { method: "POST", path: `/v1/workflows/${f.workflow}/runs`, body: { mode: "preview" }, ok: 200 },
    startPlan: { method: "POST", path: "/v1/plans", body: {}, ok: 400 },
    signalRun: { method: "POST", path: `${run}/signals`, body: { name: "late" }, ok: 409 },
    sendEvents: { method: "POST", path: "/v1/events", body: { name: f.eventName, id: f.eventId }, ok: 202 },
    eventTriggers: { method: "GET", path: `/v1/events/${f.eventId}/triggers?name=${f.eventName}`, ok: 200 },
    mcpServerTools: { method: "GET", path: "/v1/mcp_servers/no-such-server/tools", ok: 404 },
    listRuns: { method: "GET", path: "/v1/runs", ok: 200 },
    getRun: { method: "GET", path: run, ok: 200 },
    // A run that does not exist: deleting the fixture's would change it for every other cell.
    deleteRun: { method: "DELETE", path: "/v1/runs/run_nosuchrun", ok: 404 },
    getNode: { method: "GET", path: `${run}/nodes/ask`, ok: 200 },
    getJournal: { method: "GET", path: `${run}/journal`, ok: 200 },
    // No run holds this blob: 404 to every reader (test/workers/blobs.test.ts reads held ones).
    getBlob: { method: "GET", path: `/v1/blobs/sha256:${"0".repeat(64)}`, ok: 404 },
    runEvents: { method: "GET", path: `${run}/events`, ok: 200 },
    ...Object.fromEntries(controls),
    // Without a reason: an admin is refused the body (400), and the fixture's run is not erased.
    eraseRun: { method: "POST", path: `${run}/erase`, body: {}, ok: 400 },
    listGates: { method: "GET", path: `${run}/gates`, ok: 200 },
    listOpenGates: { method: "GET", path: "/v1/gates", ok: 200 },
    answerGate: { method: "POST", path: `${run}/gates/${f.gateId}`, body: { response: { ok: true } }, ok: 409 },
    linkGate: {
      method: "POST",
      path: `${run}/gates/${f.gateId}/links`,
      body: { approver: "ops@example.com" },
      ok: 409,
    },
    scheduleStatus: { method: "GET", path: "/v1/schedules/no-such-schedule/status", ok: 404 },
    pauseSchedule: { method: "POST", path: "/v1/schedules/no-such-schedule/pause", ok: 404 },
    resumeSchedule: { method: "POST", path: "/v1/schedules/no-such-schedule/resume", ok: 404 },
    triggerSchedule: { method: "POST", path: "/v1/schedules/no-such-schedule/trigger", ok: 404 },
    backfillSchedule: {
      method: "POST",
      path: "/v1/schedules/no-such-schedule/backfill",
      body: { from: "2026-01-01T00:00:00Z", to: "2026-01-01T01:00:00Z" },
      ok: 404,
    },
    limitStatus: { method: "GET", path: "/v1/limits/no-such-limit/status", ok: 404 },
    createToken: { method: "POST", path: "/v1/tokens", body: { name: "made in a cell", roles: ["reader"] }, ok: 201 },
    listTokens: { method: "GET", path: "/v1/tokens", ok: 200 },
    revokeToken: { method: "DELETE", path: "/v1/tokens/tok_nosuchtoken", ok: 404 },
    whoami: { method: "GET", path: "/v1/whoami", ok: 200 },
    // Any caller reaches the MCP server; each of its tools checks its API twin's role (test/e2e/mcp-server.test.mjs).
    mcp: { method: "POST", path: "/v1/mcp", body: { jsonrpc: "2.0", id: 1, method: "ping" }, ok: 200 },
  };
}

function bundle(workflow: string) {
  const ask = {
    ref: "ask",
    action: {
      kind: "human",
      implementation: {
        prompt_template: "Go?",
        input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
      },
    },
  };
  return { workflows: [{ id: workflow, nodes: { ask: { task: { steps: [ask] } } } }] };
}

/** A request's status and error code (event streams are read to their end, not parsed). */
async function call(
  method: string,
  path: string,
  body: unknown,
  token: string,
): Promise<{ status: number; code: string | null }> {
  const response = await exports.default.fetch(`http://trellis.test${path}`, {
    method,
    headers: {
      authorization: `Bearer ${token}`,
      // What an MCP client sends (POST /v1/mcp refuses a request that does not take both); no other route reads it.
      accept: "application/json, text/event-stream",
      ...(body === undefined ? {} : { "content-type": "application/json" }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const json = response.headers.get("content-type")?.startsWith("application/json") ? JSON.parse(text) : null;
  return { status: response.status, code: json?.error?.code ?? null };
}

/** The callers: a token of each role, an admin of API_TOKENS, and every role but admin limited to another workflow. */
interface Caller {
  label: string;
  token: string;
  roles: Role[];
  limited: boolean;
}

async function makeToken(body: Record<string, unknown>): Promise<string> {
  const made = await api("POST", "/v1/tokens", body);
  if (made.status !== 201) {
    throw new Error(`token not made: ${JSON.stringify(made.json)}`);
  }
  return made.json.token;
}

async function makeFixture(): Promise<Fixture> {
  const workflow = uniqueId("authz");
  if ((await api("POST", "/v1/definitions", bundle(workflow))).status !== 201) {
    throw new Error("the fixture workflow did not register");
  }
  const runId = (await api("POST", `/v1/workflows/${workflow}/runs`, { input: {} })).json.run_id;
  await waitForRun(runId, (run) => run.gates?.some((gate: { status: string }) => gate.status === "open"));
  const gateId = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates[0].gate_id;
  await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: true } });
  await waitForRun(runId);
  const eventName = uniqueId("authz-event");
  const eventId = (await api("POST", "/v1/events", { name: eventName })).json.events[0].event_id;
  return { workflow, runId, gateId, eventId, eventName };
}

/** The status the table's row says a caller gets: 403 without the role or a grant of every workflow, 404 outside its grant. */
function expectedStatus(operationId: string, caller: Caller, ok: number): number {
  const access = EXPECTED_ACCESS[operationId];
  if (access === undefined || access === "public") {
    return ok;
  }
  const [role, grant] = access;
  if (role !== "any" && !caller.roles.includes("admin") && !caller.roles.includes(role)) {
    return 403;
  }
  if (caller.limited && grant === "every") {
    return 403;
  }
  if (caller.limited && (grant === "run" || grant === "workflow" || grant === "definition")) {
    return 404;
  }
  return ok;
}

describe("who may call what: every route with every role", () => {
  let fixture: Fixture;
  const callers: Caller[] = [];

  beforeAll(async () => {
    fixture = await makeFixture();
    callers.push({ label: "API_TOKENS", token: "test-token", roles: ["admin"], limited: false });
    for (const role of ROLES) {
      callers.push({
        label: role,
        token: await makeToken({ name: `only ${role}`, roles: [role] }),
        roles: [role],
        limited: false,
      });
    }
    const roles: Role[] = ["reader", "runner", "approver", "author"];
    const token = await makeToken({ name: "elsewhere", roles, workflows: ["elsewhere-*"] });
    callers.push({ label: "limited to elsewhere-*", token, roles, limited: true });
  }, 30_000);

  it("has a role and a grant for every route of the table, as written here", ({ expect }) => {
    const table = Object.fromEntries(
      API_ROUTES.map((route) => [route.operationId, route.auth === "public" ? "public" : [route.role, route.grant]]),
    );
    expect(table).toEqual(EXPECTED_ACCESS);
  });

  it("answers each cell with the status the table says", async ({ expect }) => {
    const cells = requests(fixture);
    expect(Object.keys(cells).sort()).toEqual(API_ROUTES.map((route) => route.operationId).sort());
    const seen: string[] = [];
    const wanted: string[] = [];
    for (const caller of callers) {
      for (const [operationId, request] of Object.entries(cells)) {
        const { status, code } = await call(request.method, request.path, request.body, caller.token);
        const expected = expectedStatus(operationId, caller, request.ok);
        seen.push(`${operationId} × ${caller.label}: ${status}${status === 403 ? ` ${code}` : ""}`);
        wanted.push(`${operationId} × ${caller.label}: ${expected}${expected === 403 ? " auth.forbidden" : ""}`);
      }
    }
    expect(seen).toEqual(wanted);
  }, 120_000);

  it("names the missing role, or the missing grant, in a 403", async ({ expect }) => {
    const reader = callers.find((caller) => caller.label === "reader")?.token ?? "";
    const refused = await api("POST", `/v1/runs/${fixture.runId}/cancel`, {}, reader);
    expect(refused.status).toBe(403);
    expect(refused.json.error).toMatchObject({
      code: "auth.forbidden",
      details: [{ path: "roles", message: "needs the role runner", code: "auth.forbidden" }],
    });
    expect(refused.json.error.message).toContain('lacks the role "runner"');
    const limited = callers.find((caller) => caller.limited)?.token ?? "";
    const everywhere = await api("POST", "/v1/events", { name: "x" }, limited);
    expect(everywhere.status).toBe(403);
    expect(everywhere.json.error.details).toEqual([
      { path: "workflows", message: "needs a grant of every workflow", code: "auth.forbidden" },
    ]);
    const hidden = await api("GET", `/v1/runs/${fixture.runId}`, undefined, limited);
    expect(hidden.json.error.code).toBe("run.not_found");
    const start = await api("POST", `/v1/workflows/${fixture.workflow}/runs`, {}, limited);
    expect(start.json.error.code).toBe("workflow.not_found");
  });
});

describe("GET /v1/whoami", () => {
  it("answers every caller with its own principal: kind, name, roles and the workflows it is limited to", async ({
    expect,
  }) => {
    const made = await api("POST", "/v1/tokens", { name: "support desk", roles: ["reader"], workflows: ["billing-*"] });
    expect(made.status).toBe(201);
    const reader = await api("GET", "/v1/whoami", undefined, made.json.token);
    expect(reader.status).toBe(200);
    expect(reader.json).toEqual({
      principal: {
        kind: "token",
        token_id: made.json.token_id,
        name: "support desk",
        roles: ["reader"],
        workflows: ["billing-*"],
        created_by: `token:${made.json.token_id}`,
      },
    });
    const admin = await api("GET", "/v1/whoami");
    expect(admin.json.principal).toMatchObject({
      kind: "token",
      name: "API_TOKENS",
      roles: ["admin"],
      workflows: null,
    });
    expect(admin.json.principal.token_id).toMatch(/^env:[0-9a-f]{16}$/);
    expect((await api("GET", "/v1/whoami", undefined, "not-a-token")).status).toBe(401);
  });
});

describe("who may call what over Workers RPC", () => {
  const principal = (roles: Role[]): Principal => ({
    kind: "token",
    token_id: "t",
    name: "t",
    roles,
    workflows: null,
    created_by: "token:t",
  });

  it("checks every RPC method against its route's row, for every role", ({ expect }) => {
    const methods = Object.getOwnPropertyNames(TrellisApi.prototype).filter(
      (name) => name !== "constructor" && name !== "journalKeys",
    );
    expect(methods.length).toBeGreaterThan(20);
    for (const method of methods) {
      const access = EXPECTED_ACCESS[method];
      expect(access, method).toBeDefined();
      expect(access, method).not.toBe("public");
      const [role] = access as [RouteRole, Grant];
      expect(accessOf(method).role, method).toBe(role);
      for (const held of ROLES) {
        const allowed = held === "admin" || held === role;
        const check = () => authorize(principal([held]), accessOf(method));
        if (allowed) {
          expect(check, `${method} × ${held}`).not.toThrow();
        } else {
          expect(check, `${method} × ${held}`).toThrow(/lacks the role/);
        }
      }
    }
  });
});

describe("grants of workflows by pattern", () => {
  it("matches * as any run of characters, and nothing else as a wildcard", ({ expect }) => {
    const cases: [string, string, boolean][] = [
      ["billing-*", "billing-eu", true],
      ["billing-*", "billing-", true],
      ["billing-*", "billing", false],
      ["report", "report", true],
      ["report", "reports", false],
      ["*-daily", "sales-daily", true],
      ["a*b*c", "axxbyyc", true],
      ["a*b*c", "acb", false],
      ["*", "anything", true],
      ["a_b", "axb", false],
    ];
    for (const [pattern, id, matches] of cases) {
      expect(globMatches(pattern, id), `${pattern} ~ ${id}`).toBe(matches);
    }
  });
});
