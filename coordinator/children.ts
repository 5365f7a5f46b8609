import { z } from "zod";
import { JsonValue, type GateRecord, type GateView } from "../schemas/index.ts";

/** Child → parent: the child ended, with its output or error and its attestation. */
export const ChildNotification = z.strictObject({
  key: z.string(),
  run_id: z.string().nullable(),
  status: z.enum(["completed", "failed", "cancelled"]),
  output: JsonValue,
  error: z.strictObject({ code: z.string(), message: z.string() }).nullable(),
  attestation: z.strictObject({ seq: z.number().int(), hash: z.string() }).nullable(),
});
export type ChildNotification = z.infer<typeof ChildNotification>;

const iso = (ms: number | null | undefined): string | null => (ms === null || ms === undefined ? null : new Date(ms).toISOString());

/** A gate as the API shows it. */
export function toGateView(gate: GateRecord): GateView {
  return {
    gate_id: gate.gate_id,
    kind: gate.kind,
    node: gate.node,
    item: gate.item,
    step: gate.step,
    prompt: gate.prompt,
    input_schema: gate.input_schema,
    status: gate.status,
    opened_at: new Date(gate.opened_at).toISOString(),
    expires_at: iso(gate.expires_at),
    ...(gate.response === undefined ? {} : { response: gate.response }),
    ...(gate.responder === undefined ? {} : { responder: gate.responder }),
    ...(gate.responded_at === undefined ? {} : { responded_at: iso(gate.responded_at) }),
    ...(gate.reason === undefined ? {} : { reason: gate.reason }),
  };
}
