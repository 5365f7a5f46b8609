import { EngineError } from "../lib/errors.ts";
import type { Answerer, Approvers } from "../schemas/approvers.ts";
import type { GateRecord } from "../schemas/run.ts";

/**
 * Verified approvers (docs/definitions.md, "Verified approvers"): who may
 * answer a gate that declares `approvers`. A token matches by one of its
 * roles, or by its id or name in `tokens`; an Access identity by one of its
 * roles or its email in `emails`; an approval link by the approver it was
 * made for in `emails`. Emails compare without case. An admin holds every
 * role (as everywhere), so `roles` lets it answer; `tokens` and `emails` name
 * exactly who may, admin or not.
 */

/** Whether `answerer` may answer a gate with these approvers (any caller, when there are none). */
export function isApprover(approvers: Approvers | undefined, answerer: Answerer): boolean {
  if (approvers === undefined) {
    return true;
  }
  const { by, roles } = answerer;
  if (approvers.roles?.some((role) => roles.includes(role) || roles.includes("admin"))) {
    return true;
  }
  if ("token_id" in by) {
    return approvers.tokens?.some((token) => token === by.token_id || token === by.name) ?? false;
  }
  const email = ("email" in by ? by.email : by.approver).toLowerCase();
  return approvers.emails?.some((candidate) => candidate.toLowerCase() === email) ?? false;
}

/** Who may answer, in words: `roles approver; emails ops@example.com`. */
export function describeApprovers(approvers: Approvers): string {
  return [
    approvers.roles ? `roles ${approvers.roles.join(", ")}` : null,
    approvers.tokens ? `tokens ${approvers.tokens.join(", ")}` : null,
    approvers.emails ? `emails ${approvers.emails.join(", ")}` : null,
  ]
    .filter((part) => part !== null)
    .join("; ");
}

/** Refuses (403 `auth.forbidden`) an answerer the gate's approvers do not name, saying who may answer. */
export function assertApprover(gate: GateRecord, answerer: Answerer): void {
  if (gate.approvers !== undefined && !isApprover(gate.approvers, answerer)) {
    throw EngineError.terminal(
      "auth.forbidden",
      `gate ${gate.gate_id} may be answered only by ${describeApprovers(gate.approvers)}`,
    );
  }
}
