/**
 * STAND-IN (schedules branch only): the one typed start with a trigger, reduced to
 * what the schedule objects call. Replaced by the real start when it lands on main.
 */
import { resolveSnapshot } from "../catalog/snapshots.ts";
import type { CreateRunOutcome } from "../coordinator/index.ts";
import { assertValidInput } from "../coordinator/requests.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import { runIdFor, sha256Hex } from "../lib/ids.ts";
import { parseReference, type Json } from "../schemas/common.ts";
import type { RunMode } from "../schemas/run.ts";
import { EngineError } from "../lib/errors.ts";
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
  assertValidInput(snapshot, start.input);
  const mode = start.mode ?? "auto";
  return createRun(
    env,
    {
      run_id: await runIdFor(`${start.trigger.kind}\n${start.key}`),
      snapshot,
      input: start.input,
      mode,
      idempotency_key: start.key,
      request_hash: await sha256Hex(canonicalJson({ workflow: start.workflow, input: start.input, mode })),
      created_by: start.created_by,
    },
    0,
  );
}
