import type { CreateRunRequest } from "../../coordinator/create.ts";
import type { Json } from "../../schemas/common.ts";
import type { RunSnapshot } from "../../schemas/resolved.ts";

/** A run's creation as an `auto` start over the API makes it: the request the decide tests build states from. */
export function apiStartRequest(runId: string, snapshot: RunSnapshot, input: Json = {}): CreateRunRequest {
  return {
    run_id: runId,
    snapshot,
    input,
    mode: "auto",
    idempotency_key: null,
    request_hash: "hash",
    created_by: "token:tester",
    trigger: { kind: "api" },
  };
}
