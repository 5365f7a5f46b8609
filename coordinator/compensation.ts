import { resolveRetryPolicy, retryDelayMs } from "../lib/retry.ts";
import type { By } from "../schemas/auth.ts";
import { DEFAULT_COMPENSATE_POLICY } from "../schemas/definitions.ts";
import { type AttemptError, toFailure, type Failure } from "../schemas/errors.ts";
import { attemptErrorOf, type StepRecord, type TaskResult } from "../schemas/payload.ts";
import type { ResolvedTask, ResolvedUndo } from "../schemas/resolved.ts";
import type { RunRecord, RunStatus, UndoRecord } from "../schemas/run.ts";
import { DEADLINE_GRACE_MS, DEFAULT_TASK_TIMEOUT_MS, runFieldsOf } from "./dispatch-basics.ts";
import type { Draft } from "./draft.ts";
import type { LiveWork } from "./live.ts";

/**
 * Compensation (docs/definitions.md, "Undo and compensation"). A completed
 * step whose action declares `undo` enqueues it (its step record carries the
 * undo's input); when the run fails or is cancelled and its `compensate`
 * policy asks, or when `POST /v1/runs/{id}/compensate` asks, the undos run
 * one at a time in reverse order of completion, each a one-step task through
 * the executor, with its own retries. The run's status stays `failed` or
 * `cancelled`: compensation is a section of the journal after the run's
 * attestation, opened by `compensation.started` and closed by a new
 * attestation. The first undo that fails for good stops it; a redrive resumes
 * it from there.
 */

export type CompensationTrigger = NonNullable<RunRecord["compensation"]>["trigger"];

/** Undo dispatches are retried this way when the undo says nothing. */
const DEFAULT_UNDO_RETRY = { max_attempts: 3, initial_delay_ms: 1_000 } as const;

/**
 * Enqueues the undos a result's steps carry (a step whose call completed, though
 * the step itself may have failed after it); `seq` is the entry that journaled those steps.
 */
export function enqueueUndos(
  draft: Draft,
  where: { node: string; item: number | null },
  steps: readonly StepRecord[] | undefined,
  seq: number,
): void {
  const enqueued: UndoRecord[] = [];
  for (const step of steps ?? []) {
    const undo = step.undo;
    if (undo === undefined) {
      continue;
    }
    enqueued.push({
      ...where,
      step: step.step,
      seq,
      action: undo.action,
      ...("input" in undo ? { input: undo.input } : { problem: undo.error }),
      status: "enqueued",
      attempts: 0,
      token: null,
      deadline_at: null,
      retry_at: null,
      error: null,
    });
  }
  if (enqueued.length > 0) {
    draft.record.undos = [...(draft.record.undos ?? []), ...enqueued];
  }
}

/** After an event that ended the run: start compensating when the workflow's policy asks. */
export function compensateOnEnd(draft: Draft, before: RunStatus): void {
  const status = draft.record.status;
  if (before === status || (status !== "failed" && status !== "cancelled")) {
    return;
  }
  const policy = draft.workflow.compensate ?? DEFAULT_COMPENSATE_POLICY;
  const trigger = status === "failed" ? "on_failure" : "on_cancel";
  if ((policy === "always" || policy === trigger) && (draft.record.undos?.length ?? 0) > 0) {
    startCompensation(draft, trigger);
  }
}

/** Whether a redrive of this run resumes its compensation (one that failed) rather than its nodes. */
export function redrivesCompensation(record: RunRecord): boolean {
  return record.compensation?.status === "failed";
}

/** Opens the compensation section: every undo not completed yet runs, latest first. */
export function startCompensation(draft: Draft, trigger: CompensationTrigger, by?: By): void {
  const undos = (draft.record.undos ?? []).map((undo) =>
    undo.status === "completed" ? undo : { ...undo, status: "enqueued" as const, attempts: 0, error: null },
  );
  draft.record.undos = undos;
  draft.record.compensation = { status: "running", trigger, started_at: draft.now, finished_at: null };
  const pending = undos.flatMap((undo, index) => (undo.status === "completed" ? [] : [index])).reverse();
  draft.journal("compensation.started", { trigger, pending, ...(by === undefined ? {} : { by }) });
}

/** The undo that runs next: the latest not completed. */
function current(record: RunRecord): { index: number; undo: UndoRecord } | null {
  const undos = record.undos ?? [];
  for (let index = undos.length - 1; index >= 0; index -= 1) {
    const undo = undos[index];
    if (undo !== undefined && undo.status !== "completed") {
      return { index, undo };
    }
  }
  return null;
}

function setUndo(draft: Draft, index: number, patch: Partial<UndoRecord>): UndoRecord {
  const undos = [...(draft.record.undos ?? [])];
  const next = { ...(undos[index] as UndoRecord), ...patch };
  undos[index] = next;
  draft.record.undos = undos;
  return next;
}

/** A wake of a compensating run: a lost or overdue call fails its attempt, a due undo is dispatched. */
export function wakeCompensation(draft: Draft, live: LiveWork): void {
  if (draft.record.compensation?.status !== "running") {
    return;
  }
  const found = current(draft.record);
  if (found === null) {
    finishCompensation(draft, null);
    return;
  }
  const { index, undo } = found;
  if (undo.status === "running" && undo.token !== null) {
    if (!live.tokens.has(undo.token)) {
      failUndo(draft, index, undo, { code: "task.lost", message: "the undo's dispatch was lost", retryable: true });
    } else if (undo.deadline_at !== null && draft.now >= undo.deadline_at) {
      failUndo(draft, index, undo, {
        code: "task.timeout",
        message: `undo attempt ${undo.attempts} timed out`,
        retryable: true,
      });
    }
    return;
  }
  if (undo.status === "enqueued" || (undo.status === "retrying" && (undo.retry_at ?? 0) <= draft.now)) {
    dispatchUndo(draft, index, undo);
  }
}

/** The undo's definition, from the run's snapshot: the action of the step that enqueued it. */
function undoDefinition(draft: Draft, undo: UndoRecord): { task: ResolvedTask; undo: ResolvedUndo } | null {
  const task = draft.snapshot.tasks[undo.node];
  // A tool call's undo is recorded under `<llm step>/<tool>`: the tool's action declares it.
  const [stepRef, toolName] = undo.step.split("/", 2);
  const action = task?.steps.find((step) => step.ref === stepRef)?.action;
  const definition =
    toolName === undefined
      ? action?.undo
      : action?.kind === "llm"
        ? action.implementation.tools?.find((tool) => tool.name === toolName)?.action.undo
        : undefined;
  return task && definition ? { task, undo: definition } : null;
}

function dispatchUndo(draft: Draft, index: number, undo: UndoRecord): void {
  const found = undoDefinition(draft, undo);
  if (undo.problem !== undefined || undo.input === undefined || found === null) {
    const problem = undo.problem ?? {
      code: "undo.not_found",
      message: `step ${undo.step} has no undo in the snapshot`,
    };
    failUndo(draft, index, { ...undo, attempts: undo.attempts + 1 }, { ...problem, retryable: false });
    return;
  }
  draft.record.dispatch_count += 1;
  const token = `${draft.record.run_id}.${draft.record.dispatch_count}`;
  const attempt = undo.attempts + 1;
  // Each call is bounded by the undo action's own `execution.timeout_ms`; the dispatch, calls and retries together, by this.
  const timeoutMs = DEFAULT_TASK_TIMEOUT_MS;
  setUndo(draft, index, {
    status: "running",
    attempts: attempt,
    token,
    retry_at: null,
    deadline_at: draft.now + timeoutMs + DEADLINE_GRACE_MS,
  });
  const { node, item, step } = undo;
  draft.journal("undo.dispatched", {
    undo: index,
    node,
    item,
    step,
    token,
    attempt,
    action: undo.action,
    enqueued_seq: undo.seq,
  });
  // A task of one step: the undo's action, its input the one built when the step completed.
  const task: ResolvedTask = {
    id: `${found.task.id}/${step}/undo`,
    version: found.task.version,
    steps: [{ ref: "undo", action: found.undo.action }],
  };
  draft.commands.push({
    kind: "dispatch",
    payload: {
      token_id: token,
      ...runFieldsOf(draft),
      node_id: node,
      item_index: item,
      // The iteration of the call it undoes is not on record; the undo's task id (per step) keeps its key apart.
      iteration: 1,
      task_id: task.id,
      task_version: task.version,
      task,
      input: undo.input,
      // The run's containers are released when it ends: an undo calls out, it does not run in them.
      resources: {},
      timeout_ms: timeoutMs,
      retry_attempt: attempt - 1,
      one_call: true,
    },
  });
}

/** A result for a compensating run: true when it was an undo's (accepted or not), false for any other token. */
export function onUndoResult(draft: Draft, result: TaskResult): boolean {
  const found = current(draft.record);
  if (draft.record.compensation?.status !== "running" || found === null || found.undo.token !== result.token_id) {
    return false;
  }
  const { index, undo } = found;
  if (result.success && !result.suspended) {
    draft.journal("undo.completed", {
      undo: index,
      node: undo.node,
      item: undo.item,
      step: undo.step,
      token: result.token_id,
      attempt: undo.attempts,
      duration_ms: result.metrics.duration_ms,
      output: result.output ?? null,
      ...(result.steps === undefined ? {} : { steps: result.steps }),
    });
    setUndo(draft, index, { status: "completed", token: null, deadline_at: null, error: null });
    if (current(draft.record) === null) {
      finishCompensation(draft, null);
    }
    return true;
  }
  failUndo(draft, index, undo, undoError(result, undo), result.steps);
  return true;
}

/**
 * Why an undo attempt failed, and whether trying again may help. The step's
 * default `on_failure: "abort"` reports every action failure as final; the
 * undo's own `retry` goes by its call's classification instead (a 503 or a
 * timeout may pass, a 404 will not), as a node's `retry` would with
 * `on_failure: "retry"`, but without making a 404 retryable.
 */
function undoError(result: TaskResult, undo: UndoRecord): AttemptError {
  if (result.suspended) {
    return { code: "undo.suspended", message: `the undo of step ${undo.step} waited for something`, retryable: false };
  }
  const error = attemptErrorOf(result);
  const call = result.steps?.[0]?.attempts.at(-1)?.error;
  if (error.retryable || call?.retryable !== true) {
    return error;
  }
  return {
    ...error,
    retryable: true,
    ...(call.retry_after_ms === undefined ? {} : { retry_after_ms: call.retry_after_ms }),
  };
}

/** A failed undo attempt: retried by the undo's policy when retryable, else the compensation stops here. */
function failUndo(
  draft: Draft,
  index: number,
  undo: UndoRecord,
  failure: { code: string; message: string; retryable: boolean; retry_after_ms?: number },
  steps?: StepRecord[],
): void {
  const error = toFailure(failure, undo.node);
  const definition = undoDefinition(draft, undo)?.undo;
  const policy = resolveRetryPolicy(definition?.retry ?? DEFAULT_UNDO_RETRY);
  const retry = failure.retryable && undo.attempts < policy.maxAttempts;
  const retryAt = retry
    ? draft.now + retryDelayMs(policy, undo.attempts, draft.random(), failure.retry_after_ms)
    : null;
  draft.journal("undo.failed", {
    undo: index,
    node: undo.node,
    item: undo.item,
    step: undo.step,
    token: undo.token,
    attempt: undo.attempts,
    error: { ...error },
    ...(steps === undefined ? {} : { steps }),
    ...(retryAt === null ? {} : { retry_at: new Date(retryAt).toISOString() }),
  });
  const status = retryAt === null ? "failed" : "retrying";
  setUndo(draft, index, { attempts: undo.attempts, status, token: null, deadline_at: null, retry_at: retryAt, error });
  if (retryAt === null) {
    finishCompensation(draft, error);
  }
}

/** Closes the compensation section: `compensation.finished`, then a new attestation of the run's outcome. */
function finishCompensation(draft: Draft, error: Failure | null): void {
  const compensation = draft.record.compensation;
  const outcome = draft.record.status;
  if (compensation === undefined || (outcome !== "failed" && outcome !== "cancelled")) {
    return;
  }
  const undos = draft.record.undos ?? [];
  const result = {
    status: error === null ? ("completed" as const) : ("failed" as const),
    undone: undos.filter((undo) => undo.status === "completed").length,
    undos: undos.length,
  };
  draft.record.compensation = { ...compensation, status: result.status, finished_at: draft.now };
  const finished = draft.journal("compensation.finished", { ...result, ...(error ? { error: { ...error } } : {}) });
  const reason =
    error === null
      ? `compensation completed: ${result.undone} of ${result.undos} undone`
      : `compensation failed: ${error.message}`;
  draft.journal("attest", {
    outcome,
    reason,
    cited: [finished],
    created_by: draft.record.created_by,
    workflow: { id: draft.record.workflow.id, version: draft.record.workflow.version },
    ...(draft.record.error ? { error: { ...draft.record.error } } : {}),
    compensation: result,
  });
}

/**
 * When a compensating run needs its next wake: now for an undo due, its retry
 * time, or its deadline or a liveness check (`livenessMs` away) while one runs.
 */
export function compensationWakeAt(draft: Draft, livenessMs: number): number | null {
  if (draft.record.compensation?.status !== "running") {
    return null;
  }
  const found = current(draft.record);
  if (found === null || found.undo.status === "enqueued") {
    return draft.now;
  }
  if (found.undo.status === "retrying") {
    return found.undo.retry_at ?? draft.now;
  }
  return Math.min(found.undo.deadline_at ?? Number.POSITIVE_INFINITY, draft.now + livenessMs);
}
