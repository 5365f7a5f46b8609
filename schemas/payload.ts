import { z } from "zod";
import { JsonValue } from "./common.ts";
import { ResolvedTask } from "./resolved.ts";

/** A container the coordinator resolved for this task (`resource_bindings` → Durable Object id). */
export const ResourceHandle = z.strictObject({
  type: z.literal("container"),
  id: z.string().min(1),
});
export type ResourceHandle = z.infer<typeof ResourceHandle>;

/** The task context: `input` is immutable, `state` accumulates, `output` becomes the result. */
export const TaskContext = z.strictObject({
  input: JsonValue,
  state: z.record(z.string(), JsonValue),
  output: z.record(z.string(), JsonValue),
});
export type TaskContext = z.infer<typeof TaskContext>;

/** Coordinator → executor: one attempt of one task invocation (brief §3). */
export const TaskPayload = z.strictObject({
  /** Names this dispatch; a result is accepted at most once, and only for the current token. */
  token_id: z.string().min(1),
  workflow_run_id: z.string().min(1),
  node_id: z.string().min(1),
  /** The foreach item this invocation serves, or null. */
  item_index: z.number().int().min(0).nullable(),
  task_id: z.string().min(1),
  task_version: z.number().int().min(0),
  /** The task as resolved when the run started, so the executor needs no lookup. */
  task: ResolvedTask,
  input: JsonValue,
  resources: z.record(z.string(), ResourceHandle),
  /** Bound on this attempt, measured by the executor from when it starts. */
  timeout_ms: z.number().int().min(1),
  /** 0 for the first attempt, 1 for the first retry, … */
  retry_attempt: z.number().int().min(0),
  /** The run's capability allowlist (`workflow.tools`); an empty list allows nothing. */
  tools: z.array(z.string()),
});
export type TaskPayload = z.infer<typeof TaskPayload>;

export const TaskError = z.strictObject({
  /** A dotted error code, e.g. `http.status`, `step.timeout`, `action.invalid_input`. */
  type: z.string().min(1),
  step_ref: z.string().nullable(),
  message: z.string(),
  retryable: z.boolean(),
  retry_after_ms: z.number().int().min(0).optional(),
  /** The task context when the task failed (redacted of nothing secret: secrets never enter it). */
  context_snapshot: TaskContext.nullable(),
});
export type TaskError = z.infer<typeof TaskError>;

export const TaskMetrics = z.strictObject({
  duration_ms: z.number().min(0),
  steps_executed: z.number().int().min(0),
  llm_tokens: z.strictObject({
    input: z.number().int().min(0),
    output: z.number().int().min(0),
    cost_usd: z.number().min(0),
  }),
});
export type TaskMetrics = z.infer<typeof TaskMetrics>;

/** Executor → coordinator. Errors travel as data, never as thrown objects. */
export const TaskResult = z.strictObject({
  token_id: z.string().min(1),
  success: z.boolean(),
  output: JsonValue.optional(),
  error: TaskError.optional(),
  metrics: TaskMetrics,
});
export type TaskResult = z.infer<typeof TaskResult>;
