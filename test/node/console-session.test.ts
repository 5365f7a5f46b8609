import { describe, expect, it } from "vitest";
import {
  CONSOLE_OPERATION_ROLES,
  may,
  mayAnswer,
  NO_ACCESS_IDENTITY,
  principalText,
  whoami,
  type ConsoleOperation,
} from "../../console/src/session.ts";
import type { Principal, Role } from "../../schemas/auth.ts";
import { API_ROUTES } from "../../src/contracts/routes.ts";

/** Who the console is signed in as, and which of its buttons follow from that (docs/api.md, "The web console"). */

const token = (roles: Role[], name = "t"): Principal => ({
  kind: "token",
  token_id: `tok_${name}`,
  name,
  roles,
  workflows: null,
  created_by: `token:tok_${name}`,
});

const OPERATIONS = Object.keys(CONSOLE_OPERATION_ROLES) as ConsoleOperation[];

describe("what the console offers a principal", () => {
  it("needs, for each operation, the role the route table says", () => {
    for (const operation of OPERATIONS) {
      const route = API_ROUTES.find((candidate) => candidate.operationId === operation);
      expect(route?.auth === "bearer" ? route.role : undefined, operation).toBe(CONSOLE_OPERATION_ROLES[operation]);
    }
  });

  it("shows a reader no control, a runner no Approve, and an admin everything", () => {
    const allowed = (principal: Principal) => OPERATIONS.filter((operation) => may(principal, operation));
    expect(allowed(token(["reader"]))).toEqual([]);
    expect(allowed(token(["runner", "reader"]))).toEqual([
      "cancelRun",
      "pauseRun",
      "resumeRun",
      "redriveRun",
      "compensateRun",
      "signalRun",
      "startRun",
      "triggerSchedule",
    ]);
    expect(allowed(token(["approver"]))).toEqual(["approveRun", "answerGate"]);
    expect(allowed(token(["admin"]))).toEqual(OPERATIONS);
  });

  it("lets only a matching approver answer a gate that declares approvers", () => {
    const access: Principal = {
      kind: "access",
      email: "finance-lead@acme.com",
      groups: [],
      roles: ["approver"],
      workflows: null,
      created_by: "access:finance-lead@acme.com",
    };
    const financeOnly = { approvers: { emails: ["Finance-Lead@acme.com"] } };
    expect(mayAnswer(access, financeOnly)).toBe(true);
    expect(mayAnswer(token(["approver"], "ops"), financeOnly)).toBe(false);
    expect(mayAnswer(token(["approver"], "ops"), { approvers: { tokens: ["ops"] } })).toBe(true);
    expect(mayAnswer(token(["runner"], "ops"), { approvers: { tokens: ["ops"] } })).toBe(false);
    expect(mayAnswer(token(["approver"]), {})).toBe(true);
    expect(mayAnswer(token(["reader"]), {})).toBe(false);
  });

  it("names the principal, its roles and its workflows in the header", () => {
    expect(principalText({ ...token(["reader"], "support desk"), workflows: ["billing-*", "report"] })).toBe(
      'token "support desk" · reader · workflows billing-*, report',
    );
    expect(
      principalText({
        kind: "access",
        email: "ops@example.com",
        groups: ["eng"],
        roles: [],
        workflows: null,
        created_by: "access:ops@example.com",
      }),
    ).toBe("ops@example.com (Access) · no role");
  });
});

describe("signing in: GET /v1/whoami", () => {
  const answering = (status: number, body: unknown) => {
    const sent: { path: string; authorization: string | null }[] = [];
    const fetcher = (async (path: string, init?: RequestInit) => {
      sent.push({ path, authorization: new Headers(init?.headers).get("authorization") });
      return new Response(JSON.stringify(body), { status, headers: { "content-type": "application/json" } });
    }) as typeof fetch;
    return { fetcher, sent };
  };
  const principal = token(["reader"], "support");

  it("is signed in with the token when one is kept, sent as a bearer header", async () => {
    const { fetcher, sent } = answering(200, { principal });
    expect(await whoami("trl_secret", fetcher)).toEqual({ state: "signed_in", principal, via: "token" });
    expect(sent).toEqual([{ path: "/v1/whoami", authorization: "Bearer trl_secret" }]);
  });

  it("is signed in through Access without a token when the API knows the browser's identity", async () => {
    const identity: Principal = {
      kind: "access",
      email: "ops@example.com",
      groups: ["eng"],
      roles: ["runner", "reader"],
      workflows: null,
      created_by: "access:ops@example.com",
    };
    const { fetcher, sent } = answering(200, { principal: identity });
    expect(await whoami(null, fetcher)).toEqual({ state: "signed_in", principal: identity, via: "access" });
    expect(sent).toEqual([{ path: "/v1/whoami", authorization: null }]);
  });

  it("shows the sign-in form on 401, saying a token was refused or Access signed nobody in, and any other failure as a problem", async () => {
    expect(await whoami(null, answering(401, {}).fetcher)).toEqual({
      state: "signed_out",
      refused: false,
      problem: NO_ACCESS_IDENTITY,
    });
    expect(await whoami("stale", answering(401, {}).fetcher)).toEqual({
      state: "signed_out",
      refused: true,
      problem: null,
    });
    expect(await whoami(null, answering(503, { error: { code: "auth.access_unavailable" } }).fetcher)).toEqual({
      state: "signed_out",
      refused: false,
      problem: "GET /v1/whoami answered 503",
    });
    const unreachable = (() => Promise.reject(new TypeError("fetch failed"))) as typeof fetch;
    expect(await whoami(null, unreachable)).toMatchObject({ state: "signed_out", problem: /could not be reached/ });
  });
});
