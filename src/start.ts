import type { CreateRunOutcome } from "../coordinator/index.ts";
import { runIdFor, sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import { parseReference, type Json } from "../schemas/common.ts";
import type { RunMode, RunTrigger } from "../schemas/run.ts";
import { resolveSnapshot } from "../catalog/snapshots.ts";
import { EngineError } from "../lib/errors.ts";
import { createRun } from "./service.ts";

/**
 * A run that something other than a caller starts: a schedule's slot, an event
 * a workflow's trigger takes, a webhook's delivery. Its identity is its key:
 * the same key (within its trigger's kind) is the same run, so a slot fired
 * twice or an event delivered twice starts one run.
 */
export interface TriggeredStart {
  /** A workflow id (its latest version) or `id@n`. */
  workflow: string;
  input: Json;
  trigger: Extract<RunTrigger, { kind: "schedule" | "event" | "webhook" }>;
  /** What makes the run this one: e.g. `<schedule>\n<scheduled_at>`, `<event id>\n<workflow>`. */
  key: string;
  /** Who asks, for `created_by`: `schedule:<id>`, `event:<name>`, `webhook:<id>`. */
  created_by: string;
  mode?: RunMode;
}

/**
 * Starts the run, or finds it (`created: false`) when its key already started
 * one. Throws what a start refuses, as an `EngineError` with a dotted code:
 * `workflow.not_found`, `run.invalid_input` (the workflow's `input_schema`),
 * `run.idempotency_conflict` (the key's run was started with another request).
 */
export async function startTriggeredRun(env: Env, start: TriggeredStart): Promise<CreateRunOutcome> {
  const reference = parseReference(start.workflow);
  if (reference === undefined) {
    throw EngineError.terminal("workflow.not_found", `"${start.workflow}" is not a workflow reference`);
  }
  const snapshot = await resolveSnapshot(env, reference.id, reference.version);
  const mode = start.mode ?? "auto";
  const key = `${start.trigger.kind}\n${start.key}`;
  return createRun(
    env,
    {
      run_id: await runIdFor(key),
      snapshot,
      input: start.input,
      mode,
      idempotency_key: key,
      request_hash: await sha256Hex(canonicalJson({ workflow: start.workflow, input: start.input, mode, key })),
      created_by: start.created_by,
      trigger: start.trigger,
    },
    0,
  );
}
