import { z } from "zod";
import { Approvers, GateLink } from "./approvers.ts";
import { By } from "./auth.ts";
import { EventRecord } from "./events.ts";
import { JsonObject, JsonValue } from "./common.ts";
import { ErrorSummary, Failure } from "./errors.ts";
import { AgentState } from "./agent.ts";
import { ChildPlan, ResourceHandle, StepRecord, TaskContext, TaskResume } from "./payload.ts";
import { LimitConfig, LimitHolder, LimitKey, Priority } from "./limits.ts";
import { TraceParent } from "./telemetry.ts";

/** A plan step as a plan run's record keeps it, for the run view's `results` (docs/plans.md). */
export const PlanStepRecord = z.strictObject({ id: z.string(), tool: z.string() });
export type PlanStepRecord = z.infer<typeof PlanStepRecord>;

/** The 8 run states (docs/api.md, `GET /v1/runs/{run_id}`). */
export const RUN_STATUSES = [
  "drafting",
  "queued",
  "running",
  "waiting",
  "paused",
  "completed",
  "failed",
  "cancelled",
] as const;
export const RunStatus = z.enum(RUN_STATUSES);
export type RunStatus = z.infer<typeof RunStatus>;

/**
 * The run controls, `POST /v1/runs/{id}/<control>` (coordinator/controls.ts
 * holds what each does and when a run accepts it).
 */
export const RUN_CONTROL_NAMES = ["cancel", "pause", "resume", "redrive", "compensate", "approve"] as const;
export const RunControlName = z.enum(RUN_CONTROL_NAMES);
export type RunControlName = z.infer<typeof RunControlName>;

export const NODE_STATUSES = ["pending", "running", "waiting", "completed", "failed", "skipped", "cancelled"] as const;
export const NodeStatus = z.enum(NODE_STATUSES);
export type NodeStatus = z.infer<typeof NodeStatus>;

export const RUN_MODES = ["auto", "approval", "preview"] as const;
export const RunMode = z.enum(RUN_MODES);
export type RunMode = z.infer<typeof RunMode>;

export const INVOCATION_STATUSES = [
  "pending",
  "running",
  "retrying",
  "suspended",
  "completed",
  "failed",
  "cancelled",
  "skipped",
] as const;

/** How far one tool call of an agent's turn got. */
export const TOOL_CALL_STATUSES = ["approval", "pending", "running", "completed", "failed"] as const;

/** Which call of an agent's loop: its wait's key, its turn, its place in the turn, and its tool. */
export const ToolCallRef = z.strictObject({
  key: z.string(),
  turn: z.number().int().min(1),
  index: z.number().int().min(0),
  name: z.string(),
});
export type ToolCallRef = z.infer<typeof ToolCallRef>;

/** A tool call an agent's turn asked for, run by the coordinator as a dispatch of its own. */
export const ToolCallRecord = z.strictObject({
  /** The call's place in its turn's `calls`. */
  index: z.number().int().min(0),
  status: z.enum(TOOL_CALL_STATUSES),
  /** The dispatch in flight; a result is taken only for it. */
  token: z.string().nullable(),
  /** Dispatches so far (one more after a restart lost one). */
  attempts: z.number().int().min(0),
  dispatched_at: z.number().nullable(),
  deadline_at: z.number().nullable(),
  /** A high-risk tool's approval gate, while it waits or since it was granted. */
  gate_id: z.string().optional(),
  /** Granted: the call's dispatch carries the approval. */
  approved: z.literal(true).optional(),
  /** A `workflow` tool: the child run the call is, by its start key. */
  child: z
    .strictObject({ key: z.string(), run_id: z.string().nullable(), requested_at: z.number().nullable() })
    .optional(),
});
export type ToolCallRecord = z.infer<typeof ToolCallRecord>;

/**
 * Where a suspended invocation stopped and what it waits for: a gate (by id),
 * a child run (by its start key; `run_id` once it has started) or a timer.
 * Each kind is a row of coordinator/wait-kinds.ts.
 */
export const Suspension = z.strictObject({
  /** Null for a node that runs a sub-workflow itself (no task, no step). */
  step_ref: z.string().nullable(),
  step_index: z.number().int().min(0),
  context: TaskContext.nullable(),
  waiting_for: z.discriminatedUnion("kind", [
    z.strictObject({ kind: z.literal("gate"), gate_id: z.string() }),
    z.strictObject({
      kind: z.literal("child"),
      key: z.string(),
      run_id: z.string().nullable(),
      workflow: z.string(),
      on_failure: z.enum(["propagate", "return"]),
      input: JsonValue,
      /**
       * When a wake asked for the child to be started (null: not yet). Starts
       * are spread over wakes, a few per event (MAX_CHILD_STARTS_PER_EVENT).
       */
      requested_at: z.number().nullable().optional(),
      /** A `plan` step's child (`workflow` is then `plan`): compiled and started from this plan. */
      plan: ChildPlan.optional(),
    }),
    z.strictObject({
      kind: z.literal("timer"),
      /** Where the timer is (run, redrive, node, item, attempt, step, iteration): never its duration. */
      key: z.string(),
      started_at: z.number(),
      until: z.number(),
    }),
    z.strictObject({
      kind: z.literal("event"),
      key: z.string(),
      started_at: z.number(),
      names: z.array(z.string()).min(1),
      match: z.string().optional(),
      /** The step input, for `match`. */
      input: JsonValue,
      expires_at: z.number().nullable(),
      lookback_ms: z.number().int().min(0),
      on_timeout: z.union([z.literal("fail"), z.strictObject({ default: JsonValue })]),
      /** When a wake sent its registration to the event hubs (null: not yet); `registered` once they answered. */
      requested_at: z.number().nullable(),
      registered: z.boolean(),
    }),
    z.strictObject({
      kind: z.literal("tools"),
      key: z.string(),
      /** The agent's loop; each call's result is written into its last turn as the call settles. */
      state: AgentState,
      /** The last turn's calls that run as steps (those the executor refused are settled already). */
      calls: z.array(ToolCallRecord),
    }),
    z.strictObject({
      kind: z.literal("limit"),
      /** Where the wait is (coordinator/waits.ts `waitKey`). */
      place: z.string(),
      limit: LimitConfig,
      /** The limit's key, as the step evaluated it. */
      key: LimitKey,
      holder_id: LimitHolder.shape.id,
      started_at: z.number(),
      /** When a wake sent the holder to the limit object's queue (null: not yet); `queued` once it answered. */
      requested_at: z.number().nullable(),
      queued: z.boolean(),
      /** An agent step's loop, which its `granted` resume goes on with. */
      agent: AgentState.optional(),
    }),
  ]),
});
export type Suspension = z.infer<typeof Suspension>;

/**
 * A step of an invocation at a glance, for the run view: how its latest
 * dispatch went (`StepRecord` in full is in the journal and the node view).
 */
export const StepSummary = z.strictObject({
  step: z.string(),
  status: StepRecord.shape.status,
  /** Calls of the action (1 unless the action retried). */
  attempts: z.number().int().min(0),
  duration_ms: z.number().min(0),
  /** The code of the error that failed or continued the step. */
  error: z.string().optional(),
  /** An llm step's tokens and cost, summed over its attempts. */
  tokens: z.strictObject({ input: z.number().int().min(0), output: z.number().int().min(0) }).optional(),
  cost_usd: z.number().min(0).optional(),
});
export type StepSummary = z.infer<typeof StepSummary>;

/** A child run an invocation started, and how it ended once it has. */
export const ChildLink = z.strictObject({
  run_id: z.string(),
  step: z.string().nullable(),
  workflow: z.string(),
  status: z.enum(["completed", "failed", "cancelled"]).nullable(),
});
export type ChildLink = z.infer<typeof ChildLink>;

/**
 * One task invocation of a node: a plain node has one, a foreach node one per
 * item. `token` names the dispatch in flight; a result is accepted only for it.
 * `input` is fixed when the node starts, so every attempt gets the same input.
 */
export const InvocationRecord = z.strictObject({
  index: z.number().int().min(0),
  status: z.enum(INVOCATION_STATUSES),
  attempts: z.number().int().min(0),
  token: z.string().nullable(),
  dispatched_at: z.number().nullable(),
  deadline_at: z.number().nullable(),
  retry_at: z.number().nullable(),
  input: JsonValue.optional(),
  output: JsonValue.optional(),
  error: Failure.nullable(),
  suspension: Suspension.optional(),
  /** How the next dispatch continues a suspended task. */
  resume: TaskResume.optional(),
  /** Its steps as the latest dispatches left them (a continuation replaces the steps from its resumed one on). */
  steps: z.array(StepSummary).optional(),
  /** The child runs it started, in order. */
  children: z.array(ChildLink).optional(),
  /** For a node that chooses its child workflow at run time: the choice, `id@version`, pinned when the node started. */
  workflow: z.string().optional(),
});
export type InvocationRecord = z.infer<typeof InvocationRecord>;

export const NodeRecord = z.strictObject({
  status: NodeStatus,
  attempts: z.number().int().min(0),
  started_at: z.number().nullable(),
  finished_at: z.number().nullable(),
  error: Failure.nullable(),
  /** Empty until the node starts; then one per task invocation. */
  invocations: z.array(InvocationRecord),
  /** Journal seq of the entry that settled this node (cited by the attestation). */
  settled_seq: z.number().int().nullable(),
  /** Iterations started so far (1 for a node without `repeat`, once started). */
  iterations: z.number().int().min(0),
});
export type NodeRecord = z.infer<typeof NodeRecord>;

export const RunContext = z.strictObject({
  input: JsonValue,
  state: JsonObject,
  output: JsonObject,
});
export type RunContext = z.infer<typeof RunContext>;

/** A human gate: an input to give, or an approval of a high-risk step (docs/definitions.md, "Human gates" and "Approvals of high-risk actions"). */
export const GateRecord = z.strictObject({
  gate_id: z.string(),
  kind: z.enum(["input", "approval"]),
  node: z.string(),
  item: z.number().int().nullable(),
  step: z.string(),
  prompt: z.string(),
  input_schema: z.union([z.boolean(), JsonObject]),
  status: z.enum(["open", "answered", "expired"]),
  opened_at: z.number(),
  expires_at: z.number().nullable(),
  on_timeout: z.union([z.literal("fail"), z.strictObject({ default: JsonValue })]),
  response: JsonValue.optional(),
  responder: z.string().nullable().optional(),
  responded_at: z.number().nullable().optional(),
  /** Why a gate expired without an answer (its timeout, or the run ending). */
  reason: z.string().optional(),
  action: z.strictObject({ id: z.string(), version: z.number().int(), kind: z.string() }).optional(),
  /** For a tool call's approval: the call (its step waits in a `tools` wait, not on the gate). */
  tool_call: ToolCallRef.optional(),
  /** Who may answer; absent, any caller who may answer gates. */
  approvers: Approvers.optional(),
  /** The authenticated principal who answered (`responder` is their free-text note). */
  answered_by: By.optional(),
  /** Approval links made for the gate, each usable once. */
  links: z.array(GateLink).optional(),
});
export type GateRecord = z.infer<typeof GateRecord>;

/** What a run's trigger may be: its `kind`, the filter `GET /v1/runs?trigger=` takes. */
export const TRIGGER_KINDS = ["api", "plan", "parent", "schedule", "event", "webhook"] as const;
export type TriggerKind = (typeof TRIGGER_KINDS)[number];

const TriggerTime = z.iso.datetime({ offset: true });

/**
 * How a run was started (docs/api.md, "How a run was started"): a call of the
 * API or RPC, an agent plan, a parent run, a schedule's slot, an event a
 * workflow's trigger took, or a webhook delivery's event. Every start goes
 * through one typed start that names it (src/start.ts for the last three).
 */
export const RunTrigger = z.discriminatedUnion("kind", [
  z.strictObject({ kind: z.literal("api") }),
  z.strictObject({ kind: z.literal("plan") }),
  z.strictObject({ kind: z.literal("parent"), run_id: z.string(), key: z.string() }),
  z.strictObject({
    kind: z.literal("schedule"),
    schedule: z.string(),
    version: z.number().int().min(1),
    scheduled_at: TriggerTime,
  }),
  z.strictObject({ kind: z.literal("event"), event_id: z.string(), name: z.string() }),
  z.strictObject({ kind: z.literal("webhook"), webhook: z.string(), event_id: z.string(), name: z.string() }),
]);
export type RunTrigger = z.infer<typeof RunTrigger>;

/** The parent of a child run: where its result goes when it ends. */
export const ParentLink = z.strictObject({
  run_id: z.string(),
  /** The start key the parent knows this child by. */
  key: z.string(),
  /** Set once the parent acknowledged the result. */
  notified: z.boolean(),
});
export type ParentLink = z.infer<typeof ParentLink>;

/** LLM usage added up from task results. */
export const Usage = z.strictObject({
  input_tokens: z.number().int().min(0),
  output_tokens: z.number().int().min(0),
  cost_usd: z.number().min(0),
});
export type Usage = z.infer<typeof Usage>;

/**
 * An undo a completed step enqueued (docs/definitions.md, "Undo and
 * compensation"), in order of completion, and how its compensation call went.
 */
export const UndoRecord = z.strictObject({
  node: z.string(),
  item: z.number().int().min(0).nullable(),
  step: z.string(),
  /** The seq of the entry whose step record enqueued it (`task.completed`, `task.failed`, `task.suspended`). */
  seq: z.number().int().min(1),
  /** The undo's action, `<kind> <id>@<version>`. */
  action: z.string(),
  /** Its input, built when the step completed; absent when that failed (`problem`). */
  input: JsonValue.optional(),
  problem: ErrorSummary.optional(),
  status: z.enum(["enqueued", "running", "retrying", "completed", "failed"]),
  attempts: z.number().int().min(0),
  token: z.string().nullable(),
  deadline_at: z.number().nullable(),
  retry_at: z.number().nullable(),
  error: Failure.nullable(),
});
export type UndoRecord = z.infer<typeof UndoRecord>;

export const COMPENSATION_TRIGGERS = ["on_failure", "on_cancel", "manual", "redrive"] as const;

/** A run's compensation: running its undos in reverse order of completion, after it failed or was cancelled. */
export const CompensationRecord = z.strictObject({
  status: z.enum(["running", "completed", "failed"]),
  trigger: z.enum(COMPENSATION_TRIGGERS),
  started_at: z.number(),
  finished_at: z.number().nullable(),
});
export type CompensationRecord = z.infer<typeof CompensationRecord>;

/**
 * One of the workflow's limits as a run holds it: the run waits `queued`
 * until it holds each, in order, and holds them to its end.
 */
export const RunLimit = z.strictObject({
  /** The limit's key, evaluated over the run's input when the run first asked. */
  key: LimitKey,
  status: z.enum(["waiting", "held"]),
  /** When the run began to wait (or, held, when it was granted). */
  since: z.number(),
  /** When a wake sent the request to the limit object (null: not yet); `queued` once it answered. */
  requested_at: z.number().nullable(),
  queued: z.boolean(),
});
export type RunLimit = z.infer<typeof RunLimit>;

/**
 * A run's erasure (`POST /v1/runs/{run_id}/erase`, docs/security.md, "Erasure"):
 * when, by whom and why, the seqs of the journal entries whose sealed values
 * were removed, and the blobs the run gave up.
 */
export const RunErasure = z.strictObject({
  at: z.number(),
  by: By.optional(),
  reason: z.string(),
  seqs: z.array(z.number().int().min(1)),
  blobs: z.array(z.string()),
});
export type RunErasure = z.infer<typeof RunErasure>;

/** A run's erasure as the API shows it: {@link RunErasure} with `at` as an ISO-8601 time. */
export const ErasureView = RunErasure.extend({ at: z.string() });
export type ErasureView = z.infer<typeof ErasureView>;

/** The run's durable state, everything but its nodes. */
export const RunRecord = z.strictObject({
  run_id: z.string(),
  workflow: z.strictObject({ id: z.string(), version: z.number().int() }),
  status: RunStatus,
  mode: RunMode,
  context: RunContext,
  error: Failure.nullable(),
  created_at: z.number(),
  updated_at: z.number(),
  /** Absolute deadline from `workflow.timeout_ms` (counted from `start_at` for a delayed start), or null. */
  deadline_at: z.number().nullable(),
  /** When a delayed start is due (ms); absent for a run started at once. Queued until then. */
  start_at: z.number().optional(),
  /** Counter for dispatch tokens: a token is never reused. */
  dispatch_count: z.number().int().min(0),
  /** LLM tokens and cost of every task result accepted so far. */
  usage: Usage,
  gates: z.array(GateRecord),
  /** 0 for a run started by a client; a child is one deeper than its parent. */
  depth: z.number().int().min(0),
  parent: ParentLink.nullable(),
  /** Who started the run: `token:<16 hex of a keyed digest of the token>` (src/auth.ts), `rpc`, or `run:<parent run id>`. */
  created_by: z.string(),
  /** How the run was started; a record without one was started by the API. */
  trigger: RunTrigger.optional(),
  /** The W3C trace context the run joins (docs/telemetry.md); absent: a trace of its own. */
  traceparent: TraceParent.optional(),
  /** Declared resources a parent handed down (by resource name): the parent's containers, used as theirs. */
  inherited_resources: z.record(z.string(), ResourceHandle),
  /** Only on a plan run: its steps in plan order, for the run view's `results`. */
  plan_steps: z.array(PlanStepRecord).optional(),
  /** Standing approvals (`approved_steps` on approve): plan steps whose approval gates are granted as they open. */
  approved_steps: z.array(z.string()).optional(),
  /** How many times this run was redriven after failing. */
  redrives: z.number().int().min(0),
  /**
   * Signals sent to this run (`POST /v1/runs/{id}/signals`) that no wait took
   * yet, oldest first: an `event` step that starts waiting looks here first.
   * Absent when none.
   */
  signals: z.array(z.strictObject({ event: EventRecord, data_sha256: z.string() })).optional(),
  /** Ids of the signals this run accepted (the last MAX_SIGNAL_IDS): the same id again is a duplicate. */
  signal_ids: z.array(z.string()).optional(),
  /** Seq of the last journal entry written. */
  journal_seq: z.number().int().min(0),
  /**
   * Child runs (by start key) this run cancelled that have not yet confirmed
   * it; absent when none. Committed with the cancel, so a restart before the
   * children answered loses nothing: the alarm sends the cancels again.
   */
  pending_cancels: z.array(z.string()).optional(),
  /**
   * Containers (by durable name) this run released whose `release()` has not
   * answered yet; absent when none. Committed with the terminal state, retried
   * by the alarm like `pending_cancels`.
   */
  pending_releases: z.array(z.string()).optional(),
  /** Undos enqueued by completed steps, in order of completion; absent when none. */
  undos: z.array(UndoRecord).optional(),
  /** Absent until the run compensates. */
  compensation: CompensationRecord.optional(),
  /** Absent unless the run was erased: its inputs, outputs and answers are gone. */
  erased: RunErasure.optional(),
  /** What started it: an idempotency key and the hash of the request, to detect reuse with other input. */
  idempotency_key: z.string().nullable(),
  request_hash: z.string(),
  /** Its place in the queues of limits, 0–9; absent: 5. */
  priority: Priority.optional(),
  /** The workflow's limits (`snapshot.limits`, in order), as this run holds them; absent for a workflow without. */
  limits: z.array(RunLimit).optional(),
  /**
   * Limit objects (`<limit>/<key>`) this run must still give up its slots and
   * places at (it ended); absent when none. Retried by wakes like `pending_releases`.
   */
  pending_limit_releases: z.array(z.string()).optional(),
});
export type RunRecord = z.infer<typeof RunRecord>;

/** How a run was started; a record kept before runs recorded it says so by its parent or its plan. */
export function triggerOf(record: Pick<RunRecord, "trigger" | "parent" | "plan_steps">): RunTrigger {
  if (record.trigger !== undefined) {
    return record.trigger;
  }
  if (record.parent !== null) {
    return { kind: "parent", run_id: record.parent.run_id, key: record.parent.key };
  }
  return record.plan_steps === undefined ? { kind: "api" } : { kind: "plan" };
}
