import { z } from "zod";
import { Approvers } from "./approvers.ts";
import { By } from "./auth.ts";
import { Tokens } from "./agent.ts";
import { JsonValue } from "./common.ts";
import { DefinitionKind } from "./definitions.ts";
import { ErrorDetail, ErrorInfo, ErrorSummary, Failure } from "./errors.ts";
import { Priority } from "./limits.ts";
import { StepRecord } from "./payload.ts";
import { ToolResult } from "./plans.ts";
import { IndexedRunStatus } from "./run-index.ts";
import { TraceParent } from "./telemetry.ts";
import {
  ChildLink,
  COMPENSATION_TRIGGERS,
  INVOCATION_STATUSES,
  NodeStatus,
  RunControlName,
  RunMode,
  RunStatus,
  StepSummary,
  TOOL_CALL_STATUSES,
  TRIGGER_KINDS,
  RunTrigger,
  UndoRecord,
  Usage,
  ErasureView,
} from "./run.ts";

/** The furthest ahead a delayed start may be: 365 days. */
export const MAX_START_DELAY_MS = 365 * 24 * 60 * 60_000;

/**
 * `POST /v1/workflows/{id}/runs` body. `start_at` (ISO-8601 with an offset)
 * or `delay_ms`, not both, delays the start: the run is created `queued` and
 * starts then. That `start_at` is at most {@link MAX_START_DELAY_MS} ahead is
 * checked where the clock is read (src/service.ts).
 */
export const StartRunBody = z
  .strictObject({
    input: JsonValue.optional(),
    version: z.number().int().min(1).optional(),
    idempotency_key: z.string().min(1).max(256).optional(),
    mode: RunMode.optional(),
    start_at: z.iso.datetime({ offset: true }).optional(),
    delay_ms: z.number().int().min(0).max(MAX_START_DELAY_MS).optional(),
    /** Its place in the queues of limits: 0 (lowest) to 9 (highest). @default 5 */
    priority: Priority.optional(),
  })
  .check((ctx) => {
    if (ctx.value.start_at !== undefined && ctx.value.delay_ms !== undefined) {
      ctx.issues.push({
        code: "custom",
        input: ctx.value,
        path: ["delay_ms"],
        message: "give start_at or delay_ms, not both",
      });
    }
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
  /** What was registered but looks like a mistake (a mapping source that reads like a JSONPath without its `$`). */
  warnings: z.array(ErrorDetail).optional(),
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

/**
 * What a suspended invocation waits for, as the views show it: one member per
 * kind of wait (coordinator/wait-kinds.ts), with `position` added.
 */
function waitViews<P extends z.ZodRawShape>(position: P) {
  return z.discriminatedUnion("kind", [
    z.strictObject({ kind: z.literal("gate"), gate_id: z.string(), ...position }),
    z.strictObject({ kind: z.literal("child"), run_id: z.string().nullable(), workflow: z.string(), ...position }),
    z.strictObject({ kind: z.literal("timer"), until: z.string(), ...position }),
    z.strictObject({
      kind: z.literal("event"),
      names: z.array(z.string()),
      match: z.string().optional(),
      expires_at: z.string().nullable(),
      ...position,
    }),
    z.strictObject({
      kind: z.literal("tools"),
      /** The agent's model turn whose calls run. */
      turn: z.number().int().min(1),
      calls: z.array(z.strictObject({ name: z.string(), status: z.enum(TOOL_CALL_STATUSES) })),
      ...position,
    }),
    /** A step waits for room in a limit (`GET /v1/limits/{limit}/status?key=` shows the queue). */
    z.strictObject({ kind: z.literal("limit"), limit: z.string(), key: z.string(), since: z.string(), ...position }),
  ]);
}

/** An invocation's `waiting_for` in the run and node views. */
export const WaitingFor = waitViews({});
export type WaitingFor = z.infer<typeof WaitingFor>;

/** One entry of the run view's `waiting_for`: a wait and where it is. */
export const RunWait = waitViews({ node: z.string(), item: z.number().int().nullable(), step: z.string().nullable() });
export type RunWait = z.infer<typeof RunWait>;

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
      skipped: z.number().int(),
      cancelled: z.number().int(),
    })
    .optional(),
  /**
   * Each invocation at a glance: its steps as its latest dispatches left them.
   * A foreach node lists its first 100 here (`items.total` counts them all);
   * `GET /v1/runs/{id}/nodes/{node}` has every one in full.
   */
  invocations: z.array(
    z.strictObject({
      index: z.number().int(),
      status: z.enum(INVOCATION_STATUSES),
      attempts: z.number().int(),
      steps: z.array(StepSummary),
      /** While the invocation is suspended: what it waits for. */
      waiting_for: WaitingFor.optional(),
    }),
  ),
});
export type NodeView = z.infer<typeof NodeView>;

/** One dispatch of an invocation as the journal has it: the entry that closed it, and its step records. */
export const DispatchView = z.strictObject({
  seq: z.number().int(),
  kind: z.enum(["task.completed", "task.failed", "task.suspended"]),
  attempt: z.number().int(),
  steps: z.array(StepRecord),
});
export type DispatchView = z.infer<typeof DispatchView>;

/**
 * How a tool call of an agent stands in the node view, from its `tool_call.*`
 * entries: asked for and not yet sent (`requested`), sent to the executor
 * (`running`), or settled. A call the executor refused (an unknown tool, an
 * input its schema refuses) is `failed` with its error and no attempt.
 */
export const AGENT_TOOL_CALL_STATUSES = [
  "requested",
  "approval",
  "running",
  "completed",
  "failed",
  "cancelled",
] as const;

/** The most tool calls an invocation's `agent` lists (`tool_calls_total` counts them all). */
export const MAX_VIEW_TOOL_CALLS = 500;

/**
 * An `llm` step with tools as the node view shows its loop: each model turn
 * (from its step records) and each tool call (from its `tool_call.*` entries),
 * what the turns spent, and what the step allows. Inputs, outputs and answers
 * are kept as step records keep values: whole up to 4,096 characters of JSON,
 * else `{ sha256, chars, preview }` (the journal has them whole).
 */
export const AgentView = z.strictObject({
  /** The agent step's ref. */
  step: z.string(),
  turns: z.array(
    z.strictObject({
      /** 1-based, as `tool_call.*` entries count turns (a repair is a turn of its own). */
      turn: z.number().int().min(1),
      /** The model as the provider was asked for it, and the provider. */
      model: z.string(),
      provider: z.string(),
      tokens: Tokens,
      cost_usd: z.number().min(0),
      finish_reason: z.string(),
      /** A call that asked the model to fix an answer that did not match `produces`: not counted by `max_turns`. */
      repair: z.literal(true).optional(),
      /** The text the model wrote (beside its tool calls, or its answer). */
      answer: JsonValue.optional(),
    }),
  ),
  tool_calls: z.array(
    z.strictObject({
      turn: z.number().int().min(1),
      /** The call's place in its turn. */
      index: z.number().int().min(0),
      name: z.string(),
      /** The provider's id of the call. */
      call: z.string(),
      input: JsonValue,
      status: z.enum(AGENT_TOOL_CALL_STATUSES),
      /** A high-risk tool's approval gate (status `approval` while it is open). */
      gate_id: z.string().optional(),
      /**
       * How many times the tool's action was called: each call its step
       * record lists (the action's own retries), and one for each dispatch
       * that returned none (in flight, or lost to a restart and sent again).
       */
      attempts: z.number().int().min(0),
      output: JsonValue.optional(),
      error: ErrorSummary.optional(),
      /** From its last dispatch to its result. */
      duration_ms: z.number().min(0).optional(),
    }),
  ),
  /** Every tool call the loop asked for; `tool_calls` lists the first {@link MAX_VIEW_TOOL_CALLS}. */
  tool_calls_total: z.number().int().min(0),
  /** Every turn's tokens and cost, summed. */
  usage: z.strictObject({ tokens: Tokens, cost_usd: z.number().min(0) }),
  /** The step's `budget`, when it sets one. */
  budget: z
    .strictObject({ tokens: z.number().int().min(1).optional(), cost_usd: z.number().positive().optional() })
    .optional(),
  /** The step's `max_turns` (8 when it sets none). */
  max_turns: z.number().int().min(1),
});
export type AgentView = z.infer<typeof AgentView>;

/** `GET /v1/runs/{run_id}/nodes/{node}`: one node in full, each invocation with its dispatches' steps. */
export const NodeDetail = NodeView.extend({
  node: z.string(),
  iterations: z.number().int(),
  invocations: z.array(
    z.strictObject({
      index: z.number().int(),
      status: z.enum(INVOCATION_STATUSES),
      attempts: z.number().int(),
      input: JsonValue.nullable(),
      output: JsonValue.nullable(),
      error: Failure.nullable(),
      dispatches: z.array(DispatchView),
      /** While the invocation is suspended: what it waits for. */
      waiting_for: WaitingFor.optional(),
      /**
       * For a task with an `llm` step with tools: the loop of its latest
       * attempt (a retry or redrive starts the loop over; the dispatches keep
       * every attempt's turns).
       */
      agent: AgentView.optional(),
    }),
  ),
  /** The child runs the node started (a sub-workflow node, or its tasks' `workflow` steps), from the journal. */
  children: z.array(
    z.strictObject({
      run_id: z.string(),
      item: z.number().int().nullable(),
      step: z.string().nullable(),
      workflow: z.string(),
      status: z.enum(["completed", "failed", "cancelled"]).nullable(),
    }),
  ),
});
export type NodeDetail = z.infer<typeof NodeDetail>;

/**
 * A run's undos and its compensation (docs/definitions.md, "Undo and
 * compensation"): every undo its completed steps enqueued, in order of
 * completion (a compensation runs them from the last), and how each went.
 */
export const CompensationView = z.strictObject({
  /** `none` until the run compensates (by its policy, or by hand). */
  status: z.enum(["none", "running", "completed", "failed"]),
  trigger: z.enum(COMPENSATION_TRIGGERS).nullable(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
  undos: z.array(
    z.strictObject({
      node: z.string(),
      item: z.number().int().nullable(),
      step: z.string(),
      /** The undo's action, `<kind> <id>@<version>`. */
      action: z.string(),
      status: UndoRecord.shape.status,
      attempts: z.number().int(),
      error: Failure.nullable(),
    }),
  ),
});
export type CompensationView = z.infer<typeof CompensationView>;

/** `GET /v1/runs/{run_id}` (docs/api.md, the section of that name). */
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
  /** A delayed start's time (`start_at`, or `delay_ms` after creation); null for a run started at once. */
  start_at: z.string().nullable(),
  nodes: z.record(z.string(), NodeView),
  gates: z.array(z.lazy(() => GateView)),
  /** Every open wait of the run (its first 100), in node order: gates, child runs, timers. */
  waiting_for: z.array(RunWait),
  /** LLM tokens and cost so far. */
  usage: Usage,
  /** How the run was started: the API, a plan, a parent run, a schedule's slot, an event or a webhook. */
  trigger: RunTrigger,
  /** Its place in the queues of limits, 0–9. */
  priority: z.number().int(),
  /** The workflow's limits: each key, and whether the run holds its slot or waits `queued` for it (since when). */
  limits: z
    .array(
      z.strictObject({ limit: z.string(), key: z.string(), status: z.enum(["waiting", "held"]), since: z.string() }),
    )
    .optional(),
  /** For a child run: the run, node and step (null for a sub-workflow node) that started it. */
  parent: z.strictObject({ run_id: z.string(), node: z.string(), step: z.string().nullable() }).nullable(),
  /** The child runs this run started, in node order, with how each ended (null while it runs). */
  children: z.array(ChildLink.extend({ node: z.string(), item: z.number().int().nullable() })),
  /** Present once a completed step enqueued an undo. */
  compensation: CompensationView.optional(),
  /** Only for a plan run (POST /v1/plans, or a `plan` step's child): one ToolResult per plan step, in plan order (docs/plans.md). */
  results: z.array(ToolResult).optional(),
  /** The controls the run accepts now (its status and each control's guard), in the control table's order. */
  controls: z.array(RunControlName),
  /**
   * Present once the run was erased (`POST /v1/runs/{run_id}/erase`): when, by
   * whom, why, the seqs of the journal entries whose values were removed and
   * the blobs released. Its input, outputs and answers then read as null.
   */
  erased: ErasureView.optional(),
});
export type RunView = z.infer<typeof RunView>;

/** The longest reason an erasure records. */
export const MAX_ERASE_REASON = 1_000;

/** `POST /v1/runs/{run_id}/erase`'s body: why (required, recorded in the journal's `erased` entry). */
export const EraseBody = z.strictObject({
  reason: z
    .string()
    .trim()
    .min(1, "a reason is required")
    .max(MAX_ERASE_REASON, `at most ${MAX_ERASE_REASON} characters`),
});
export type EraseBody = z.infer<typeof EraseBody>;

/**
 * `POST /v1/workflows/{id}/runs` → 201 (new) or 200 (same idempotency key).
 * A preview (200) creates no run: `run_id` is null, `status` is "preview",
 * and `plan` says what would run. A start that waited for its run
 * (`Prefer: wait=N`) and saw it end carries its `output` and `error`, as
 * `GET /v1/runs/{id}` gives them.
 */
export const StartRunResponse = z.strictObject({
  run_id: z.string().nullable(),
  status: z.union([RunStatus, z.literal("preview")]),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  plan: z.record(z.string(), JsonValue).optional(),
  output: JsonValue.nullable().optional(),
  error: Failure.nullable().optional(),
});

/** The longest a run start waits for its run to end (`Prefer: wait=N`, or `wait_ms` over RPC). */
export const MAX_START_WAIT_MS = 60_000;

/** What an RPC `startRun` may be asked besides its request: how long to wait for the run to end. */
export const StartRunOptions = z.strictObject({
  wait_ms: z.number().int().min(0).max(MAX_START_WAIT_MS).optional(),
  /** A W3C `traceparent` whose trace the run joins (docs/telemetry.md); for `startRun` only. */
  traceparent: TraceParent.optional(),
});
export type StartRunResponse = z.infer<typeof StartRunResponse>;

/** One run as `GET /v1/runs` lists it, from the run index (docs/api.md). `parent` is the parent run's id. */
export const RunSummary = z.strictObject({
  run_id: z.string(),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  status: IndexedRunStatus,
  mode: RunMode,
  parent: z.string().nullable(),
  created_by: z.string(),
  /** How the run was started: its trigger's kind (the run view has the whole trigger). */
  trigger: z.enum(TRIGGER_KINDS),
  created_at: z.string(),
  updated_at: z.string(),
  finished_at: z.string().nullable(),
  /** When the run's object deleted the run (status `deleted`), else null. */
  deleted_at: z.string().nullable(),
  error: z.strictObject({ code: z.string(), message: z.string() }).nullable(),
});
export type RunSummary = z.infer<typeof RunSummary>;

/** `GET /v1/runs`: newest first; `next_cursor` (opaque) is null on the last page. */
export const RunList = z.strictObject({ runs: z.array(RunSummary), next_cursor: z.string().nullable() });
export type RunList = z.infer<typeof RunList>;

/** The error body of every 4xx/5xx. */
export const ErrorBody = z.strictObject({
  error: ErrorInfo.pick({ code: true, message: true, details: true }),
});
export type ErrorBody = z.infer<typeof ErrorBody>;

/** A gate as `GET /v1/runs/{id}/gates` shows it (docs/api.md, `GET /v1/runs/{run_id}/gates`). */
export const GateView = z.strictObject({
  gate_id: z.string(),
  kind: z.enum(["input", "approval"]),
  node: z.string(),
  item: z.number().int().nullable(),
  step: z.string(),
  prompt: z.string(),
  input_schema: z.union([z.boolean(), z.record(z.string(), JsonValue)]),
  status: z.enum(["open", "answered", "expired"]),
  opened_at: z.string(),
  expires_at: z.string().nullable(),
  response: JsonValue.optional(),
  /** The answerer's free-text note (what `responder` on the answer said): not their identity. */
  responder: z.string().nullable().optional(),
  /** Who answered: the authenticated principal, or the approval link and its approver. */
  answered_by: By.optional(),
  responded_at: z.string().nullable().optional(),
  reason: z.string().optional(),
  /** Who may answer; absent, any caller who may answer gates. */
  approvers: Approvers.optional(),
});
export type GateView = z.infer<typeof GateView>;

/** One open gate as `GET /v1/gates` lists it: the gate, and the run it belongs to. */
export const OpenGate = GateView.extend({
  run_id: z.string(),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  /** The run's status as the run index has it. */
  run_status: RunStatus,
});
export type OpenGate = z.infer<typeof OpenGate>;

/** `GET /v1/gates`: open gates, newest run first; `next_cursor` (opaque) is null on the last page. */
export const OpenGateList = z.strictObject({ gates: z.array(OpenGate), next_cursor: z.string().nullable() });
export type OpenGateList = z.infer<typeof OpenGateList>;

/** `POST /v1/runs/{id}/gates/{gate_id}` body. */
export const GateAnswerBody = z.strictObject({
  response: JsonValue,
  responder: z.string().min(1).max(256).optional(),
});
export type GateAnswerBody = z.infer<typeof GateAnswerBody>;

/** `POST /v1/runs/{id}/gates/{gate_id}/links` body: who the link is for, and for how long (default 24 h, at most 30 days). */
export const GateLinkBody = z.strictObject({
  /** An email, or a name when the gate declares no `emails` approvers. */
  approver: z.string().trim().min(1).max(254),
  expires_in_ms: z
    .number()
    .int()
    .min(1_000)
    .max(30 * 24 * 3_600_000)
    .optional(),
});
export type GateLinkBody = z.infer<typeof GateLinkBody>;

/** `POST /v1/runs/{id}/gates/{gate_id}/links`: the link (its secret is in the URL, shown once) and when it expires. */
export const GateLinkAnswer = z.strictObject({ url: z.string(), link_id: z.string(), expires_at: z.string() });
export type GateLinkAnswer = z.infer<typeof GateLinkAnswer>;

/** `GET /v1/mcp_servers/{id}/tools`: the server's tools now, each with the pin an `mcp` action checks. */
export const McpToolList = z.strictObject({
  server: z.strictObject({ id: z.string(), version: z.number().int() }),
  tools: z.array(
    z.strictObject({
      name: z.string(),
      description: z.string().nullable(),
      pin: z.string(),
      /** Whether the server's `allowed_tools` lets actions call it. */
      allowed: z.boolean(),
    }),
  ),
});
export type McpToolList = z.infer<typeof McpToolList>;

// ─── Definition listings: GET /v1/{kind}, GET /v1/{kind}/{id}/versions ────────

/** Their query: `limit` 1..100 (default 50) and the opaque `cursor` of the previous page. Nothing else. */
export const DefinitionListQuery = z.strictObject({
  limit: z
    .string()
    .regex(/^[0-9]{1,3}$/, "must be a whole number from 1 to 100")
    .transform(Number)
    .pipe(z.number().int().min(1, "must be at least 1").max(100, "must be at most 100"))
    .optional(),
  cursor: z.string().min(1).max(1024).optional(),
});
export type DefinitionListQuery = z.infer<typeof DefinitionListQuery>;

/** One version of a definition in a listing; the definition itself is at `GET /v1/{kind}/{id}/versions/{n}`. */
export const DefinitionSummary = z.strictObject({
  kind: DefinitionKind,
  id: z.string(),
  version: z.number().int().min(1),
  created_at: z.string(),
  description: z.string().optional(),
});
export type DefinitionSummary = z.infer<typeof DefinitionSummary>;

/** `GET /v1/{kind}`: the latest version of each definition, newest first; `next_cursor` null on the last page. */
export const DefinitionList = z.strictObject({
  definitions: z.array(DefinitionSummary),
  next_cursor: z.string().nullable(),
});
export type DefinitionList = z.infer<typeof DefinitionList>;

/** `GET /v1/{kind}/{id}/versions`: every version, highest first. */
export const DefinitionVersions = z.strictObject({
  versions: z.array(DefinitionSummary),
  next_cursor: z.string().nullable(),
});
export type DefinitionVersions = z.infer<typeof DefinitionVersions>;

/**
 * What a listing's cursor carries (base64url JSON; opaque to clients): the
 * last item of the page, and the listing it belongs to, so a cursor of another
 * listing is refused instead of silently paging the wrong thing.
 */
export const DefinitionListCursor = z.union([
  z.strictObject({ kind: DefinitionKind, created_at: z.string(), id: z.string() }),
  z.strictObject({ kind: DefinitionKind, id: z.string(), version: z.number().int().min(1) }),
]);
export type DefinitionListCursor = z.infer<typeof DefinitionListCursor>;
