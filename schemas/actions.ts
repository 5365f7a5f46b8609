import { z } from "zod";
import { Approvers } from "./approvers.ts";
import {
  ApprovedSteps,
  CelSource,
  DefinitionId,
  Description,
  JsonSchema,
  InputMapping,
  JsonValue,
  PlanTools,
  Reference,
  RetryPolicy,
  TimeoutMs,
  WorkflowChoice,
} from "./common.ts";
import { EventName, MAX_WAIT_NAMES } from "./events.ts";
import { LimitUses } from "./limits.ts";

// ─── Prompts, models, MCP servers ────────────────────────────────────────────

/**
 * A URL, or one that starts with a declared `$env:NAME` (a var or secret the
 * deployment lists: lib/secrets.ts), such as `$env:LLM_SERVER_URL/v1`,
 * resolved at call time; so one definition serves every deployment.
 */
export const EnvUrl = z.union([
  z.url(),
  z.string().regex(/^\$env:[A-Z_][A-Z0-9_]*(\/\S*)?$/, "expected a URL, or $env:NAME followed by an optional /path"),
]);

export const PromptMessage = z.strictObject({
  role: z.enum(["system", "user", "assistant"]),
  template: z.string(),
});

export const Prompt = z.strictObject({
  id: DefinitionId,
  description: Description,
  messages: z.array(PromptMessage).min(1),
  produces: JsonSchema.optional(),
});
export type Prompt = z.infer<typeof Prompt>;

export const MODEL_PROVIDERS = ["openai", "anthropic", "workers-ai", "openai-compatible"] as const;

export const Model = z.strictObject({
  id: DefinitionId,
  description: Description,
  provider: z.enum(MODEL_PROVIDERS),
  model_id: z.string().min(1),
  base_url: EnvUrl.optional(),
  api_key: z.string().optional(),
  parameters: z.record(z.string(), JsonValue).optional(),
  pricing: z.strictObject({ input_per_mtok: z.number().min(0), output_per_mtok: z.number().min(0) }).optional(),
  /** Limits on calls to this model (and, with `tokens`, on their tokens), in any run. */
  limits: LimitUses.optional(),
});
export type Model = z.infer<typeof Model>;

export const McpServer = z.strictObject({
  id: DefinitionId,
  description: Description,
  url: EnvUrl,
  headers: z.record(z.string(), z.string()).optional(),
  allowed_tools: z.array(z.string().min(1)).optional(),
});
export type McpServer = z.infer<typeof McpServer>;

/** Inline definitions may omit their id. */
const InlinePrompt = Prompt.extend({ id: DefinitionId.optional() });
export const InlineModel = Model.extend({ id: DefinitionId.optional() });
export type InlineModel = z.infer<typeof InlineModel>;

// ─── Actions ─────────────────────────────────────────────────────────────────

const ContextImplementation = z.strictObject({
  updates: z
    .array(
      z.strictObject({
        path: z.string().regex(/^[A-Za-z0-9_-]+(\.[A-Za-z0-9_-]+)*$/, "must be a dotted path such as a.b"),
        expr: CelSource,
      }),
    )
    .min(1),
});

const HttpImplementation = z.strictObject({
  method: z.enum(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"]),
  url_template: z.string().min(1),
  headers: z.record(z.string().min(1), z.string()).optional(),
  body_template: z.string().optional(),
  /** JSON whose leaves may be mapping sources over `{ input }`, sent as JSON; not with `body_template`. */
  body: JsonValue.optional(),
  response: z.enum(["json", "text"]).optional(),
  /** Send `Idempotency-Key: <run.idempotency_key>` (unless `headers` sets it). @default false */
  idempotency: z.boolean().optional(),
});

/** How many fallback models an `llm` action may list. */
export const MAX_FALLBACK_MODELS = 4;
/** How many repairs an `llm` action may ask for. */
export const MAX_LLM_REPAIRS = 5;

/**
 * An `llm` action's call: its prompt and model, what to do with an answer
 * that does not match, and the models to fall back on. An `llm` action offered
 * as a tool is only this (no tools of its own: a nested agent is a `workflow` tool).
 */
const LlmCall = z.strictObject({
  prompt: z.union([Reference, InlinePrompt]),
  model: z.union([Reference, InlineModel]),
  /**
   * With `produces`: how many times an answer that does not validate is sent
   * back to the model with the problems before the step fails `llm.invalid_output`.
   * @default 1
   */
  repair: z.number().int().min(0).max(MAX_LLM_REPAIRS).optional(),
  /** Models tried in order, at once, when one answers 429 or 5xx, times out or cannot be reached. */
  fallback_models: z
    .array(z.union([Reference, InlineModel]))
    .min(1)
    .max(MAX_FALLBACK_MODELS)
    .optional(),
});

const McpImplementation = z.strictObject({
  server: Reference,
  tool: z.string().min(1),
  pin: z
    .string()
    .regex(/^sha256:[0-9a-f]{64}$/, "must be sha256:<64 lowercase hex>")
    .optional(),
});

const ToolImplementation = z.strictObject({
  tool: z.string().regex(/^[a-z][a-z0-9_]*$/, "must be a standard library tool name"),
  version: z.string().optional(),
  /** The container the tool works in, by its generic name in the node's `resource_bindings`; default `container`. */
  resource_name: z.string().min(1).optional(),
});

/** An environment variable name a shell step may set (not one of the engine's `TRELLIS_IN_*`). */
export const SHELL_ENV_NAME_PATTERN = /^(?!TRELLIS_IN_)[A-Za-z_][A-Za-z0-9_]*$/;

/**
 * `shell`: `command_template` is Handlebars over the action input, rendered so
 * that no value can inject shell syntax: each `{{…}}` becomes a quoted
 * reference to an environment variable that carries the value
 * (docs/containers.md, "Quoting rule").
 */
const ShellImplementation = z.strictObject({
  command_template: z.string().min(1),
  /** Handlebars; relative to the container's workspace (default: the workspace). */
  working_dir: z.string().optional(),
  /** The container, by its generic name in the node's `resource_bindings`; default `container`. */
  resource_name: z.string().min(1).optional(),
  /** Extra environment variables; values are Handlebars over the action input (never parsed by the shell). */
  env: z
    .record(
      z.string().regex(SHELL_ENV_NAME_PATTERN, "must be an environment variable name not starting with TRELLIS_IN_"),
      z.string(),
    )
    .optional(),
  /** A non-zero exit fails the step (`shell.exit_nonzero`) unless this is true. Default false. */
  allow_nonzero_exit: z.boolean().optional(),
  /** Exit codes that count as success; default `[0]`. */
  ok_exit_codes: z.array(z.number().int().min(0).max(255)).min(1).optional(),
  /** The command's own bound; the whole process group is killed past it. Default: the action's timeout less one second. */
  timeout_ms: z.number().int().min(1).max(3_600_000).optional(),
  /** Output kept per stream (head and tail); default 1 MiB, at most 16 MiB. */
  max_output_bytes: z
    .number()
    .int()
    .min(0)
    .max(16 * 1024 * 1024)
    .optional(),
});

const WorkflowImplementation = z.strictObject({
  /** The child: a reference, or `{ from, allowed }` to choose it from the task context when the step starts. */
  workflow: z.union([Reference, WorkflowChoice]),
  on_failure: z.enum(["propagate", "return"]).optional(),
});

/** What a `human` or `event` wait does when its time runs out: fail the step, or go on with a default. */
const OnTimeout = z.union([z.literal("fail"), z.strictObject({ default: JsonValue })]);

const HumanImplementation = z.strictObject({
  prompt_template: z.string(),
  input_schema: JsonSchema,
  timeout_ms: z.number().int().min(1).optional(),
  on_timeout: OnTimeout.optional(),
  /** Who may answer the gate (absent: any caller who may answer gates). */
  approvers: Approvers.optional(),
});

/** A Vectorize index name as actions write it; `docs` is served by the binding `VECTORIZE_DOCS`. */
export const VECTOR_INDEX_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

const VectorImplementation = z.strictObject({
  index: z
    .string()
    .regex(
      VECTOR_INDEX_PATTERN,
      'must match ^[a-z][a-z0-9_-]{0,62}$ (served by the binding VECTORIZE_<INDEX>, or VECTORIZE for "default")',
    ),
  /** `query` (default) or `upsert`. */
  operation: z.enum(["query", "upsert"]).optional(),
  /** query: Handlebars over the action input, embedded with `embedding_model`. */
  query_template: z.string().optional(),
  /** query: a JSONPath over the action input selecting the query vector (an array of numbers). */
  vector: z.string().startsWith("$", "must be a JSONPath starting with $").optional(),
  top_k: z.number().int().min(1).max(100).optional(),
  filter: z.record(z.string(), JsonValue).optional(),
  embedding_model: z.string().min(1).optional(),
  namespace: z.string().min(1).max(64).optional(),
  /** query: which metadata to return (default `all`). */
  return_metadata: z.enum(["none", "indexed", "all"]).optional(),
  /** upsert: Handlebars over each item of `input.vectors` that has no `values`; default: the item's `text`. */
  text_template: z.string().optional(),
});

/** The furthest ahead a `sleep` may wake: 365 days. */
export const MAX_SLEEP_MS = 365 * 86_400_000;

/** When a sleep ends: ISO-8601 with an offset (`2026-12-01T09:00:00+01:00`), or epoch milliseconds. */
export const SleepUntil = z.union([z.iso.datetime({ offset: true }), z.number().int().min(0)]);

/**
 * `sleep`: the step waits, holding nothing, until a time. The step's input may
 * carry `duration_ms` or `until` too, and wins, so the time can come from data;
 * exactly one must be known when the step runs.
 */
const SleepImplementation = z.strictObject({
  duration_ms: z.number().int().min(0).max(MAX_SLEEP_MS).optional(),
  until: SleepUntil.optional(),
});

/** How long an `event` wait may look back: what the event hubs keep, 24 hours (events/store.ts). */
export const MAX_EVENT_LOOKBACK_MS = 86_400_000;
/**
 * `event`: the step waits for an event from outside (`POST /v1/events`) or a
 * signal to its run (`POST /v1/runs/{id}/signals`) with one of its names,
 * for which `match` (CEL over `event` and `input`) holds.
 */
const EventImplementation = z.strictObject({
  name: z.union([EventName, z.array(EventName).min(1).max(MAX_WAIT_NAMES)]),
  match: CelSource.optional(),
  timeout_ms: z.number().int().min(1).max(MAX_SLEEP_MS).optional(),
  lookback_ms: z.number().int().min(0).max(MAX_EVENT_LOOKBACK_MS).optional(),
  on_timeout: OnTimeout.optional(),
});

/**
 * `plan`: the step's input is an agent plan in either notation (docs/plans.md),
 * run as a child run with this allowlist, as `POST /v1/plans` runs one.
 */
const PlanImplementation = z.strictObject({
  /** The plan's allowlist, as `tools` of `POST /v1/plans`; its `tool:` and `mcp:` grants must be on the run's own. */
  tools: PlanTools,
  /** High-risk steps that run without an approval gate (where the deployment allows it: `PLAN_PREAPPROVAL`). */
  approved_steps: ApprovedSteps.optional(),
  /** `auto` (default): the child starts at once; `approval`: it waits in `drafting` until approved. */
  mode: z.enum(["auto", "approval"]).optional(),
});

const MetricImplementation = z.strictObject({
  metric_name: z.string().min(1),
  value: z.union([z.number(), z.strictObject({ expr: CelSource })]),
  dimensions: z.record(z.string(), JsonValue).optional(),
});

/**
 * The implementation schema of each kind: the one place a new kind is added.
 * The kinds, their type and the action union are all derived from this table,
 * and every other per-kind table (the validator's checks, the executor's
 * handlers) is typed `{ [K in ActionKind]: … }`, so a kind added here fails to
 * compile until each of them handles it (docs/architecture.md, "Extension points").
 */
const BASE_IMPLEMENTATIONS = {
  llm: LlmCall,
  mcp: McpImplementation,
  http: HttpImplementation,
  tool: ToolImplementation,
  shell: ShellImplementation,
  workflow: WorkflowImplementation,
  human: HumanImplementation,
  vector: VectorImplementation,
  metric: MetricImplementation,
  context: ContextImplementation,
  sleep: SleepImplementation,
  event: EventImplementation,
  plan: PlanImplementation,
} as const satisfies Record<string, z.ZodType>;

export type ActionKind = keyof typeof BASE_IMPLEMENTATIONS;

/** The action kinds (docs/definitions.md, "Implementation per kind"), in the table's order. */
export const ACTION_KINDS = Object.freeze(Object.keys(BASE_IMPLEMENTATIONS) as [ActionKind, ...ActionKind[]]);
export const ActionKind = z.enum(ACTION_KINDS);

/** What the engine knows of an action kind beyond its schema. */
export interface ActionTraits {
  /**
   * Whether a step of the kind may wait on something outside the executor
   * (a peer, a binding, a container, a person, a child run). Only `context`
   * does not: it computes from its input alone.
   */
  waitsOnIo: boolean;
  /**
   * Whether the kind adds `_meta` to its output: what the call cost (an `llm`
   * step's tokens and price), reported by the engine beside the answer. The
   * action's `produces` describes the answer, so it is checked without `_meta`.
   */
  reportsMeta: boolean;
  /**
   * Whether a step of the kind suspends its task instead of calling anything:
   * it waits, holding nothing, for a person, a child run or the clock, and the
   * coordinator resumes the task. Such a kind cannot be an undo, which a
   * compensation runs as one call.
   */
  suspends: boolean;
}

/** Each kind's traits, so code that depends on one reads the row instead of naming kinds. */
export const ACTION_TRAITS: { readonly [K in ActionKind]: ActionTraits } = {
  llm: { waitsOnIo: true, reportsMeta: true, suspends: false },
  mcp: { waitsOnIo: true, reportsMeta: false, suspends: false },
  http: { waitsOnIo: true, reportsMeta: false, suspends: false },
  tool: { waitsOnIo: true, reportsMeta: false, suspends: false },
  shell: { waitsOnIo: true, reportsMeta: false, suspends: false },
  workflow: { waitsOnIo: true, reportsMeta: false, suspends: true },
  human: { waitsOnIo: true, reportsMeta: false, suspends: true },
  vector: { waitsOnIo: true, reportsMeta: false, suspends: false },
  metric: { waitsOnIo: true, reportsMeta: false, suspends: false },
  context: { waitsOnIo: false, reportsMeta: false, suspends: false },
  sleep: { waitsOnIo: true, reportsMeta: false, suspends: true },
  event: { waitsOnIo: true, reportsMeta: false, suspends: true },
  plan: { waitsOnIo: true, reportsMeta: false, suspends: true },
};

export type ActionImplementation<K extends ActionKind> = z.infer<(typeof ACTION_IMPLEMENTATIONS)[K]>;

const ActionExecution = z.strictObject({
  timeout_ms: TimeoutMs.optional(),
  retry_policy: RetryPolicy.optional(),
});

const actionFields = {
  description: Description,
  requires: JsonSchema.optional(),
  produces: JsonSchema.optional(),
  execution: ActionExecution.optional(),
  risk: z.enum(["low", "medium", "high"]).optional(),
  /** Who may answer a high-risk action's approval (absent: any caller who may answer gates). */
  approvers: Approvers.optional(),
};

function actionOfKind<K extends ActionKind, E extends z.ZodRawShape, I extends z.ZodType>(
  kind: K,
  extra: E,
  implementation: I,
) {
  return z.strictObject({ ...actionFields, ...extra, kind: z.literal(kind), implementation });
}

/** An implementation schema per kind: the definitions' own, or a later stage's (see schemas/resolved.ts). */
export type ActionImplementations = { [K in ActionKind]: z.ZodType };

/** The schema `actionOfKind` builds for kind `K`. */
type ActionMember<K extends ActionKind, E extends z.ZodRawShape, I extends z.ZodType> = ReturnType<
  typeof actionOfKind<K, E, I>
>;

/** Every member of the union, one per kind of the table, each with its own implementation type. */
type ActionMembers<E extends z.ZodRawShape, M extends ActionImplementations> = {
  [K in ActionKind]: ActionMember<K, E, M[K]>;
}[ActionKind];

/**
 * The action union, with `extra` fields (the id's shape, a resolved version)
 * and, for a later stage, other implementation schemas (a resolved `llm`
 * carries its prompt and model, not references to them). It has one member
 * per kind of `ACTION_IMPLEMENTATIONS`, in the table's order.
 */
export function actionUnion<E extends z.ZodRawShape, M extends ActionImplementations>(extra: E, implementations: M) {
  // The cast keeps each member's implementation type precise (`M["llm"]`, not the `ZodType` constraint):
  // `map` cannot say that the member built for each kind is that kind's.
  const members = ACTION_KINDS.map((kind) => actionOfKind(kind, extra, implementations[kind])) as unknown as [
    ActionMembers<E, M>,
    ...ActionMembers<E, M>[],
  ];
  return z.discriminatedUnion("kind", members);
}

// ─── Tools an llm step may call ──────────────────────────────────────────────

/** How many tools an `llm` action may offer. */
export const MAX_LLM_TOOLS = 64;
/** The most model turns an `llm` action may allow. */
export const MAX_LLM_TURNS = 50;
/** Model turns an `llm` action with tools allows when it sets no `max_turns`. */
export const DEFAULT_LLM_MAX_TURNS = 8;

/** A tool's name as the model sees it: what both providers accept, and a valid step ref. */
export const TOOL_NAME_PATTERN = /^[A-Za-z_][A-Za-z0-9_-]{0,62}$/;
export const LlmToolName = z.string().regex(TOOL_NAME_PATTERN, "must match ^[A-Za-z_][A-Za-z0-9_-]{0,62}$");

/** `mcp:<server>/<tool>`: one tool of a registered MCP server. */
export const MCP_TOOL_REF_PATTERN = /^mcp:([a-z][a-z0-9_-]{0,62})(?:@([1-9][0-9]{0,8}))?\/(.{1,128})$/;
/** `tool:<name>`: a standard library tool. */
export const STD_TOOL_REF_PATTERN = /^tool:([a-z][a-z0-9_]*)$/;

/** A tool by name: a registered action (`id`, `id@n`), `mcp:<server>/<tool>` or `tool:<name>`. */
export const ToolRef = z.union([
  Reference,
  z.string().regex(MCP_TOOL_REF_PATTERN, 'must be "mcp:<server>/<tool>"'),
  z.string().regex(STD_TOOL_REF_PATTERN, 'must be "tool:<name>"'),
]);

const PIN = z.string().regex(/^sha256:[0-9a-f]{64}$/, "must be sha256:<64 lowercase hex>");

/** An action written inline as an undo: an action of its own, which declares no undo and no tools itself. */
export const InlineUndoAction = actionUnion(
  { id: DefinitionId.optional(), limits: LimitUses.optional() },
  BASE_IMPLEMENTATIONS,
);
export type InlineUndoAction = z.infer<typeof InlineUndoAction>;

/**
 * What undoes a completed call (docs/definitions.md, "Undo"): an action (a
 * reference or inline) and the mapping that builds its input from the
 * document `{ input, output }` of the original call. Without a mapping the
 * undo gets the original call's input. `retry` re-dispatches the undo when it
 * fails retryably (default: 3 attempts, 1 s backoff). An undo runs as one
 * call: an inline one declares no undo and no tools of its own.
 */
export const Undo = z.strictObject({
  action: z.union([Reference, InlineUndoAction]),
  input_mapping: InputMapping.optional(),
  retry: RetryPolicy.optional(),
});
export type Undo = z.infer<typeof Undo>;

/** An action written inline as a tool: any kind, an `llm` without tools of its own. */
export const InlineToolAction = actionUnion(
  { id: DefinitionId.optional(), undo: Undo.optional(), limits: LimitUses.optional() },
  BASE_IMPLEMENTATIONS,
);
export type InlineToolAction = z.infer<typeof InlineToolAction>;

/**
 * A tool an `llm` step may call (docs/definitions.md, "Agents"): a name
 * (`ToolRef`), or `{ action, name?, description?, pin? }` with the action
 * by name or inline. The model sees `name` (default: the action's id, the
 * MCP tool's or the standard tool's name), `description` (default: the
 * action's) and the action's `requires` as the input schema.
 */
export const LlmTool = z.union([
  ToolRef,
  z.strictObject({
    action: z.union([ToolRef, InlineToolAction]),
    name: LlmToolName.optional(),
    description: z.string().max(4_096).optional(),
    /** For an `mcp:` tool: the tool's schema must hash to this, or the step fails closed. */
    pin: PIN.optional(),
  }),
]);
export type LlmTool = z.infer<typeof LlmTool>;

/** What an agent may spend before its loop stops (`llm.budget_exceeded`): input plus output tokens, dollars. */
export const LlmBudget = z
  .strictObject({ tokens: z.number().int().min(1).optional(), cost_usd: z.number().positive().optional() })
  .refine((budget) => budget.tokens !== undefined || budget.cost_usd !== undefined, "set tokens, cost_usd or both");

/**
 * `llm`: one model call, or with `tools` a loop of model turns and tool calls,
 * each tool call a step of its own (docs/definitions.md, "Agents").
 */
const LlmImplementation = LlmCall.extend({
  tools: z.array(LlmTool).min(1).max(MAX_LLM_TOOLS).optional(),
  /** Model turns at most; a turn that still asks for tools past it fails `llm.max_turns_exceeded`. @default 8 */
  max_turns: z.number().int().min(1).max(MAX_LLM_TURNS).optional(),
  budget: LlmBudget.optional(),
  /** Whether the model may ask for several tools in one turn. @default true */
  parallel_tool_calls: z.boolean().optional(),
});

/**
 * The implementation schema of each kind, as definitions write it. The base
 * table above is the one place a new kind is added; this one differs only in
 * what an `llm` action may carry (its tools).
 */
export const ACTION_IMPLEMENTATIONS = {
  ...BASE_IMPLEMENTATIONS,
  llm: LlmImplementation,
} as const satisfies ActionImplementations;

export const Action = actionUnion(
  { id: DefinitionId, undo: Undo.optional(), limits: LimitUses.optional() },
  ACTION_IMPLEMENTATIONS,
);
export type Action = z.infer<typeof Action>;
export type ActionOf<K extends ActionKind> = Extract<Action, { kind: K }>;

/** An action written inline in a step: same shape, id optional. */
export const InlineAction = actionUnion(
  { id: DefinitionId.optional(), undo: Undo.optional(), limits: LimitUses.optional() },
  ACTION_IMPLEMENTATIONS,
);
export type InlineAction = z.infer<typeof InlineAction>;
