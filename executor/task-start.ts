import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import type { AgentState } from "../schemas/agent.ts";
import type { StepRecord, TaskContext, TaskPayload, TaskResume } from "../schemas/payload.ts";
import type { StepRunVariables } from "../lib/expr/run-scope.ts";
import { inRunScope } from "./run-variables.ts";
import { checkProduces } from "./invoke.ts";
import {
  onStepFailure,
  stepRecord,
  writeStepOutput,
  type FailedStepOutcome,
  type TaskFailure,
} from "./step-outcome.ts";

/**
 * Where a task's step loop starts: a fresh task at its first step, or a task
 * that continues after a gate, an approval or a child run at its resume
 * point. `approvedIndex` is the step whose approval this dispatch carries.
 */
export type TaskStart = (
  | {
      ok: true;
      first: number;
      context: TaskContext;
      approvedIndex: number | null;
      /** An agent step whose tool calls settled: its loop, for its next turn (executor/agent.ts). */
      agent?: AgentState;
      /** On a `granted` resume: the holder the limit object served, which the step's first call holds as. */
      granted?: string;
    }
  | ({ ok: false } & TaskFailure)
) & {
  /** A continuation's waiting step, finished here (its gate answered, its child ended): its record. */
  resumed?: StepRecord;
};

/** The task's start, or the failure that ends it before any step runs. */
export function startOf(payload: TaskPayload, signal: AbortSignal, run: readonly StepRunVariables[]): TaskStart {
  const resume = payload.resume;
  // The waiting step's output mapping sees that step's `run`.
  return resume ? inRunScope(run[resume.step_index], () => resumeAt(payload, resume, signal)) : startFresh(payload);
}

/** A fresh task starts at its first step, once its input matches its `input_schema`. */
function startFresh(payload: TaskPayload): TaskStart {
  const context: TaskContext = { input: payload.input, state: {}, output: {} };
  const inputProblems = validateJson(payload.task.input_schema, payload.input, "input");
  if (inputProblems.length > 0) {
    const error = EngineError.terminal(
      "task.invalid_input",
      `the input of task ${payload.task.id} does not match its input_schema`,
      inputProblems,
    );
    return { ok: false, error, stepRef: null, context };
  }
  return { ok: true, first: 0, context, approvedIndex: null };
}

/**
 * A continued task starts where it suspended: an approved step runs now;
 * otherwise the suspended step is finished (its output written, or its
 * failure handled) and the task goes on after it.
 */
function resumeAt(payload: TaskPayload, resume: TaskResume, signal: AbortSignal): TaskStart {
  if (resume.mode === "tools") {
    // The agent step runs its next turn; its own approval, if it needed one, was given before its first.
    if (resume.agent === undefined) {
      const error = EngineError.terminal("task.bad_resume", "resuming an agent step needs its loop");
      return { ok: false, error, stepRef: payload.task.steps[resume.step_index]?.ref ?? null, context: resume.context };
    }
    const first = resume.step_index;
    return { ok: true, first, context: resume.context, approvedIndex: first, agent: resume.agent };
  }
  if (resume.mode === "granted") {
    return grantedAt(payload, resume);
  }
  const resumed = resumeStep(payload, resume, resume.context, signal);
  const step = payload.task.steps[resume.step_index];
  // The call behind a gate or a child happened elsewhere (gate.answered, child.finished): no attempts here.
  const record = step === undefined ? {} : { resumed: stepRecord(step, resumed, [], 0) };
  if (resumed.next === "fail") {
    return { ok: false, error: resumed.error, stepRef: step?.ref ?? null, context: resume.context, ...record };
  }
  if (resume.mode === "approved") {
    // The approved step itself runs now, and the step loop records it.
    return { ok: true, first: resume.step_index, context: resume.context, approvedIndex: resume.step_index };
  }
  return { ok: true, first: resume.step_index + 1, context: resumed.context, approvedIndex: null, ...record };
}

/**
 * A step that waited for a limit runs again from its start, holding the slot
 * the object served (executor/limits.ts): it had passed its approval, if it
 * needed one, before it asked; an agent step goes on with its loop.
 */
function grantedAt(payload: TaskPayload, resume: TaskResume): TaskStart {
  const first = resume.step_index;
  if (payload.task.steps[first] === undefined) {
    const error = EngineError.terminal("task.bad_resume", `the task has no step ${first}`);
    return { ok: false, error, stepRef: null, context: resume.context };
  }
  return {
    ok: true,
    first,
    context: resume.context,
    approvedIndex: first,
    ...(resume.holder_id === undefined ? {} : { granted: resume.holder_id }),
    ...(resume.agent === undefined ? {} : { agent: resume.agent }),
  };
}

/**
 * The step a suspended task stopped at, once its wait is over: its output
 * (a gate's answer, a child's output) is written as any step output would
 * be, and a failure (a child that failed, a rejected approval) is handled by
 * the step's `on_failure`.
 */
function resumeStep(
  payload: TaskPayload,
  resume: TaskResume,
  context: TaskContext,
  signal: AbortSignal,
): FailedStepOutcome {
  const step = payload.task.steps[resume.step_index];
  if (!step) {
    return badResume(`the task has no step ${resume.step_index}`);
  }
  if (resume.mode === "approved") {
    return { next: "continue", context, ran: false };
  }
  if (resume.mode === "rejected") {
    const rejected = EngineError.terminal(
      "approval.rejected",
      `step ${step.ref} was not approved${resume.reason ? `: ${resume.reason}` : ""}`,
    );
    const onFailure = step.on_failure === "continue" ? "continue" : "abort";
    return onStepFailure({ ...step, on_failure: onFailure }, rejected, context, signal);
  }
  const outcome = resume.outcome;
  if (!outcome) {
    return badResume(`resuming step ${step.ref} needs its outcome`);
  }
  if (!outcome.ok) {
    return onStepFailure(step, EngineError.terminal(outcome.error.code, outcome.error.message), context, signal);
  }
  try {
    checkProduces(step.action, outcome.output);
    return { next: "continue", context: writeStepOutput(step, outcome.output, context), ran: true };
  } catch (thrown) {
    return onStepFailure(step, ensureEngineError(thrown, "mapping.failed"), context, signal);
  }
}

function badResume(message: string): FailedStepOutcome {
  return { next: "fail", error: EngineError.terminal("task.bad_resume", message), ran: false };
}
