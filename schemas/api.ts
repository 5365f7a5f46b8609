import { z } from "zod";
import { JsonValue } from "./common.ts";
import { DefinitionKind } from "./definitions.ts";
import { Failure, NodeStatus, RunMode, RunStatus, Usage } from "./run.ts";

/** `POST /v1/workflows/{id}/runs` body. */
export const StartRunBody = z.strictObject({
  input: JsonValue.optional(),
  version: z.number().int().min(1).optional(),
  idempotency_key: z.string().min(1).max(256).optional(),
  mode: RunMode.optional(),
});
export type StartRunBody = z.infer<typeof StartRunBody>;

export const CreatedDefinition = z.strictObject({
  kind: DefinitionKind,
  id: z.string(),
  version: z.number().int().min(1),
});
export type CreatedDefinition = z.infer<typeof CreatedDefinition>;

/** `POST /v1/definitions` → 201. `existing` is true when identical content already had that version. */
export const RegisterResponse = z.strictObject({
  created: z.array(CreatedDefinition.extend({ existing: z.boolean() })),
});
export type RegisterResponse = z.infer<typeof RegisterResponse>;

/** A stored definition as `GET /v1/{kind}/{id}` returns it. */
export const DefinitionRecord = z.strictObject({
  kind: DefinitionKind,
  id: z.string(),
  version: z.number().int().min(1),
  created_at: z.string(),
  definition: z.record(z.string(), JsonValue),
});
export type DefinitionRecord = z.infer<typeof DefinitionRecord>;

export const NodeView = z.strictObject({
  status: NodeStatus,
  attempts: z.number().int(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  error: Failure.optional(),
  items: z
    .strictObject({
      total: z.number().int(),
      pending: z.number().int(),
      running: z.number().int(),
      completed: z.number().int(),
      failed: z.number().int(),
    })
    .optional(),
});
export type NodeView = z.infer<typeof NodeView>;

/** `GET /v1/runs/{run_id}` (brief §5). */
export const RunView = z.strictObject({
  run_id: z.string(),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  status: RunStatus,
  mode: RunMode,
  input: JsonValue,
  output: JsonValue.nullable(),
  error: Failure.nullable(),
  created_at: z.string(),
  updated_at: z.string(),
  nodes: z.record(z.string(), NodeView),
  gates: z.array(z.record(z.string(), JsonValue)),
  /** LLM tokens and cost so far. */
  usage: Usage,
});
export type RunView = z.infer<typeof RunView>;

/** `POST /v1/workflows/{id}/runs` → 201 (new) or 200 (same idempotency key). */
export const StartRunResponse = z.strictObject({
  run_id: z.string(),
  status: RunStatus,
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
});
export type StartRunResponse = z.infer<typeof StartRunResponse>;

/** The error body of every 4xx/5xx. */
export const ErrorBody = z.strictObject({
  error: z.strictObject({
    code: z.string(),
    message: z.string(),
    details: z.array(z.strictObject({ path: z.string(), message: z.string(), code: z.string().optional() })).optional(),
  }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;
