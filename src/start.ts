/**
 * STAND-IN until the shared typed start lands on main: the same names and
 * signature, without recording the trigger on the run. Replaced by main's
 * src/start.ts on merge.
 */
import { resolveSnapshot } from "../catalog/snapshots.ts";
import type { CreateRunOutcome } from "../coordinator/index.ts";
import { EngineError } from "../lib/errors.ts";
import { runIdFor, sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import type { RunMode } from "../schemas/run.ts";
import { parseReference, type Json } from "../schemas/common.ts";
import { createRun } from "./service.ts";

export type RunTrigger =
  | { kind: "api" }
  | { kind: "plan" }
  | { kind: "parent"; run_id: string; key: string }
  | { kind: "schedule"; schedule: string; version: number; scheduled_at: string }
  | { kind: "event"; event_id: string; name: string }
  | { kind: "webhook"; webhook: string; event_id: string; name: string };

export interface TriggeredStart {
  workflow: string;
  input: Json;
  trigger: RunTrigger;
  key: string;
  created_by: string;
  mode?: RunMode;
}

export async function startTriggeredRun(env: Env, start: TriggeredStart): Promise<CreateRunOutcome> {
  const reference = parseReference(start.workflow);
  if (reference === undefined) {
    throw EngineError.terminal("workflow.not_found", `"${start.workflow}" is not a workflow reference`);
  }
  const snapshot = await resolveSnapshot(env, reference.id, reference.version);
  const mode = start.mode ?? "auto";
  return createRun(
    env,
    {
      run_id: await runIdFor(`${start.trigger.kind}\n${start.key}`),
      snapshot,
      input: start.input,
      mode,
      idempotency_key: null,
      request_hash: await sha256Hex(canonicalJson({ trigger: start.trigger.kind, key: start.key })),
      created_by: start.created_by,
    },
    0,
  );
}
