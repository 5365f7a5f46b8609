import { z } from "zod";
import { openSealed } from "../lib/journal/seal.ts";
import { By } from "./auth.ts";
import { JsonValue } from "./common.ts";
import { ATTEST_KIND, ERASED_KIND, JournalAttestationBody, JournalErasedBody, Sha256Hex } from "./journal.ts";
import { ErrorSummary, Failure } from "./errors.ts";
import { StepRecord } from "./payload.ts";
import { PlanOrigin } from "./plans.ts";
import { TraceParent } from "./telemetry.ts";
import { COMPENSATION_TRIGGERS, RunMode, RunStatus, RunTrigger, ToolCallRef } from "./run.ts";

/**
 * The body of each kind of journal entry the engine writes (docs/journal.md, "Entry kinds"),
 * and the fixed reasons of `run.status`. The envelope around them is schemas/journal.ts.
 */

// ─── Entry bodies: one row per kind ──────────────────────────────────────────

const Node = z.string();
/** The foreach item index, or null for a node without foreach. */
const Item = z.number().int().min(0).nullable();
/** Where a wait is (a `sleep` timer, an `event` wait): its node, item, step and key. */
const WaitPlace = z.strictObject({ node: Node, item: Item, step: z.string().nullable(), key: z.string() });
const Attempt = z.number().int().min(0);
const Count = z.number().int().min(0);
const Pinned = z.strictObject({ id: z.string(), version: z.number().int() });
const IsoTime = z.iso.datetime({ offset: true });

/** Bodies of entries about one undo call: which enqueued undo (its index in order of completion) and which dispatch. */
const UndoAttempt = z.strictObject({
  undo: Count,
  node: Node,
  item: Item,
  step: z.string(),
  token: z.string().nullable(),
  attempt: Attempt,
});
/** How a compensation ended, in `compensation.finished` and the attestation after it. */
const CompensationOutcome = z.strictObject({
  status: z.enum(["completed", "failed"]),
  /** How many undos completed. */
  undone: Count,
  /** How many were enqueued in all. */
  undos: Count,
});

/** Bodies of entries about one task attempt: where it ran and which dispatch it was. */
/** A tool call of an agent's turn: where its step waits, the turn, the call's place in it and its tool. */
const ToolCallPlace = WaitPlace.extend({ turn: z.number().int().min(1), index: Count, name: z.string() });
const TaskAttempt = z.strictObject({ node: Node, item: Item, token: z.string(), attempt: Attempt });
const GateRef = z.strictObject({ gate_id: z.string(), node: Node, step: z.string() });
const GateOpenedBody = GateRef.extend({ item: Item, expires_at: IsoTime.nullable() });
/**
 * Who caused the entry, on entries an outside call causes (a start, a control, a gate's
 * answer, a signal or event): the token (`token_id`, `name`), Access identity (`email`) or
 * approval link. Absent on what the engine does of itself (a schedule's, a trigger's start).
 */
const CausedBy = By.optional();
const ApprovalAnswer = GateRef.extend({
  responder: z.string().nullable(),
  reason: z.string().optional(),
  by: CausedBy,
});

/**
 * The fixed reasons a `run.status` entry gives (docs/journal.md lists each;
 * a test holds the two together). The others are free text: a failing node's
 * error message, a cancel's reason, and `"redrive <n>"`.
 */
export const RUN_STATUS_REASONS = {
  /** drafting → queued: at creation, on approve, or on a wake of an auto run left in drafting. */
  started: "started",
  /** queued → running. */
  dispatching: "dispatching",
  /** running → waiting: nothing is in flight and only timers, gates, child runs, events or limits are pending. */
  waiting: "waiting for timers, gates, child runs, events or limits",
  /** waiting → running. */
  workResumed: "work resumed",
  paused: "paused by request",
  resumed: "resumed by request",
  /** The default reason of a cancel by request. */
  cancelled: "cancelled by request",
  /** A child run cancelled because its parent ended. */
  parentEnded: "the parent run ended",
  allSettled: "all nodes settled",
  timedOut: "run timed out",
  invalidOutput: "the run output does not match output_schema",
} as const;

/** The reason of the `run.status` entry a redrive writes (failed → queued). */
export function redriveReason(redrives: number): string {
  return `redrive ${redrives}`;
}

/**
 * Every journal entry kind with its body's schema: the one table the engine
 * writes from (`Draft.journal` takes only a kind of it, with its body type)
 * and docs/journal.md's "Entry kinds" documents (a test holds them equal). A
 * new kind, or a changed body, starts here.
 */
export const JOURNAL_BODIES = {
  "run.created": z.strictObject({
    workflow: Pinned,
    mode: RunMode,
    input: JsonValue,
    idempotency_key: z.string().nullable(),
    /** Only on a delayed start: when the run is due to start. */
    start_at: IsoTime.optional(),
    /** Only on a plan run (POST /v1/plans): the plan as given and the graph it compiled to. */
    plan: PlanOrigin.optional(),
    /** How the run was started (absent: by the API). */
    trigger: RunTrigger.optional(),
    /** Its place in the queues of limits, when not the default 5. */
    priority: z.number().int().min(0).max(9).optional(),
    by: CausedBy,
    /** The W3C trace context the run joins: the start request's `traceparent`, or its parent run's. */
    traceparent: TraceParent.optional(),
  }),
  /** `by` on the transitions a control causes (cancel, pause, resume, approve, redrive). */
  "run.status": z.strictObject({ from: RunStatus, to: RunStatus, reason: z.string(), by: CausedBy }),
  "run.redriven": z.strictObject({ redrive: z.number().int().min(1), nodes: z.array(Node), by: CausedBy }),
  "node.started": z.strictObject({
    node: Node,
    iteration: z.number().int().min(1),
    invocations: Count,
    skipped: Count,
  }),
  "node.skipped": z.strictObject({ node: Node, reason: z.string() }),
  "node.repeat": z.strictObject({ node: Node, iteration: z.number().int().min(1), until: z.string() }),
  "node.completed": z.strictObject({ node: Node, invocations: Count, iterations: Count }),
  "node.failed": z.strictObject({ node: Node, error: Failure, on_failure: z.enum(["fail", "continue"]) }),
  "node.cancelled": z.strictObject({ node: Node, reason: z.string() }),
  "task.dispatched": TaskAttempt.extend({
    task: Pinned,
    /** Only on a continuation: how the suspended task goes on. */
    resume: z.enum(["after", "approved", "rejected", "tools", "granted"]).optional(),
  }),
  "task.completed": TaskAttempt.extend({
    /** Null for a node that runs a sub-workflow itself. */
    token: z.string().nullable(),
    duration_ms: z.number().min(0),
    output: JsonValue,
    /** The dispatch's steps (absent for a sub-workflow node). */
    steps: z.array(StepRecord).optional(),
  }),
  "task.failed": TaskAttempt.extend({
    token: z.string().nullable(),
    error: Failure,
    /** The dispatch's steps (absent when no result came: a timeout, a lost executor call). */
    steps: z.array(StepRecord).optional(),
  }),
  "task.suspended": TaskAttempt.extend({ step: z.string(), steps: z.array(StepRecord) }),
  "task.timeout": TaskAttempt,
  "task.lost": TaskAttempt,
  "task.retry_scheduled": z.strictObject({ node: Node, item: Item, attempt: Attempt, at: IsoTime }),
  "task.result_ignored": z.strictObject({ token: z.string(), reason: z.string(), success: z.boolean() }),
  "gate.opened": GateOpenedBody,
  "gate.answered": GateRef.extend({ responder: z.string().nullable(), response: JsonValue, by: CausedBy }),
  /** An approval link was made: its id, the one approver it answers as, its expiry, and who made it (never its secret). */
  "gate.link_created": GateRef.extend({ link_id: z.string(), approver: z.string(), expires_at: IsoTime, by: By }),
  /** On its timeout (failing the step, or with the default answer), or closed as the run ends. */
  "gate.expired": z.union([
    GateRef.extend({ on_timeout: z.literal("fail") }),
    GateRef.extend({ on_timeout: z.literal("default"), response: JsonValue }),
    GateRef.extend({ reason: z.string() }),
  ]),
  "approval.requested": GateOpenedBody.extend({
    /** The action that waits for the approval (the executor always names it). */
    action: z.strictObject({ id: z.string(), version: z.number().int(), kind: z.string() }).optional(),
    /** For a tool call of an agent: which call. */
    tool_call: ToolCallRef.optional(),
  }),
  "approval.granted": ApprovalAnswer,
  "approval.rejected": ApprovalAnswer,
  "workflow.chosen": z.strictObject({
    node: Node,
    item: Item,
    step: z.string().nullable(),
    from: z.string(),
    /** What `from` selected. */
    value: JsonValue,
    /** The allowed workflow it names, pinned: `id@version`. */
    workflow: z.string(),
  }),
  "child.started": z.strictObject({
    node: Node,
    item: Item,
    step: z.string().nullable(),
    child_run_id: z.string(),
    workflow: z.string(),
  }),
  "child.finished": z.strictObject({
    node: Node,
    item: Item,
    step: z.string().nullable(),
    child_run_id: z.string().nullable(),
    status: z.enum(["completed", "failed", "cancelled"]),
    attestation: z.strictObject({ seq: z.number().int().min(1), hash: Sha256Hex }).nullable(),
    error: ErrorSummary.optional(),
  }),
  "child.cancel_requested": z.strictObject({
    node: Node,
    item: Item,
    step: z.string().nullable(),
    child_run_id: z.string().nullable(),
    key: z.string(),
  }),
  /** A `sleep` step's timer: where it is (`key`), and when it ends. */
  "timer.started": WaitPlace.extend({ until: IsoTime }),
  "timer.fired": WaitPlace.extend({ slept_ms: z.number().min(0) }),
  /** The timer ended before its time: its run ended, or its node failed or was cancelled. */
  "timer.cancelled": WaitPlace.extend({ reason: z.string() }),
  /** An `event` step began to wait: the names it takes, its match, when it times out, how far it looks back. */
  "event.waiting": WaitPlace.extend({
    names: z.array(z.string()),
    match: z.string().optional(),
    expires_at: IsoTime.nullable(),
    lookback_ms: z.number().int().min(0),
  }),
  /** The wait took an event (from the hubs) or a signal: its id, and the SHA-256 of its data's canonical JSON. */
  "event.matched": WaitPlace.extend({
    event_id: z.string(),
    name: z.string(),
    received_at: IsoTime,
    source: z.enum(["event", "signal"]),
    data_sha256: Sha256Hex,
    /** Who sent it, for an event or signal sent to the API (absent: from a webhook or the events queue). */
    by: CausedBy,
  }),
  /** A hub delivered an event the wait's match (the run's, the one that counts) does not take: the wait goes on. */
  "event.declined": WaitPlace.extend({ event_id: z.string(), name: z.string() }),
  "event.timeout": WaitPlace.extend({ on_timeout: z.enum(["fail", "default"]) }),
  /** The wait ended before an event came: its run ended, or its node failed. */
  "event.cancelled": WaitPlace.extend({ reason: z.string() }),
  /** A step waits for room in a limit (its action's or model's): which limit (as the run resolved it) and key. */
  "limit.waiting": WaitPlace.extend({ limit: Pinned, limit_key: z.string() }),
  /** The limit object served the step: it runs again, holding the slot. */
  "limit.granted": WaitPlace.extend({ limit: Pinned, limit_key: z.string(), waited_ms: z.number().min(0) }),
  /** The step stopped waiting for the limit before it was served: its run ended, or its node failed or was cancelled. */
  "limit.withdrawn": WaitPlace.extend({ limit: Pinned, limit_key: z.string(), reason: z.string() }),
  /** The run waits `queued` for a slot of one of its workflow's limits, at its priority. */
  "run.limit_waiting": z.strictObject({ limit: Pinned, limit_key: z.string(), priority: z.number().int() }),
  /** The run holds a slot of one of its workflow's limits (to its end). */
  "run.limit_granted": z.strictObject({ limit: Pinned, limit_key: z.string(), waited_ms: z.number().min(0) }),
  /** A signal to this run was accepted (a wait takes it now, or it is kept until one does). */
  "signal.received": z.strictObject({
    event_id: z.string(),
    name: z.string(),
    data_sha256: Sha256Hex,
    by: CausedBy,
  }),
  "compensation.started": z.strictObject({
    trigger: z.enum(COMPENSATION_TRIGGERS),
    /** The undos still to run, by index, in the order they will run (reverse order of completion). */
    pending: z.array(Count),
    /** On a compensation started or redriven by request. */
    by: CausedBy,
  }),
  /** A model turn asked for a tool: the provider's id of the call, and its input (or why it will not run). */
  "tool_call.requested": ToolCallPlace.extend({ call: z.string(), input: JsonValue, error: ErrorSummary.optional() }),
  "tool_call.dispatched": ToolCallPlace.extend({ token: z.string(), attempt: Attempt }),
  "tool_call.completed": ToolCallPlace.extend({
    token: z.string(),
    attempt: Attempt,
    duration_ms: z.number().min(0),
    output: JsonValue,
    steps: z.array(StepRecord).optional(),
  }),
  "tool_call.failed": ToolCallPlace.extend({
    token: z.string().nullable(),
    attempt: Attempt,
    error: Failure,
    steps: z.array(StepRecord).optional(),
  }),
  /** The call's step stopped waiting before it settled: its run ended, or its node failed or was cancelled. */
  "tool_call.cancelled": ToolCallPlace.extend({ reason: z.string() }),
  "undo.dispatched": UndoAttempt.extend({
    token: z.string(),
    action: z.string(),
    enqueued_seq: z.number().int().min(1),
  }),
  "undo.completed": UndoAttempt.extend({
    token: z.string(),
    duration_ms: z.number().min(0),
    output: JsonValue,
    steps: z.array(StepRecord).optional(),
  }),
  "undo.failed": UndoAttempt.extend({
    error: Failure,
    steps: z.array(StepRecord).optional(),
    /** When another attempt follows: when it is due. */
    retry_at: IsoTime.optional(),
  }),
  "compensation.finished": CompensationOutcome.extend({ error: Failure.optional() }),
  /** The engine's attestations: the verifier's contract (JournalAttestationBody) and what the engine adds. */
  [ATTEST_KIND]: z.strictObject({
    ...JournalAttestationBody.shape,
    workflow: Pinned,
    output: JsonValue.optional(),
    /** The output's JSON length, in place of the output when that is too large to attest. */
    output_chars: Count.optional(),
    error: Failure.optional(),
    /** On the attestation that closes a compensation: how it ended. */
    compensation: CompensationOutcome.optional(),
  }),
  /** The run's values were erased (after its last attestation; nothing follows): why, which entries, which blobs, by whom. */
  [ERASED_KIND]: z.strictObject({ ...JournalErasedBody.shape, by: CausedBy }),
} as const;

/** Every kind of journal entry the engine writes. */
export type JournalKind = keyof typeof JOURNAL_BODIES;
/** The body of a journal entry of kind `K`. */
export type JournalBody<K extends JournalKind> = z.infer<(typeof JOURNAL_BODIES)[K]>;

/** Every kind of journal entry the engine writes, in the table's order. */
export const JOURNAL_KINDS = Object.keys(JOURNAL_BODIES) as JournalKind[];

/** Whether a kind is one the engine writes. */
export function isJournalKind(kind: string): kind is JournalKind {
  return Object.hasOwn(JOURNAL_BODIES, kind);
}

/**
 * The members of each kind's body that hold a run's data (its input, an
 * output, an answer, a chosen value), as RFC 6901 pointers: sealed when the
 * entry is signed, so that an erasure can remove them and the journal still
 * verifies (docs/journal.md, "Sealed values and erasure"). A kind not here
 * has no such member, and its entries are signed as they are.
 */
export const SEALED_MEMBERS: Partial<Record<JournalKind, readonly string[]>> = {
  "run.created": ["/input"],
  "task.completed": ["/output"],
  "gate.answered": ["/response"],
  "gate.expired": ["/response"],
  "workflow.chosen": ["/value"],
  "tool_call.requested": ["/input"],
  "tool_call.completed": ["/output"],
  "undo.completed": ["/output"],
  [ATTEST_KIND]: ["/output"],
};

/** Kinds whose `steps` (step records) may carry an undo's input, sealed too. */
const STEP_RECORD_KINDS: ReadonlySet<string> = new Set([
  "task.completed",
  "task.failed",
  "task.suspended",
  "tool_call.completed",
  "tool_call.failed",
  "undo.completed",
  "undo.failed",
]);

const NO_MEMBERS: readonly string[] = [];

/** What a step record's call holds of the run's data (docs/journal.md, "Step records"): prompts, answers, arguments, results. */
const CALL_CONTENT = ["messages", "answer", "arguments", "result"] as const;

/**
 * The pointers to seal in a body of `kind`: its kind's {@link SEALED_MEMBERS}
 * and, in its step records, each undo's input and each call's prompt,
 * answer, arguments and result. An empty list (the same one) for every other
 * kind, at no cost.
 */
export function sealedPointersOf(kind: string, body: Record<string, unknown>): readonly string[] {
  const members = Object.hasOwn(SEALED_MEMBERS, kind)
    ? (SEALED_MEMBERS[kind as JournalKind] ?? NO_MEMBERS)
    : NO_MEMBERS;
  const steps = STEP_RECORD_KINDS.has(kind) ? body["steps"] : undefined;
  if (!Array.isArray(steps)) {
    return members;
  }
  const inSteps = stepPointers(steps);
  return inSteps.length === 0 ? members : [...members, ...inSteps];
}

/** `/steps/<i>/undo/input` and `/steps/<i>/attempts/<j>/call/<member>` of each step record that has one. */
function stepPointers(steps: readonly unknown[]): string[] {
  const pointers: string[] = [];
  const member = (value: unknown, name: string): unknown =>
    typeof value === "object" && value !== null && !Array.isArray(value) ? Reflect.get(value, name) : undefined;
  steps.forEach((step, index) => {
    const undo = member(step, "undo");
    if (member(undo, "input") !== undefined) {
      pointers.push(`/steps/${index}/undo/input`);
    }
    const attempts = member(step, "attempts");
    (Array.isArray(attempts) ? attempts : []).forEach((attempt: unknown, at) => {
      const call = member(attempt, "call");
      for (const name of CALL_CONTENT) {
        if (member(call, name) !== undefined) {
          pointers.push(`/steps/${index}/attempts/${at}/call/${name}`);
        }
      }
    });
  });
  return pointers;
}

/**
 * A served body of `kind` parsed with its kind's schema: its `$sealed` and
 * `$salt` set aside and each erased value read as `null` (docs/journal.md,
 * "Sealed values and erasure"). What every reader of bodies parses with.
 */
export function parseJournalBody<K extends JournalKind>(
  kind: K,
  body: Record<string, unknown>,
): z.ZodSafeParseResult<JournalBody<K>> {
  const schema = JOURNAL_BODIES[kind] as unknown as z.ZodType<JournalBody<K>>;
  return schema.safeParse(openSealed(body));
}
