/**
 * Shapes of the listing routes the console reads (docs/api.md): the run index
 * (`GET /v1/runs`) and the definition listings (`GET /v1/{kind}`,
 * `GET /v1/{kind}/{id}/versions`). Loose objects: the console reads these
 * fields and tolerates new ones. Everything else is parsed with the API's own
 * schemas (schemas/api.ts, schemas/journal.ts).
 */
import { z } from "zod";
import { RunMode, RunStatus } from "../../schemas/run.ts";

const WorkflowRef = z.looseObject({ id: z.string(), version: z.number().int() });

export const RunSummary = z.looseObject({
  run_id: z.string(),
  workflow: WorkflowRef,
  status: RunStatus,
  mode: RunMode,
  /** The parent run of a child run (its id, or the run view's `{ run_id, node, step }`). */
  parent: z.union([z.string(), z.looseObject({ run_id: z.string() })]).nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  /** The run's error code (or its error), when it failed. */
  error: z.unknown().optional(),
});
export type RunSummary = z.infer<typeof RunSummary>;

export const RunList = z.looseObject({ runs: z.array(RunSummary), next_cursor: z.string().nullable() });
export type RunList = z.infer<typeof RunList>;

export const DefinitionSummary = z.looseObject({
  id: z.string(),
  version: z.number().int(),
  created_at: z.string(),
  description: z.string().optional(),
});
export type DefinitionSummary = z.infer<typeof DefinitionSummary>;

export const DefinitionList = z.looseObject({
  definitions: z.array(DefinitionSummary),
  next_cursor: z.string().nullable(),
});

export const DefinitionVersions = z.looseObject({
  versions: z.array(DefinitionSummary),
  next_cursor: z.string().nullable(),
});

/** The run's own entry of the events stream, kept as received: the verifier checks these exact values. */
export const RawEntry = z.looseObject({
  seq: z.number().int(),
  kind: z.string(),
  at: z.string(),
  body: z.record(z.string(), z.unknown()),
});
export type RawEntry = z.infer<typeof RawEntry>;

/** The parent run's id of a listed run, or null. */
export function parentRunId(run: RunSummary): string | null {
  return run.parent === null ? null : typeof run.parent === "string" ? run.parent : run.parent.run_id;
}
