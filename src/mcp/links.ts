import { isApprover } from "../../coordinator/approvers.ts";
import { isTerminal } from "../../coordinator/lifecycle.ts";
import { ensureEngineError } from "../../lib/errors.ts";
import type { GateView, RunView } from "../../schemas/api.ts";
import type { Principal } from "../../schemas/auth.ts";
import type { ApprovalLink } from "../../schemas/mcp.ts";
import { accessOf, hasRole } from "../access.ts";
import { answererOf, makeGateLink } from "../gate-links.ts";

/**
 * Approval links in a report that a run needs input (docs/mcp.md, "Gates"):
 * a link for the caller, so the person behind the agent can answer the gate
 * in a browser. Only a link the caller could have made with
 * `POST /v1/runs/{run_id}/gates/{gate_id}/links` for itself: the role that
 * route needs, the caller one of the gate's approvers, and, when the gate
 * declares approvers, the caller's own email among them (a link answers as
 * `{ link, approver }`, matched by `emails` only). One live link per gate
 * and caller: a report made while the link is live says so, without its URL.
 */

/** How long a link made for a report lasts, at most: the person is at the conversation now. */
export const REPORT_LINK_TTL_MS = 3_600_000;

/** The approver a link for this caller names: an Access identity's email, a token's name. */
export function linkApproverOf(principal: Principal): string {
  return principal.kind === "access" ? principal.email : principal.name;
}

/** Whether the caller could make a link of the gate for itself over the API, and answer the gate. */
export function mayLinkForSelf(gate: GateView, principal: Principal): boolean {
  if (!hasRole(principal, accessOf("linkGate").role) || !isApprover(gate.approvers, answererOf(principal))) {
    return false;
  }
  const asLink = { by: { link: "lnk_", approver: linkApproverOf(principal) }, roles: [] };
  return gate.approvers === undefined || isApprover(gate.approvers, asLink);
}

/** How long a link of this gate lasts: an hour, or until the gate expires; null when it expires within a second. */
export function linkTtlMs(gate: Pick<GateView, "expires_at">, now: number): number | null {
  const left = gate.expires_at === null ? REPORT_LINK_TTL_MS : Date.parse(gate.expires_at) - now;
  const ttl = Math.min(REPORT_LINK_TTL_MS, left);
  return ttl >= 1_000 ? ttl : null;
}

/**
 * The links of the run's open gates for the caller, by gate id. A gate the
 * caller may not link, or whose link is refused (answered meanwhile, its
 * links used up), has none: the report still says how to answer it.
 */
export async function reportLinks(
  env: Env,
  view: RunView,
  principal: Principal,
  origin: string,
): Promise<Record<string, ApprovalLink>> {
  const links: Record<string, ApprovalLink> = {};
  if (isTerminal(view.status)) {
    return links;
  }
  for (const gate of view.gates) {
    const ttl = linkTtlMs(gate, Date.now());
    if (gate.status !== "open" || ttl === null || !mayLinkForSelf(gate, principal)) {
      continue;
    }
    const approver = linkApproverOf(principal);
    try {
      const asked = { approver, expires_in_ms: ttl, once: true };
      const made = await makeGateLink(env, { runId: view.run_id, gateId: gate.gate_id }, asked, principal, origin);
      links[gate.gate_id] = { url: made.made ? made.url : null, approver, expires_at: made.expires_at };
    } catch (thrown) {
      const error = ensureEngineError(thrown);
      console.warn(JSON.stringify({ msg: "mcp report link not made", gate: gate.gate_id, code: error.code }));
    }
  }
  return links;
}
