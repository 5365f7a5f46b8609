import { z } from "zod";
import { Action, InlineAction, McpServer, Model, Prompt } from "./actions.ts";
import {
  CelSource,
  DefinitionId,
  Description,
  InputMapping,
  JsonSchema,
  OutputMapping,
  Reference,
  RetryPolicy,
  TimeoutMs,
  WorkflowChoice,
} from "./common.ts";
import { Schedule } from "./schedules.ts";
import { EventName } from "./events.ts";
import { Webhook } from "./webhooks.ts";
import { Limit, LimitUses } from "./limits.ts";

// ─── Tasks ───────────────────────────────────────────────────────────────────

export const STEP_REF_PATTERN = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;

export const Step = z.strictObject({
  ref: z.string().regex(STEP_REF_PATTERN, "must match ^[A-Za-z_][A-Za-z0-9_-]{0,62}$"),
  description: Description,
  action: z.union([Reference, InlineAction]),
  input_mapping: InputMapping.optional(),
  output_mapping: OutputMapping.optional(),
  condition: z
    .strictObject({
      if: CelSource,
      else: z.enum(["skip", "succeed", "fail"]).optional(),
    })
    .optional(),
  on_failure: z.enum(["abort", "retry", "continue"]).optional(),
});
export type Step = z.infer<typeof Step>;

export const Task = z.strictObject({
  id: DefinitionId,
  description: Description,
  input_schema: JsonSchema.optional(),
  output_schema: JsonSchema.optional(),
  steps: z.array(Step).min(1),
});
export type Task = z.infer<typeof Task>;

export const InlineTask = Task.extend({ id: DefinitionId.optional() });
export type InlineTask = z.infer<typeof InlineTask>;

// ─── Workflows ───────────────────────────────────────────────────────────────

export const NODE_ID_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

/** A capability on the run's allowlist: `mcp:<server>/<tool>` or `tool:<name>`. */
export const ToolGrant = z
  .string()
  .regex(/^(mcp:[a-z][a-z0-9_-]{0,62}\/\S+|tool:[a-z][a-z0-9_]*)$/, 'must be "mcp:<server>/<tool>" or "tool:<name>"');

export const Node = z
  .strictObject({
    description: Description,
    task: z.union([Reference, InlineTask]).optional(),
    workflow: z.union([Reference, WorkflowChoice]).optional(),
    depends_on: z.array(z.string().regex(NODE_ID_PATTERN, "must be a node id")).optional(),
    when: CelSource.optional(),
    foreach: z
      .strictObject({
        items: z.string().startsWith("$", "must be a JSONPath starting with $"),
        max_parallel: z.number().int().min(1).max(1000).optional(),
      })
      .optional(),
    repeat: z.strictObject({ until: CelSource, max_iterations: z.number().int().min(1).max(10_000) }).optional(),
    input_mapping: InputMapping.optional(),
    output_mapping: OutputMapping.optional(),
    resource_bindings: z.record(z.string().min(1), z.string().min(1)).optional(),
    retry: RetryPolicy.optional(),
    timeout_ms: TimeoutMs.optional(),
    on_failure: z.enum(["fail", "continue"]).optional(),
  })
  .check((ctx) => {
    const hasTask = ctx.value.task !== undefined;
    const hasWorkflow = ctx.value.workflow !== undefined;
    if (hasTask === hasWorkflow) {
      ctx.issues.push({
        code: "custom",
        input: ctx.value,
        path: [],
        message: 'a node runs exactly one of "task" or "workflow"',
      });
    }
  });
export type Node = z.infer<typeof Node>;

/**
 * When a run's enqueued undos run (docs/definitions.md, "Undo and
 * compensation"): after it fails, after it is cancelled, either, or never
 * on its own (`POST /v1/runs/{id}/compensate` still runs them by hand).
 */
export const COMPENSATE_POLICIES = ["on_failure", "on_cancel", "always", "never"] as const;
export const CompensatePolicy = z.enum(COMPENSATE_POLICIES);
export type CompensatePolicy = z.infer<typeof CompensatePolicy>;
/** A workflow that says nothing compensates whenever it does not complete. */
export const DEFAULT_COMPENSATE_POLICY: CompensatePolicy = "always";

/** The longest a retention may keep a run, in days (100 years): past it, say nothing and keep the run. */
export const MAX_RETENTION_DAYS = 36_500;
const RetentionDays = z
  .number()
  .positive("must be more than 0 (leave it out to keep such runs)")
  .max(MAX_RETENTION_DAYS, `must be at most ${MAX_RETENTION_DAYS} days`);

/**
 * How long the run's object keeps a run after it ended, per terminal status
 * (docs/definitions.md, "Retention"): days, fractions allowed; a status with
 * no days here takes the deployment's default (`RETENTION_<STATUS>_DAYS`),
 * and with none there either the run is kept. `archive: true` writes the
 * journal to R2 first, where `GET /v1/runs/{id}/journal` still reads it.
 */
export const Retention = z.strictObject({
  completed_days: RetentionDays.optional(),
  failed_days: RetentionDays.optional(),
  cancelled_days: RetentionDays.optional(),
  /** @default false (or the deployment's RETENTION_ARCHIVE) */
  archive: z.boolean().optional(),
});
export type Retention = z.infer<typeof Retention>;

/** The most triggers one workflow declares. */
export const MAX_TRIGGERS_PER_WORKFLOW = 10;
/** The most workflows (latest versions) with a trigger on one event name: each event of it starts at most this many runs. */
export const MAX_TRIGGERED_WORKFLOWS_PER_EVENT = 100;

/**
 * An event trigger (docs/definitions.md, "Event triggers"): each event named
 * `event` whose `if` (CEL over `event`) holds starts one run of the workflow's
 * latest version, once per (event id, workflow). `input` maps the run's input
 * from the event: JSONPath and templates read the event itself
 * (`$.data.order_id`), CEL sees it as `event`; without it the run's input is
 * the event's `data`.
 */
export const WorkflowTrigger = z.strictObject({
  event: EventName,
  if: CelSource.optional(),
  input: InputMapping.optional(),
});
export type WorkflowTrigger = z.infer<typeof WorkflowTrigger>;

/** A trigger as the catalog's index answers it: with the workflow (its latest version) that declares it. */
export const IndexedTrigger = WorkflowTrigger.extend({ workflow: DefinitionId, version: z.number().int().min(1) });
export type IndexedTrigger = z.infer<typeof IndexedTrigger>;

/** The catalog's answer to "which workflows start on this event name": their triggers on it, by workflow id, in declared order. */
export const TriggerList = z.strictObject({
  triggers: z.array(IndexedTrigger).max(MAX_TRIGGERED_WORKFLOWS_PER_EVENT * MAX_TRIGGERS_PER_WORKFLOW),
});
export type TriggerList = z.infer<typeof TriggerList>;

/** `mcp` on a workflow (docs/mcp.md): `expose: true` makes it a tool of `/v1/mcp` named after its id; `description` overrides the workflow's. */
export const WorkflowMcp = z.strictObject({
  expose: z.boolean(),
  description: Description,
});
export type WorkflowMcp = z.infer<typeof WorkflowMcp>;

/** The prefix of the server's own tools: an exposed workflow may not be named with it (registration refuses it). */
export const MCP_TOOL_PREFIX = "trellis_";

export const Workflow = z.strictObject({
  id: DefinitionId,
  description: Description,
  input_schema: JsonSchema.optional(),
  output_schema: JsonSchema.optional(),
  max_parallel: z.number().int().min(1).max(1000).optional(),
  /** Limits on this workflow's runs: a run beyond one waits `queued` before its first node. */
  limits: LimitUses.optional(),
  fail_fast: z.boolean().optional(),
  timeout_ms: z.number().int().min(1).max(31_536_000_000).optional(),
  tools: z.array(ToolGrant).optional(),
  /** @default "always" */
  compensate: CompensatePolicy.optional(),
  /** When the run's object deletes the run once it ended; absent: the deployment's defaults. */
  retention: Retention.optional(),
  resources: z.record(z.string().min(1), z.strictObject({ type: z.literal("container") })).optional(),
  triggers: z
    .array(WorkflowTrigger)
    .max(MAX_TRIGGERS_PER_WORKFLOW, `a workflow declares at most ${MAX_TRIGGERS_PER_WORKFLOW} triggers`)
    .optional(),
  /** A tool of the MCP server at `/v1/mcp` (docs/mcp.md), named after the workflow's id. */
  mcp: WorkflowMcp.optional(),
  nodes: z
    .record(z.string().regex(NODE_ID_PATTERN, "node ids must match ^[a-z][a-z0-9_-]{0,62}$"), Node)
    .refine((nodes) => Object.keys(nodes).length > 0, "a workflow needs at least one node"),
});
export type Workflow = z.infer<typeof Workflow>;

// ─── Bundles ─────────────────────────────────────────────────────────────────

/** The kinds of definition, as written in a bundle. */
export const DEFINITION_KINDS = [
  "workflows",
  "tasks",
  "actions",
  "prompts",
  "models",
  "mcp_servers",
  "schedules",
  "webhooks",
  "limits",
] as const;
export const DefinitionKind = z.enum(DEFINITION_KINDS);
export type DefinitionKind = z.infer<typeof DefinitionKind>;

/** The schema of one definition of each kind. */
export const DEFINITION_SCHEMAS = {
  workflows: Workflow,
  tasks: Task,
  actions: Action,
  prompts: Prompt,
  models: Model,
  mcp_servers: McpServer,
  schedules: Schedule,
  webhooks: Webhook,
  limits: Limit,
} as const satisfies Record<DefinitionKind, z.ZodType>;

export type DefinitionOf<K extends DefinitionKind> = z.infer<(typeof DEFINITION_SCHEMAS)[K]>;
export type Definition = DefinitionOf<DefinitionKind>;

/** `POST /v1/definitions` body. */
export const DefinitionBundle = z
  .strictObject({
    workflows: z.array(Workflow).optional(),
    tasks: z.array(Task).optional(),
    actions: z.array(Action).optional(),
    prompts: z.array(Prompt).optional(),
    models: z.array(Model).optional(),
    mcp_servers: z.array(McpServer).optional(),
    schedules: z.array(Schedule).optional(),
    webhooks: z.array(Webhook).optional(),
    limits: z.array(Limit).optional(),
  })
  .refine(
    (bundle) => DEFINITION_KINDS.some((kind) => (bundle[kind]?.length ?? 0) > 0),
    "a bundle needs at least one definition",
  );
export type DefinitionBundle = z.infer<typeof DefinitionBundle>;
