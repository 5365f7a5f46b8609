import type { GateLink } from "../schemas/approvers.ts";
import type { By } from "../schemas/auth.ts";
import type { Json } from "../schemas/common.ts";
import type { GateRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import { closeGate, gateOf, openGate, replaceGate } from "./gates.ts";
import type { OpenWait, WaitKindRow } from "./wait-kinds.ts";
import { answerToolCallApproval } from "./wait-tools.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";

/**
 * Gates: a `human` step's input and a high-risk action's approval. The gate
 * is a record of the run (`record.gates`, the history `GET /v1/runs/{id}/gates`
 * lists); the invocation waits for it by id.
 */
export const gateWaits: WaitKindRow<"gate"> = {
  open(draft, { nodeId, invocation, stepRef }, wire) {
    const gate = openGate(draft, {
      kind: wire.gate_kind,
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: stepRef,
      prompt: wire.prompt,
      input_schema: wire.input_schema as GateRecord["input_schema"],
      timeout_ms: wire.timeout_ms,
      on_timeout: wire.on_timeout,
      ...(wire.action ? { action: wire.action } : {}),
      ...(wire.approvers ? { approvers: wire.approvers } : {}),
    });
    return { kind: "gate", gate_id: gate.gate_id };
  },
  expiresAt(draft, wait) {
    const gate = gateOf(draft.record, wait.gate_id);
    return gate?.status === "open" ? gate.expires_at : null;
  },
  expire(draft, at) {
    const gate = gateOf(draft.record, at.wait.gate_id);
    if (gate?.status === "open") {
      expireGate(draft, gate, at);
    }
  },
  unsent: () => false,
  inFlight: () => false,
  send: () => 0,
  close: (draft, { wait }, reason) => closeGate(draft, wait.gate_id, reason),
  view: (wait) => ({ kind: "gate", gate_id: wait.gate_id }),
};

/** A gate past its expiry ends as `on_timeout` says: a default answer, or a failed step. */
function expireGate(draft: Draft, gate: GateRecord, at: OpenWait<"gate">): void {
  const ref = { gate_id: gate.gate_id, node: gate.node, step: gate.step };
  if (gate.on_timeout === "fail") {
    replaceGate(draft, { ...gate, status: "expired", reason: "timed out" });
    draft.journal("gate.expired", { ...ref, on_timeout: "fail" });
    const message = `gate ${gate.gate_id} expired without an answer`;
    resumeInvocation(draft, at.nodeId, at.invocation, {
      mode: "after",
      outcome: { ok: false, error: { code: "gate.expired", message } },
    });
    return;
  }
  const response = gate.on_timeout.default;
  const reason = "timed out; the default answer was used";
  replaceGate(draft, { ...gate, status: "expired", reason, response, responder: null, responded_at: draft.now });
  draft.journal("gate.expired", { ...ref, on_timeout: "default", response });
  const output = { gate_id: gate.gate_id, response, responder: null, responded_at: new Date(draft.now).toISOString() };
  resumeInvocation(draft, at.nodeId, at.invocation, { mode: "after", outcome: { ok: true, output } });
}

/**
 * A valid answer (the Durable Object checked it against the gate's schema and
 * approvers): `by` is who answered (absent when the engine answers: a
 * standing approval granted as its gate opens), `responder` their free-text
 * note. An answer through an approval link uses the link up.
 */
export function answerGate(draft: Draft, gateId: string, response: Json, responder: string | null, by?: By): void {
  const gate = gateOf(draft.record, gateId);
  if (!gate || gate.status !== "open") {
    return;
  }
  replaceGate(draft, {
    ...gate,
    status: "answered",
    response,
    responder,
    responded_at: draft.now,
    ...(by === undefined ? {} : { answered_by: by }),
    ...(by !== undefined && "link" in by ? { links: useLink(gate.links ?? [], by.link, draft.now) } : {}),
  });
  const caused = by === undefined ? {} : { by };
  const found = findWaiter(draft, (waiting) => waiting.kind === "gate" && waiting.gate_id === gateId);
  if (gate.kind === "approval") {
    const answer = typeof response === "object" && response !== null && !Array.isArray(response) ? response : {};
    const approved = answer.approved === true;
    const reason = typeof answer.reason === "string" ? answer.reason : undefined;
    draft.journal(approved ? "approval.granted" : "approval.rejected", {
      gate_id: gateId,
      node: gate.node,
      step: gate.step,
      responder,
      ...(reason ? { reason } : {}),
      ...caused,
    });
    if (gate.tool_call !== undefined) {
      answerToolCallApproval(draft, gate, approved, reason);
    } else if (found) {
      const resume = approved
        ? { mode: "approved" as const }
        : { mode: "rejected" as const, ...(reason ? { reason } : {}) };
      resumeInvocation(draft, found.nodeId, found.invocation, resume);
    }
    return;
  }
  draft.journal("gate.answered", { gate_id: gateId, node: gate.node, step: gate.step, responder, response, ...caused });
  if (found) {
    const output = { gate_id: gateId, response, responder, responded_at: new Date(draft.now).toISOString() };
    resumeInvocation(draft, found.nodeId, found.invocation, { mode: "after", outcome: { ok: true, output } });
  }
}

/** The gate's links with `linkId` marked used. */
function useLink(links: readonly GateLink[], linkId: string, now: number): GateLink[] {
  return links.map((link) => (link.link_id === linkId ? { ...link, used_at: now } : link));
}
