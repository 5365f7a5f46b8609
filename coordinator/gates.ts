import type { GateRecord, RunRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * The run's gates (`record.gates`, the history `GET /v1/runs/{id}/gates`
 * lists): a `human` step's input, a high-risk step's approval, and a
 * high-risk tool call's approval. Opened here, whoever waits for them.
 */

/** What a new gate asks, and of whom: its place, prompt, schema, time and what waits for it. */
export type GateRequest = Pick<GateRecord, "kind" | "node" | "item" | "step" | "prompt" | "input_schema"> &
  Partial<Pick<GateRecord, "action" | "tool_call" | "approvers">> & {
    timeout_ms?: number | undefined;
    on_timeout?: GateRecord["on_timeout"] | undefined;
  };

/** Opens a gate and journals it (`gate.opened`, or `approval.requested`); returns it. */
export function openGate(draft: Draft, request: GateRequest): GateRecord {
  const { timeout_ms, on_timeout, action, tool_call, ...fields } = request;
  const gate: GateRecord = {
    gate_id: `gate_${draft.record.gates.length + 1}`,
    ...fields,
    status: "open",
    opened_at: draft.now,
    expires_at: timeout_ms === undefined ? null : draft.now + timeout_ms,
    on_timeout: on_timeout ?? "fail",
    ...(action ? { action } : {}),
    ...(tool_call ? { tool_call } : {}),
  };
  draft.record.gates = [...draft.record.gates, gate];
  const body = {
    gate_id: gate.gate_id,
    node: gate.node,
    item: gate.item,
    step: gate.step,
    expires_at: gate.expires_at === null ? null : new Date(gate.expires_at).toISOString(),
  };
  if (gate.kind === "approval") {
    draft.journal("approval.requested", {
      ...body,
      ...(action ? { action } : {}),
      ...(tool_call ? { tool_call } : {}),
    });
  } else {
    draft.journal("gate.opened", body);
  }
  return gate;
}

/** A gate by id: ids are `gate_<n>`, the n-th gate opened, and gates are only ever appended. */
export function gateOf(record: RunRecord, gateId: string): GateRecord | undefined {
  const at = record.gates[Number(gateId.slice("gate_".length)) - 1];
  return at?.gate_id === gateId ? at : record.gates.find((gate) => gate.gate_id === gateId);
}

export function replaceGate(draft: Draft, gate: GateRecord): void {
  draft.record.gates = draft.record.gates.map((candidate) => (candidate.gate_id === gate.gate_id ? gate : candidate));
}

/** An open gate ends unanswered (what waited for it ended): journaled `gate.expired` with the reason. */
export function closeGate(draft: Draft, gateId: string, reason: string): void {
  const gate = gateOf(draft.record, gateId);
  if (gate?.status !== "open") {
    return;
  }
  draft.journal("gate.expired", { gate_id: gate.gate_id, node: gate.node, step: gate.step, reason });
  replaceGate(draft, { ...gate, status: "expired", reason });
}
