import { z } from "zod";
import { Approvers } from "./approvers.ts";
import { JsonValue, type JsonObject } from "./common.ts";
import { MAX_SLEEP_MS } from "./actions.ts";
import { AgentState } from "./agent.ts";
import { AttemptError, ErrorSummary } from "./errors.ts";
import { ResolvedTask } from "./resolved.ts";
import { LimitConfig, LimitHolder, LimitKey, Priority } from "./limits.ts";

/** A container the coordinator resolved for this task (`resource_bindings` → Durable Object id). */
export const ResourceHandle = z.strictObject({
  type: z.literal("container"),
  /** The container's durable name, `<run_id>/<declared resource>`. */
  id: z.string().min(1),
  /**
   * The run that owns the container, when it is not this task's run: set only
   * by a parent run that hands its own container to a sub-workflow. Absent,
   * the task's own run is the owner (docs/containers.md, "Ownership").
   */
  owner: z.string().min(1).optional(),
});
export type ResourceHandle = z.infer<typeof ResourceHandle>;

/** The task context: `input` is immutable, `state` accumulates, `output` becomes the result. */
export const TaskContext = z.strictObject({
  input: JsonValue,
  state: z.record(z.string(), JsonValue),
  output: z.record(z.string(), JsonValue),
});
export type TaskContext = z.infer<typeof TaskContext>;

/**
 * How a suspended task continues (docs/definitions.md, "Suspension: steps
 * that wait": gates and sub-workflows never hold an executor invocation open). The executor starts at `step_index` with
 * the task context as it was when the task suspended:
 * - `after`: the step is done; `outcome` is its output (or its error) and the task goes on after it;
 * - `approved`: a high-risk step was approved; run it now;
 * - `rejected`: a high-risk step was rejected; it fails, not retryable;
 * - `tools`: an agent's tool calls settled; its step runs its next turn with `agent`.
 */
export const TaskResume = z.strictObject({
  step_index: z.number().int().min(0),
  context: TaskContext,
  /** `granted`: a limit the step waited for is held now; the step runs again from its start. */
  mode: z.enum(["after", "approved", "rejected", "tools", "granted"]),
  outcome: z
    .union([
      z.strictObject({ ok: z.literal(true), output: JsonValue }),
      z.strictObject({ ok: z.literal(false), error: ErrorSummary }),
    ])
    .optional(),
  reason: z.string().optional(),
  /**
   * For `tools`: the agent's loop, each call of its last turn with its result.
   * For `granted`: an agent step's loop as the limit wait kept it.
   */
  agent: AgentState.optional(),
  /** For `granted`: the holder the limit object served (the one the step's call acquires with first). */
  holder_id: LimitHolder.shape.id.optional(),
});
export type TaskResume = z.infer<typeof TaskResume>;

/** Coordinator → executor: one attempt of one task invocation (docs/architecture.md, "How an event flows"). */
export const TaskPayload = z.strictObject({
  /** Names this dispatch; a result is accepted at most once, and only for the current token. */
  token_id: z.string().min(1),
  workflow_run_id: z.string().min(1),
  /** The workflow the run runs, as pinned when it started (`run.workflow` in expressions). */
  workflow_id: z.string().min(1),
  workflow_version: z.number().int().min(0),
  /**
   * The run that started this task's run, when it is a child run (the
   * coordinator fills it from the run's parent link). The artifact tools let a
   * run read its parent's artifacts and its children's, no other run's.
   */
  parent_run_id: z.string().min(1).optional(),
  node_id: z.string().min(1),
  /** The foreach item this invocation serves, or null. */
  item_index: z.number().int().min(0).nullable(),
  /** The node's `repeat` iteration this invocation belongs to, 1-based (`run.iteration`). */
  iteration: z.number().int().min(1),
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
  /** Present when the task continues after a gate, an approval or a child workflow. */
  resume: TaskResume.optional(),
  /** The run's priority (0–9, default 5): its place in the queues of limits. */
  priority: Priority.optional(),
  /**
   * A task the coordinator made to run one call for a step (an agent's tool
   * call, an undo): its result settles that call, so it cannot suspend, and a
   * limit without room fails the call (`limit.no_room`, retryable) instead.
   */
  one_call: z.literal(true).optional(),
});
export type TaskPayload = z.infer<typeof TaskPayload>;

/**
 * Coordinator → executor, one call for several tasks: each task definition
 * travels (and is checked) once, however many payloads run it (a foreach
 * sends the same task with every item).
 */
export const TaskGroup = z.strictObject({
  /** The tasks the payloads run, by `<id>@<version>`. */
  tasks: z.record(z.string(), ResolvedTask),
  /** Each payload names its task by key instead of carrying it. */
  payloads: z.array(TaskPayload.omit({ task: true }).extend({ task_key: z.string() })),
});
export type TaskGroup = z.infer<typeof TaskGroup>;

/** Packs payloads into a {@link TaskGroup}: each task object once, keyed `<id>@<version>` (`#n` if two differ). */
export function toTaskGroup(payloads: readonly TaskPayload[]): TaskGroup {
  const tasks: Record<string, ResolvedTask> = {};
  const keys = new Map<ResolvedTask, string>();
  const slim = payloads.map(({ task, ...rest }) => {
    let key = keys.get(task);
    if (key === undefined) {
      const base = `${task.id}@${task.version}`;
      key = base in tasks ? `${base}#${keys.size}` : base;
      keys.set(task, key);
      tasks[key] = task;
    }
    return { ...rest, task_key: key };
  });
  return { tasks, payloads: slim };
}

/** Unpacks a checked {@link TaskGroup} into whole payloads; a payload whose task is missing comes back as its token. */
export function fromTaskGroup(group: TaskGroup): (TaskPayload | { missing: string })[] {
  return group.payloads.map(({ task_key, ...rest }) => {
    const task = group.tasks[task_key];
    return task === undefined ? { missing: rest.token_id } : { ...rest, task };
  });
}

/**
 * Executor → coordinator: a failed task's error. The attempt's failure (the
 * one error shape, schemas/errors.ts) and the task context it failed in.
 */
export const TaskError = AttemptError.extend({
  /** A dotted error code, e.g. `http.status`, `step.timeout`, `action.invalid_input`. */
  code: z.string().min(1),
  /** The task context when the task failed (redacted of nothing secret: secrets never enter it). */
  context_snapshot: TaskContext.nullable(),
});
export type TaskError = z.infer<typeof TaskError>;

/**
 * A task error in the wire names before the one failure vocabulary (`type`,
 * `step_ref`), renamed to today's. While a deploy rolls out, a coordinator may
 * hear from an executor of the version before; its results must not all turn
 * into `executor.unavailable`.
 */
function fromEarlierWireNames(value: unknown): unknown {
  if (typeof value !== "object" || value === null || Array.isArray(value) || !("type" in value) || "code" in value) {
    return value;
  }
  const { type, step_ref, ...rest } = value as { type: unknown; step_ref?: unknown };
  return { ...rest, code: type, ...(step_ref === null || step_ref === undefined ? {} : { step: step_ref }) };
}

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

/**
 * What a `plan` step's child run starts from (docs/plans.md, "Running a plan
 * from a workflow"): the plan as the step's input had it, and the action's
 * allowlist, pre-approved steps and mode.
 */
export const ChildPlan = z.strictObject({
  given: z.record(z.string(), JsonValue),
  tools: z.array(z.string()),
  approved_steps: z.array(z.string()).optional(),
  mode: z.enum(["auto", "approval"]).optional(),
});
export type ChildPlan = z.infer<typeof ChildPlan>;

/**
 * Why a task stopped without finishing: it waits for a human (a gate or an
 * approval) or for a child workflow. The coordinator records it and
 * re-dispatches the task with a {@link TaskResume} when the answer arrives.
 */
export const TaskSuspension = z.strictObject({
  step_ref: z.string(),
  step_index: z.number().int().min(0),
  context: TaskContext,
  wait: z.discriminatedUnion("kind", [
    z.strictObject({
      kind: z.literal("gate"),
      gate_kind: z.enum(["input", "approval"]),
      prompt: z.string(),
      input_schema: z.union([z.boolean(), z.record(z.string(), JsonValue)]),
      timeout_ms: z.number().int().min(1).optional(),
      on_timeout: z.union([z.literal("fail"), z.strictObject({ default: JsonValue })]).optional(),
      /** For approvals: the action that waits for it. */
      action: z.strictObject({ id: z.string(), version: z.number().int(), kind: z.string() }).optional(),
      /** Who may answer (the step's or the action's `approvers`). */
      approvers: Approvers.optional(),
    }),
    z.strictObject({
      kind: z.literal("child"),
      /** A pinned reference, `id@version`. */
      workflow: z.string(),
      input: JsonValue,
      on_failure: z.enum(["propagate", "return"]),
      /** When the step chose its child at run time: its `from` and what that selected (journaled as `workflow.chosen`). */
      chosen: z.strictObject({ from: z.string(), value: JsonValue }).optional(),
      /** A `plan` step's child (`workflow` is then `plan`): compiled and started from this plan. */
      plan: ChildPlan.optional(),
    }),
    /** A `sleep` step: an absolute wake-up (epoch ms), or a duration the coordinator counts from its own clock. */
    z.strictObject({
      kind: z.literal("timer"),
      until: z.number().int().optional(),
      duration_ms: z.number().int().min(1).max(MAX_SLEEP_MS).optional(),
    }),
    /** An `event` step: the names it takes, its match and the step input that match reads, and its time. */
    z.strictObject({
      kind: z.literal("event"),
      names: z.array(z.string()).min(1),
      match: z.string().optional(),
      input: JsonValue,
      timeout_ms: z.number().int().min(1).max(MAX_SLEEP_MS).optional(),
      lookback_ms: z.number().int().min(0).optional(),
      on_timeout: z.union([z.literal("fail"), z.strictObject({ default: JsonValue })]).optional(),
    }),
    /** An `llm` step with tools: its last turn's calls without a result are to run (executor/agent.ts). */
    z.strictObject({ kind: z.literal("tools"), state: AgentState }),
    /**
     * A step whose limit (its action's or its model's) had no room for `key`:
     * the coordinator queues `holder_id` at the limit object and resumes the step
     * (`granted`) when it is served. The executor released what it had acquired.
     */
    z.strictObject({
      kind: z.literal("limit"),
      limit: LimitConfig,
      key: LimitKey,
      holder_id: LimitHolder.shape.id,
      /** An agent step's loop as it stood before the refused turn: the `granted` resume goes on with it. */
      agent: AgentState.optional(),
    }),
  ]),
});
export type TaskSuspension = z.infer<typeof TaskSuspension>;

/** The answer an approval gate takes: `{ "approved": true|false, "reason"?: "…" }` (docs/api.md, `POST /v1/runs/{run_id}/gates/{gate_id}`). */
export const APPROVAL_SCHEMA: JsonObject = {
  type: "object",
  required: ["approved"],
  properties: { approved: { type: "boolean" }, reason: { type: "string" } },
  additionalProperties: false,
};

/**
 * Why the next call of a step came when it did: the action's backoff, the
 * peer's `Retry-After`, or at once: an llm action's next model (`fallback`)
 * or its model asked to correct an answer that did not match `produces` (`repair`).
 */
export const RETRY_REASONS = ["backoff", "retry_after", "fallback", "repair"] as const;

/**
 * One call of an action within a step: how long it took and, when it failed,
 * why and how long the step waited before the next attempt (by the action's
 * backoff, or the peer's `Retry-After`).
 */
export const CallAttempt = z.strictObject({
  attempt: z.number().int().min(1),
  duration_ms: z.number().min(0),
  error: AttemptError.omit({ step: true }).optional(),
  retry_in_ms: z.number().min(0).optional(),
  retry_reason: z.enum(RETRY_REASONS).optional(),
  /** What the call did, as its action kind reports it (docs/journal.md, "Step records"). */
  call: z.record(z.string(), JsonValue).optional(),
});
export type CallAttempt = z.infer<typeof CallAttempt>;

/** An undo enqueued by a completed step: `"<kind> <id>@<version>"` of the undo's action, and its input. */
export const StepUndo = z.union([
  z.strictObject({ action: z.string(), input: JsonValue }),
  z.strictObject({ action: z.string(), error: ErrorSummary }),
]);
export type StepUndo = z.infer<typeof StepUndo>;

/**
 * One step of a dispatch as it went: `completed` (its action's output was
 * written), `skipped` (its condition was false), `failed` (the task fails
 * here), `continued` (it failed and `on_failure: "continue"` went on), or
 * `suspended` (it waits for a gate, an approval or a child run). Journaled in
 * the `task.completed`, `task.failed` and `task.suspended` entries.
 */
export const StepRecord = z.strictObject({
  step: z.string(),
  /** The action it calls, `<kind> <id>@<version>`. */
  action: z.string(),
  status: z.enum(["completed", "skipped", "failed", "continued", "suspended"]),
  duration_ms: z.number().min(0),
  /** Each call of the action, in order (none when the step called nothing). */
  attempts: z.array(CallAttempt),
  error: AttemptError.omit({ step: true }).optional(),
  /** For a skipped step: the condition's `else` (`skip`, or `succeed`, which ended the task). */
  else: z.enum(["skip", "succeed"]).optional(),
  /**
   * For a step whose action declares `undo` and whose call completed: the undo
   * enqueued, with the input its mapping built from the call's `{ input, output }`
   * (or why it could not be built). The step itself may still have failed after
   * the call (its output mapping). The coordinator runs it if the run compensates.
   */
  undo: StepUndo.optional(),
});
export type StepRecord = z.infer<typeof StepRecord>;

/** Executor → coordinator. Errors travel as data, never as thrown objects. */
export const TaskResult = z.strictObject({
  token_id: z.string().min(1),
  success: z.boolean(),
  output: JsonValue.optional(),
  error: z.preprocess(fromEarlierWireNames, TaskError).optional(),
  /** Set (with `success: false` and no error) when the task waits for a gate or a child. */
  suspended: TaskSuspension.optional(),
  metrics: TaskMetrics,
  /** The steps this dispatch ran or passed, in order (absent from an executor before step records). */
  steps: z.array(StepRecord).optional(),
});
export type TaskResult = z.infer<typeof TaskResult>;

/** Task result → run record, first half: the failure a failed result reports (a plain `task.failed` when it names none). */
export function attemptErrorOf(result: TaskResult): AttemptError {
  const { context_snapshot: _snapshot, ...error } = result.error ?? {
    code: "task.failed",
    message: "the task failed",
    retryable: false,
    context_snapshot: null,
  };
  return error;
}

/**
 * The failure that replaces a result which cannot be signed into the journal
 * (`where` and `why` from lib/journal `canonicalProblem`): not retryable,
 * since the same work would produce the same value.
 */
export function toUnsignableResult(result: TaskResult, where: string, why: string): TaskResult {
  const message = `the task's result cannot be journaled: at ${where.slice(0, 200)}, ${why}`.toWellFormed();
  return {
    token_id: result.token_id,
    success: false,
    error: {
      code: "task.unsignable_result",
      message,
      retryable: false,
      ...(result.error?.step === undefined ? {} : { step: result.error.step }),
      context_snapshot: null,
    },
    metrics: result.metrics,
  };
}
