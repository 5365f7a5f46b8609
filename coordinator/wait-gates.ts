import type { Json } from "../schemas/common.ts";
import type { GateRecord, RunRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import type { OpenWait, WaitKindRow } from "./wait-kinds.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";

/**
 * Gates: a `human` step's input and a high-risk action's approval. The gate
 * is a record of the run (`record.gates`, the history `GET /v1/runs/{id}/gates`
 * lists); the invocation waits for it by id.
 */
export const gateWaits: WaitKindRow<"gate"> = {
  open(draft, { nodeId, invocation, stepRef }, wire) {
    const gate: GateRecord = {
      gate_id: `gate_${draft.record.gates.length + 1}`,
      kind: wire.gate_kind,
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: stepRef,
      prompt: wire.prompt,
      input_schema: wire.input_schema as GateRecord["input_schema"],
      status: "open",
      opened_at: draft.now,
      expires_at: wire.timeout_ms === undefined ? null : draft.now + wire.timeout_ms,
      on_timeout: wire.on_timeout ?? "fail",
      ...(wire.action ? { action: wire.action } : {}),
    };
    draft.record.gates = [...draft.record.gates, gate];
    const body = {
      gate_id: gate.gate_id,
      node: nodeId,
      item: gate.item,
      step: stepRef,
      expires_at: gate.expires_at === null ? null : new Date(gate.expires_at).toISOString(),
    };
    if (gate.kind === "approval") {
      draft.journal("approval.requested", gate.action ? { ...body, action: gate.action } : body);
    } else {
      draft.journal("gate.opened", body);
    }
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
  close(draft, { wait }, reason) {
    const gate = gateOf(draft.record, wait.gate_id);
    if (gate?.status !== "open") {
      return;
    }
    draft.journal("gate.expired", { gate_id: gate.gate_id, node: gate.node, step: gate.step, reason });
    replaceGate(draft, { ...gate, status: "expired", reason });
  },
  view: (wait) => ({ kind: "gate", gate_id: wait.gate_id }),
};

/** A gate by id: ids are `gate_<n>`, the n-th gate opened, and gates are only ever appended. */
function gateOf(record: RunRecord, gateId: string): GateRecord | undefined {
  const at = record.gates[Number(gateId.slice("gate_".length)) - 1];
  return at?.gate_id === gateId ? at : record.gates.find((gate) => gate.gate_id === gateId);
}

function replaceGate(draft: Draft, gate: GateRecord): void {
  draft.record.gates = draft.record.gates.map((candidate) => (candidate.gate_id === gate.gate_id ? gate : candidate));
}

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

/** A valid answer (the Durable Object checked it against the gate's schema). */
export function answerGate(draft: Draft, gateId: string, response: Json, responder: string | null): void {
  const gate = gateOf(draft.record, gateId);
  if (!gate || gate.status !== "open") {
    return;
  }
  replaceGate(draft, { ...gate, status: "answered", response, responder, responded_at: draft.now });
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
    });
    if (found) {
      const resume = approved
        ? { mode: "approved" as const }
        : { mode: "rejected" as const, ...(reason ? { reason } : {}) };
      resumeInvocation(draft, found.nodeId, found.invocation, resume);
    }
    return;
  }
  draft.journal("gate.answered", { gate_id: gateId, node: gate.node, step: gate.step, responder, response });
  if (found) {
    const output = { gate_id: gateId, response, responder, responded_at: new Date(draft.now).toISOString() };
    resumeInvocation(draft, found.nodeId, found.invocation, { mode: "after", outcome: { ok: true, output } });
  }
}
