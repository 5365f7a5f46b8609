import { z } from "zod";
import { ApprovedSteps, JsonSchema, JsonValue, PlanTools } from "./common.ts";
import { RunMode } from "./run.ts";
import { Failure } from "./errors.ts";
import { Priority } from "./limits.ts";

/**
 * Agent plans (docs/plans.md): the two notations `POST /v1/plans` accepts as
 * they are, and the request around them. A plan compiles into a workflow
 * snapshot (plans/compile.ts) and runs as a run like any other.
 */

/** How a plan step names what it calls: a registered action (`id`, `id@n`), `tool:<name>` or `mcp:<server>/<tool>`. */
export const PlanTool = z.string().min(1).max(200);

/** The dependency notation's executor config; every field has the notation's own default. */
export const DependencyPlanConfig = z.strictObject({
  /** @default 5 */
  maxParallelExecutions: z.number().int().min(1).max(1000).optional(),
  /** Per tool call, in ms. @default 30000 */
  toolTimeout: z.number().int().min(1).max(86_400_000).optional(),
  /** Retries after a first failed attempt (infrastructure errors only). @default 3 */
  maxRetries: z.number().int().min(0).max(99).optional(),
  /** Delay before the first retry, in ms. @default 1000 */
  retryDelay: z.number().int().min(0).max(86_400_000).optional(),
  /** Stop the plan at the first failed step. @default false */
  failFast: z.boolean().optional(),
});
export type DependencyPlanConfig = z.infer<typeof DependencyPlanConfig>;

/** The defaults of the dependency notation (its own documentation). */
export const PLAN_CONFIG_DEFAULTS = {
  maxParallelExecutions: 5,
  toolTimeout: 30_000,
  maxRetries: 3,
  retryDelay: 1000,
  failFast: false,
} as const satisfies Required<DependencyPlanConfig>;

const Risk = z.enum(["low", "medium", "high"]);

/** Dependency notation: steps by position, `params` with `${step[N].data…}` references, numeric `depends_on`. */
export const DependencyStep = z.strictObject({
  tool: PlanTool,
  params: z.record(z.string(), JsonValue).optional(),
  depends_on: z.array(z.number().int().min(0)).optional(),
  /** Accepted and ignored: steps with no path between them run in parallel anyway. */
  parallel: z.boolean().optional(),
  /** Raises (never lowers) the risk of what the step calls. */
  risk: Risk.optional(),
});
export type DependencyStep = z.infer<typeof DependencyStep>;

/** The step ids of the placeholder notation: `step-01`, also the node ids of the compiled graph. */
export const PLAN_STEP_ID_PATTERN = /^[a-z][a-z0-9_]*(-[a-z0-9_]+)*$/;

/** Placeholder notation: steps with ids and `args` holding `$step-01.path` placeholders. */
export const PlaceholderStep = z.strictObject({
  id: z.string().max(40).regex(PLAN_STEP_ID_PATTERN, "must be a step id like step-01"),
  tool: PlanTool,
  args: z.record(z.string(), JsonValue).optional(),
  /** Optional: the steps it references are its dependencies anyway. */
  depends_on: z.array(z.string()).optional(),
  risk: Risk.optional(),
  description: z.string().max(2000).optional(),
});
export type PlaceholderStep = z.infer<typeof PlaceholderStep>;

export const DependencyPlan = z.strictObject({
  steps: z.array(DependencyStep).min(1).max(200),
  config: DependencyPlanConfig.optional(),
  /** The inputs the plan needs (JSON Schema of an object); missing ones are asked through an input gate. */
  inputs: JsonSchema.optional(),
});
export type DependencyPlan = z.infer<typeof DependencyPlan>;

export const PlaceholderPlan = z.strictObject({
  steps: z.array(PlaceholderStep).min(1).max(200),
  config: DependencyPlanConfig.optional(),
  inputs: JsonSchema.optional(),
  /** The step the plan routes to when a step's placeholders do not resolve (`plan.args_unresolved`). */
  fallback: z.string().optional(),
});
export type PlaceholderPlan = z.infer<typeof PlaceholderPlan>;

/** `POST /v1/plans` body. */
export const PlanRequest = z.strictObject({
  plan: z.record(z.string(), JsonValue),
  /** The run's capability allowlist: registered actions (`id`, `id@n`), `tool:<name>`, `mcp:<server>/<tool>` (or `/*`). */
  tools: PlanTools,
  input: z.record(z.string(), JsonValue).optional(),
  mode: RunMode.optional(),
  /** High-risk steps that run without an approval gate (when the deployment allows it). */
  approved_steps: ApprovedSteps.optional(),
  idempotency_key: z.string().min(1).max(256).optional(),
  /** The run's place in the queues of limits: 0 (lowest) to 9 (highest). @default 5 */
  priority: Priority.optional(),
});
export type PlanRequest = z.infer<typeof PlanRequest>;

/** `POST /v1/runs/{id}/approve` body: optional, `approved_steps` answers every matching open approval gate. */
export const ApproveBody = z.object({
  approved_steps: ApprovedSteps.optional(),
  reason: z.string().max(2000).optional(),
});
export type ApproveBody = z.infer<typeof ApproveBody>;

/** One step of the compiled graph, as a preview and the journal show it. */
export const PlannedStep = z.strictObject({
  id: z.string(),
  tool: z.string(),
  depends_on: z.array(z.string()),
  risk: Risk,
  /** The JSONPath a step is expanded over (one call per item), when it is. */
  expands_over: z.string().nullable(),
  /** The compiled input mapping: each arg as a literal, a JSONPath over the run context, or a `concat` of both (references in text). */
  args: z.record(z.string(), JsonValue),
});
export type PlannedStep = z.infer<typeof PlannedStep>;

/** The compiled graph: steps in dependency layers, expansions, high-risk steps, the approval policy. */
export const PlanGraph = z.strictObject({
  notation: z.enum(["dependency", "placeholder"]),
  layers: z.array(z.array(z.string())),
  steps: z.array(PlannedStep),
  expansions: z.array(z.strictObject({ step: z.string(), over: z.string(), implicit: z.boolean() })),
  high_risk: z.array(z.string()),
  inputs_gate: z.boolean(),
  fallback: z.string().nullable(),
  config: z.strictObject({
    maxParallelExecutions: z.number(),
    toolTimeout: z.number(),
    maxRetries: z.number(),
    retryDelay: z.number(),
    failFast: z.boolean(),
  }),
  approvals: z.strictObject({
    /** Whether this deployment lets a request pre-approve high-risk steps (`PLAN_PREAPPROVAL`). */
    preapproval_allowed: z.boolean(),
    approved_steps: z.array(z.string()),
  }),
});
export type PlanGraph = z.infer<typeof PlanGraph>;

/** `POST /v1/plans` → like a run start, plus the compiled graph. */
export const StartPlanResponse = z.strictObject({
  run_id: z.string().nullable(),
  status: z.string(),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  graph: PlanGraph,
  /** Only when the start waited for its run and saw it end (`Prefer: wait=N`). */
  output: JsonValue.nullable().optional(),
  error: Failure.nullable().optional(),
});
export type StartPlanResponse = z.infer<typeof StartPlanResponse>;

/** One ToolResult of the dependency notation, per step in plan order. */
export const ToolResult = z.strictObject({
  step: z.string(),
  success: z.boolean(),
  tool: z.string(),
  data: JsonValue,
  error: z.strictObject({ code: z.string(), message: z.string() }).optional(),
  metadata: z.strictObject({
    executionTime: z.number(),
    timestamp: z.string().nullable(),
    retries: z.number().int(),
  }),
});
export type ToolResult = z.infer<typeof ToolResult>;

/**
 * What a plan run's first journal entry (`run.created`) records of its plan:
 * the plan exactly as the agent gave it, the allowlist, the graph it compiled
 * to, and the SHA-256 of the compiled workflow (canonical JSON) the run keeps
 * in its snapshot.
 */
export const PlanOrigin = z.strictObject({
  notation: z.enum(["dependency", "placeholder"]),
  given: z.record(z.string(), JsonValue),
  tools: z.array(z.string()),
  graph: PlanGraph,
  workflow_sha256: z.string(),
});
export type PlanOrigin = z.infer<typeof PlanOrigin>;
