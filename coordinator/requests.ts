import { EngineError } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { GateAnswerBody } from "../schemas/api.ts";
import type { Answerer } from "../schemas/approvers.ts";
import { assertApprover } from "./approvers.ts";
import { APPROVAL_SCHEMA } from "../schemas/payload.ts";
import type { Json } from "../schemas/common.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import type { GateRecord, RunRecord } from "../schemas/run.ts";
import type { CreateRunRequest } from "./create.ts";
import type { RunEvent } from "./events.ts";

/**
 * The checks of what callers send the Durable Object, before any event is
 * applied: each throws the `EngineError` its caller answers with.
 */

/** A create with an idempotency key already used must carry the same request. */
export function assertSameRequest(record: RunRecord, request: CreateRunRequest): void {
  if (record.request_hash !== request.request_hash) {
    throw EngineError.terminal(
      "run.idempotency_conflict",
      "this idempotency_key was already used for a different request",
    );
  }
}

/**
 * The run input must match the workflow's `input_schema`. Every run is created
 * through its coordinator, which checks here; a preview, which creates nothing,
 * is checked by the same function.
 */
export function assertValidInput(snapshot: RunSnapshot, input: Json): void {
  const problems = validateJson(snapshot.workflow.definition.input_schema, input, "input");
  if (problems.length > 0) {
    throw EngineError.terminal(
      "run.invalid_input",
      `the run input does not match the workflow's input_schema`,
      problems,
    );
  }
}

/**
 * The event that answers gate `gateId` with `body`: the gate must be open and
 * the answer must match its `input_schema` (an approval takes
 * `{ approved, reason? }`).
 */
export function toGateAnswer(
  gates: readonly GateRecord[],
  gateId: string,
  body: unknown,
  answerer: Answerer,
): { gate: GateRecord; event: Extract<RunEvent, { type: "gate_answer" }> } {
  const answer = parseOrThrow(GateAnswerBody, body, "gate.invalid_answer", "the gate answer");
  const gate = openGateOf(gates, gateId);
  assertApprover(gate, answerer);
  const schema = gate.kind === "approval" ? APPROVAL_SCHEMA : gate.input_schema;
  const problems = validateJson(schema, answer.response, "response");
  if (problems.length > 0) {
    throw EngineError.terminal(
      "gate.invalid_response",
      `the response does not match the gate's input_schema`,
      problems,
    );
  }
  const response = answer.response;
  const responder = answer.responder ?? null;
  return { gate, event: { type: "gate_answer", gate_id: gateId, response, responder, by: answerer.by } };
}

/** The gate `gateId`, which must exist (404) and be open (409 once answered or expired). */
export function openGateOf(gates: readonly GateRecord[], gateId: string): GateRecord {
  const gate = gates.find((candidate) => candidate.gate_id === gateId);
  if (!gate) {
    throw EngineError.terminal("gate.not_found", `no gate "${gateId}" in this run`);
  }
  if (gate.status !== "open") {
    throw EngineError.terminal(
      gate.status === "answered" ? "gate.answered" : "gate.expired",
      `gate ${gateId} is already ${gate.status}`,
    );
  }
  return gate;
}
