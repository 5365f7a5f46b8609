import { z } from "zod";
import { EngineError } from "../lib/errors.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { type Answerer, type GateLink } from "../schemas/approvers.ts";
import { By } from "../schemas/auth.ts";
import type { GateRecord, RunRecord } from "../schemas/run.ts";
import { isApprover, describeApprovers } from "./approvers.ts";
import type { Draft } from "./draft.ts";
import { gateOf, replaceGate } from "./gates.ts";
import type { RunEvent } from "./events.ts";
import { openGateOf } from "./requests.ts";

/**
 * Approval links (docs/api.md, "Approval links"): a gate's answer by someone
 * who is not at a terminal. The API makes the link's secret and sends its
 * SHA-256 here; the run keeps it beside the gate, bound to the gate and to
 * one approver, and the link answers once.
 */

/** The most links one gate keeps. */
export const MAX_LINKS_PER_GATE = 20;
/** The most links a request with `once` (the MCP server's reports) may leave a gate with: the rest stay for the API. */
export const MAX_REPORT_LINKS_PER_GATE = 10;

/** What the API sends the run to make a link: its id, the secret's hash, its approver and expiry, and who made it. */
export const GateLinkRequest = z.strictObject({
  link_id: z.string().regex(/^lnk_[0-9a-f]{16}$/),
  secret_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  approver: z.string().min(1).max(254),
  expires_at: z.number().int(),
  created_by: By,
  /**
   * Make none when the gate keeps a live link (unused, unexpired) made by the
   * same caller for the same approver: the MCP server's reports ask this, so a
   * client that polls a waiting run does not use up the gate's links.
   */
  once: z.boolean().optional(),
});
export type GateLinkRequest = z.infer<typeof GateLinkRequest>;

/**
 * The event that keeps a new link: the gate must be open, name the approver
 * (when it declares approvers) and have room. With `once`, the live link the
 * same caller made for the same approver instead, when there is one.
 */
export function toGateLink(
  record: RunRecord,
  gateId: string,
  request: unknown,
  now: number,
): Extract<RunEvent, { type: "gate_link" }> | { existing: GateLink } {
  const asked = parseOrThrow(GateLinkRequest, request, "gate.invalid_link", "the link");
  const gate = openGateOf(record.gates, gateId);
  const existing = asked.once ? liveLinkOf(gate, asked, now) : undefined;
  if (existing !== undefined) {
    return { existing };
  }
  const answerer: Answerer = { by: { link: asked.link_id, approver: asked.approver }, roles: [] };
  if (gate.approvers !== undefined && !isApprover(gate.approvers, answerer)) {
    throw EngineError.terminal(
      "auth.forbidden",
      `a link of gate ${gateId} must be made for one of its approvers: ${describeApprovers(gate.approvers)}`,
    );
  }
  if (asked.once && (gate.links ?? []).length >= MAX_REPORT_LINKS_PER_GATE) {
    throw EngineError.terminal("gate.too_many_links", `gate ${gateId} has ${MAX_REPORT_LINKS_PER_GATE} links already`);
  }
  if ((gate.links ?? []).length >= MAX_LINKS_PER_GATE) {
    throw EngineError.terminal("gate.too_many_links", `gate ${gateId} has ${MAX_LINKS_PER_GATE} links already`);
  }
  const { link_id, secret_sha256, approver, expires_at, created_by } = asked;
  const link: GateLink = { link_id, approver, secret_sha256, created_at: now, expires_at, used_at: null, created_by };
  return { type: "gate_link", gate_id: gateId, link };
}

/** A link of the gate, unused and unexpired, that the same caller made for the same approver. */
function liveLinkOf(gate: GateRecord, asked: GateLinkRequest, now: number): GateLink | undefined {
  const creator = JSON.stringify(asked.created_by);
  return gate.links?.find(
    (link) =>
      link.used_at === null &&
      now < link.expires_at &&
      link.approver === asked.approver &&
      JSON.stringify(link.created_by) === creator,
  );
}

/**
 * Keeps a link beside its gate (still open: the event was checked before it
 * was applied), and journals its making, signed with who made it: its id, its
 * approver and expiry, never its secret nor the secret's hash.
 */
export function addGateLink(draft: Draft, gateId: string, link: GateLink): void {
  const gate = gateOf(draft.record, gateId);
  if (gate?.status === "open") {
    replaceGate(draft, { ...gate, links: [...(gate.links ?? []), link] });
    draft.journal("gate.link_created", {
      gate_id: gateId,
      node: gate.node,
      step: gate.step,
      link_id: link.link_id,
      approver: link.approver,
      expires_at: new Date(link.expires_at).toISOString(),
      by: link.created_by,
    });
  }
}

/**
 * The gate a link answers, and the link, when `secretSha256` is its secret's:
 * 404 for no such link (or another secret), 409 once used or once the gate is
 * answered or expired, 410 past the link's expiry.
 */
export function gateOfLink(
  record: RunRecord,
  linkId: string,
  secretSha256: Uint8Array,
  now: number,
): { gate: GateRecord; link: GateLink } {
  for (const gate of record.gates) {
    const link = gate.links?.find((candidate) => candidate.link_id === linkId);
    if (link === undefined) {
      continue;
    }
    if (!crypto.subtle.timingSafeEqual(hexBytes(link.secret_sha256), secretSha256)) {
      break;
    }
    if (link.used_at !== null) {
      throw EngineError.terminal("link.used", "this link was used already: a link answers once");
    }
    if (gate.status !== "open") {
      throw EngineError.terminal(`gate.${gate.status}`, `gate ${gate.gate_id} is already ${gate.status}`);
    }
    if (now >= link.expires_at) {
      throw EngineError.terminal("link.expired", `this link expired at ${new Date(link.expires_at).toISOString()}`);
    }
    return { gate, link };
  }
  throw EngineError.terminal("link.not_found", "no such link");
}

function hexBytes(hex: string): Uint8Array {
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => Number.parseInt(pair, 16));
}
