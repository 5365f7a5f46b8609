/**
 * Who the console is signed in as (docs/api.md, "The web console"): the
 * principal `GET /v1/whoami` answers, reached with the tab's bearer token or,
 * behind Cloudflare Access, with no token at all (Access adds its assertion
 * to every request it lets through). The buttons a page shows follow from the
 * principal's roles: the role of each operation is the route table's
 * (src/contracts/routes.ts; test/node checks they agree), and a gate that
 * declares approvers is answerable only by one it names.
 */
import { isApprover } from "../../coordinator/approvers.ts";
import type { GateView } from "../../schemas/api.ts";
import { byOf, Whoami, type Principal, type Role } from "../../schemas/auth.ts";

/** The role each operation the console offers needs, by the route table's operation id. */
export const CONSOLE_OPERATION_ROLES = {
  cancelRun: "runner",
  pauseRun: "runner",
  resumeRun: "runner",
  redriveRun: "runner",
  compensateRun: "runner",
  approveRun: "approver",
  answerGate: "approver",
  signalRun: "runner",
  startRun: "runner",
  pauseSchedule: "author",
  resumeSchedule: "author",
  triggerSchedule: "runner",
} as const satisfies Record<string, Role>;
export type ConsoleOperation = keyof typeof CONSOLE_OPERATION_ROLES;

/** Whether the principal may call the operation (admin holds every role). */
export function may(principal: Principal, operation: ConsoleOperation): boolean {
  const role = CONSOLE_OPERATION_ROLES[operation];
  return principal.roles.includes("admin") || principal.roles.includes(role);
}

/** Whether the principal may answer the gate: the role, and one of the gate's approvers when it declares them. */
export function mayAnswer(principal: Principal, gate: Pick<GateView, "approvers">): boolean {
  return may(principal, "answerGate") && isApprover(gate.approvers, { by: byOf(principal), roles: principal.roles });
}

/** The header's line: `token "support desk" · reader · workflows billing-*`, `ops@example.com (Access) · runner, reader`. */
export function principalText(principal: Principal): string {
  const who = principal.kind === "token" ? `token "${principal.name}"` : `${principal.email} (Access)`;
  const roles = principal.roles.length === 0 ? "no role" : principal.roles.join(", ");
  const workflows = principal.workflows === null ? "" : ` · workflows ${principal.workflows.join(", ")}`;
  return `${who} · ${roles}${workflows}`;
}

/** What the sign-in page says when signing in through Access found no identity. */
export const NO_ACCESS_IDENTITY =
  "Cloudflare Access did not sign this browser in (401): the console is not behind Access here, or its session ended. Sign in with a token.";

/** Where the console stands: asking, signed in (through a token, or through Access), or showing the sign-in form. */
export type Session =
  | { state: "checking" }
  | { state: "signed_in"; principal: Principal; via: "token" | "access" }
  | { state: "signed_out"; refused: boolean; problem: string | null };

/**
 * Asks `GET /v1/whoami` who the tab is: with the token when there is one,
 * else (signing in through Access) with nothing but what the browser sends by
 * itself: behind Access, its cookie, from which Access adds the assertion.
 * 401: signed out, `refused` when a token was sent, else a `problem` saying
 * Access signed nobody in. Any other failure is a `problem` to show.
 */
export async function whoami(token: string | null, fetcher: typeof fetch = fetch): Promise<Session> {
  let res: Response;
  try {
    res = await fetcher("/v1/whoami", { headers: token === null ? {} : { authorization: `Bearer ${token}` } });
  } catch (error) {
    return { state: "signed_out", refused: false, problem: `the API could not be reached: ${String(error)}` };
  }
  if (res.status === 401) {
    return token !== null
      ? { state: "signed_out", refused: true, problem: null }
      : { state: "signed_out", refused: false, problem: NO_ACCESS_IDENTITY };
  }
  const parsed = Whoami.safeParse(res.ok ? await res.json().catch(() => null) : null);
  if (!parsed.success) {
    return { state: "signed_out", refused: false, problem: `GET /v1/whoami answered ${res.status}` };
  }
  return { state: "signed_in", principal: parsed.data.principal, via: token === null ? "access" : "token" };
}
