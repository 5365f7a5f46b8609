import type { JSONRPCRequest } from "@modelcontextprotocol/sdk/types.js";
import { isApprover } from "../../coordinator/approvers.ts";
import { toHex } from "../../lib/journal/encoding.ts";
import type { GateView } from "../../schemas/api.ts";
import type { Principal } from "../../schemas/auth.ts";
import { ElicitationResponse } from "../../schemas/mcp.ts";
import { accessOf, assertRunVisible, authorize, hasRole } from "../access.ts";
import { answererOf } from "../gate-links.ts";
import { answerGate } from "../service.ts";
import { toElicitationSchema } from "./schema-map.ts";

/**
 * A run's open gate asked through MCP elicitation (docs/mcp.md, "Gates"). The
 * tool call that follows the run sends `elicitation/create` on its own
 * response stream; the client answers in a new POST, which may reach another
 * isolate than the call's. So the request's id names the run and the gate
 * (`trellis.gate/<run>/<gate>/<nonce>`), and whichever request carries the
 * answer applies it, as `POST /v1/runs/{run}/gates/{gate}` would, with its
 * own caller's identity; the call sees the gate answered through the run.
 */

const ID_PREFIX = "trellis.gate";
const ID_PATTERN = /^trellis\.gate\/([^/]+)\/([^/]+)\/[0-9a-f]{16}$/;
/** What a gate answered by elicitation says in its `responder` note. */
export const ELICITATION_RESPONDER = "mcp elicitation";

/** The elicitation that asks `gate` of `principal`, or null when it may not answer it or the form cannot say its schema. */
export function toElicitation(runId: string, gate: GateView, principal: Principal): JSONRPCRequest | null {
  const requestedSchema = toElicitationSchema(gate.input_schema);
  if (requestedSchema === null || !mayAnswer(gate, principal)) {
    return null;
  }
  return {
    jsonrpc: "2.0",
    id: `${ID_PREFIX}/${runId}/${gate.gate_id}/${toHex(crypto.getRandomValues(new Uint8Array(8)))}`,
    method: "elicitation/create",
    params: { mode: "form", message: gate.prompt, requestedSchema },
  };
}

/** Whether the principal may answer the gate: the role the gate route needs, and one of its approvers. */
function mayAnswer(gate: GateView, principal: Principal): boolean {
  return hasRole(principal, accessOf("answerGate").role) && isApprover(gate.approvers, answererOf(principal));
}

/** The run and gate an elicitation's id names, or null for an id this server did not make. */
export function elicitedGate(id: unknown): { runId: string; gateId: string } | null {
  const match = typeof id === "string" ? ID_PATTERN.exec(id) : null;
  if (match?.[1] === undefined || match[2] === undefined) {
    return null;
  }
  return { runId: match[1], gateId: match[2] };
}

/** Whether a JSON-RPC message is a client's response to a gate's elicitation. */
export function isElicitationResponse(message: unknown): boolean {
  const parsed = ElicitationResponse.safeParse(message);
  return parsed.success && parsed.data.result !== undefined && elicitedGate(parsed.data.id) !== null;
}

/**
 * Applies a client's answer to a gate's elicitation: an `accept` answers the
 * gate with its content, through the gate route's checks (role, the run
 * visible to the caller, approvers, the gate's schema); a `decline` or
 * `cancel` leaves it open. Throws what the gate route would answer.
 */
export async function applyElicitationResponse(env: Env, principal: Principal, message: unknown): Promise<void> {
  const response = ElicitationResponse.parse(message);
  const target = elicitedGate(response.id);
  if (target === null || response.result?.action !== "accept") {
    return;
  }
  authorize(principal, accessOf("answerGate"));
  await assertRunVisible(env, principal, target.runId);
  const body = { response: response.result.content ?? {}, responder: ELICITATION_RESPONDER };
  await answerGate(env, target.runId, target.gateId, body, answererOf(principal));
}
