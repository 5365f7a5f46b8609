import { EngineError, ensureEngineError, toTaskError as engineErrorToTaskError } from "../lib/errors.ts";
import { evalCelBool } from "../lib/expr/cel.ts";
import { applyOutputMapping, buildInput, setTargetPath, type Json, type JsonRecord } from "../lib/expr/mapping.ts";
import { renderTemplate } from "../lib/expr/template.ts";
import { MAX_TASK_WORK_UNITS, WorkBudget, withWorkBudget } from "../lib/expr/work-budget.ts";
import { canonicalProblem, MAX_CANONICAL_DEPTH } from "../lib/journal/canonical.ts";
import { validateJson } from "../lib/json-schema.ts";
import { scrubbedSecretValues, scrubSecrets } from "../lib/secrets.ts";
import {
  APPROVAL_SCHEMA,
  toUnsignableResult,
  type ResolvedStep,
  type TaskContext,
  type TaskPayload,
  type TaskResult,
  type TaskResume,
  type TaskSuspension,
} from "../schemas/index.ts";
import type { ActionContext } from "./actions/index.ts";
import { invokeAction, type Clock } from "./invoke.ts";

/**
 * The largest task output, in characters of JSON (about 1 MB). Outputs are
 * journaled and stored in the run's SQLite rows (2 MB each at most); larger
 * data belongs in an artifact, passed by reference.
 */
export const MAX_TASK_OUTPUT_CHARS = 1_000_000;

/**
 * Failures that the same task input always reproduces: a step's
 * `on_failure: "retry"` does not make them retryable, since a retry would
 * spend the same budget, or meet the same unsignable value, again.
 */
const DETERMINISTIC_FAILURES: ReadonlySet<string> = new Set([
  "expr.budget_exceeded",
  "template.budget_exceeded",
  "template.too_deep",
  "action.unsignable_output",
]);

/** Levels a result adds around the values it carries (`error.context_snapshot.state.<ref>`, mapped target paths). */
const RESULT_WRAPPING_DEPTH = 16;

export interface RunTaskDeps {
  context: Omit<ActionContext, "signal" | "payload">;
  clock: Clock;
}

/** How a step ended, and what the task does next. */
type StepOutcome = (
  | { next: "continue"; context: TaskContext; ran: boolean }
  | { next: "succeed"; context: TaskContext; ran: boolean }
  | { next: "fail"; error: EngineError; ran: boolean }
  | { next: "suspend"; wait: TaskSuspension["wait"]; ran: boolean }
) & { usage?: Json };

/**
 * Runs a task's steps strictly in order over its context `{ input, state,
 * output }` and returns a {@link TaskResult}. Never throws: every failure is
 * returned as data with a code and a `retryable` flag.
 */
export async function runTask(payload: TaskPayload, deps: RunTaskDeps): Promise<TaskResult> {
  // Every expression of the task (its steps' conditions and mappings, its actions' CEL and templates) draws from one budget.
  const result = await withWorkBudget(new WorkBudget(MAX_TASK_WORK_UNITS, "task"), () => runSteps(payload, deps));
  return finalizeResult(result, scrubbedSecretValues(deps.context.env));
}

/**
 * The last net before a result leaves the executor: every secret value is
 * scrubbed from all of it (outputs, error messages, the context snapshot, a
 * gate's prompt), messages are made well-formed text, and a result that still
 * could not be signed into the journal becomes a failure that says so (not
 * retryable: the same work would produce the same value).
 */
export function finalizeResult(result: TaskResult, secrets: readonly string[]): TaskResult {
  const scrubbed = scrubSecrets(result, secrets);
  const error = scrubbed.error;
  const wellFormed =
    error === undefined || error.message.isWellFormed()
      ? scrubbed
      : { ...scrubbed, error: { ...error, message: error.message.toWellFormed() } };
  // Outputs were checked against MAX_CANONICAL_DEPTH as each action returned; the result wraps them a few levels deeper.
  const problem = canonicalProblem(wellFormed, MAX_CANONICAL_DEPTH + RESULT_WRAPPING_DEPTH);
  return problem === null ? wellFormed : toUnsignableResult(result, problem.path, problem.message);
}

async function runSteps(payload: TaskPayload, deps: RunTaskDeps): Promise<TaskResult> {
  const started = deps.clock.now();
  const signal = AbortSignal.timeout(payload.timeout_ms);
  let context: TaskContext = { input: payload.input, state: {}, output: {} };
  let stepsExecuted = 0;
  const usage = { input: 0, output: 0, cost_usd: 0 };
  const finish = (
    outcome: { success: true; output: Json } | { success: false; error: EngineError; stepRef: string | null },
  ): TaskResult => {
    const metrics = {
      duration_ms: deps.clock.now() - started,
      steps_executed: stepsExecuted,
      llm_tokens: { ...usage },
    };
    if (outcome.success) {
      const size = JSON.stringify(outcome.output).length;
      if (size <= MAX_TASK_OUTPUT_CHARS) {
        return { token_id: payload.token_id, success: true, output: outcome.output, metrics };
      }
      const tooLarge = EngineError.terminal(
        "task.output_too_large",
        `the task output is ${size} characters of JSON; the limit is ${MAX_TASK_OUTPUT_CHARS} (store large data elsewhere, e.g. as an artifact, and pass a reference)`,
      );
      return { token_id: payload.token_id, success: false, error: toTaskError(tooLarge, null, null), metrics };
    }
    return {
      token_id: payload.token_id,
      success: false,
      error: toTaskError(outcome.error, outcome.stepRef, context),
      metrics,
    };
  };

  const resume = payload.resume;
  let first = 0;
  if (resume) {
    context = resume.context;
    const resumed = resumeStep(payload, resume, context, signal);
    if (resumed.next === "fail") {
      return finish({
        success: false,
        error: resumed.error,
        stepRef: payload.task.steps[resume.step_index]?.ref ?? null,
      });
    }
    if (resume.mode === "approved") {
      first = resume.step_index; // The approved step itself runs now.
    } else if (resumed.next === "continue") {
      context = resumed.context;
      first = resume.step_index + 1;
    } else if (resumed.next === "succeed") {
      context = resumed.context;
      first = payload.task.steps.length;
    }
  } else {
    const inputProblems = validateJson(payload.task.input_schema, payload.input, "input");
    if (inputProblems.length > 0) {
      return finish({
        success: false,
        error: EngineError.terminal(
          "task.invalid_input",
          `the input of task ${payload.task.id} does not match its input_schema`,
          inputProblems,
        ),
        stepRef: null,
      });
    }
  }
  for (let index = first; index < payload.task.steps.length; index += 1) {
    const step = payload.task.steps[index] as ResolvedStep;
    const approved = resume?.mode === "approved" && resume.step_index === index;
    const outcome = await runStep(step, context, payload, deps, signal, approved);
    stepsExecuted += outcome.ran ? 1 : 0;
    addUsage(usage, outcome.usage);
    if (outcome.next === "fail") {
      return finish({ success: false, error: outcome.error, stepRef: step.ref });
    }
    if (outcome.next === "suspend") {
      const metrics = {
        duration_ms: deps.clock.now() - started,
        steps_executed: stepsExecuted,
        llm_tokens: { ...usage },
      };
      return {
        token_id: payload.token_id,
        success: false,
        suspended: { step_ref: step.ref, step_index: index, context, wait: outcome.wait },
        metrics,
      };
    }
    context = outcome.context;
    if (outcome.next === "succeed") {
      break;
    }
  }
  const outputProblems = validateJson(payload.task.output_schema, context.output, "output");
  if (outputProblems.length > 0) {
    return finish({
      success: false,
      error: EngineError.terminal(
        "task.invalid_output",
        `the output of task ${payload.task.id} does not match its output_schema`,
        outputProblems,
      ),
      stepRef: null,
    });
  }
  return finish({ success: true, output: context.output });
}

async function runStep(
  step: ResolvedStep,
  context: TaskContext,
  payload: TaskPayload,
  deps: RunTaskDeps,
  signal: AbortSignal,
  approved: boolean,
): Promise<StepOutcome> {
  const doc = { input: context.input, state: context.state, output: context.output };
  if (step.condition) {
    let holds: boolean;
    try {
      holds = evalCelBool(step.condition.if, doc);
    } catch (thrown) {
      return { next: "fail", error: ensureEngineError(thrown, "step.condition_failed"), ran: false };
    }
    if (!holds) {
      const otherwise = step.condition.else ?? "skip";
      if (otherwise === "fail") {
        return {
          next: "fail",
          error: EngineError.terminal(
            "step.condition_failed",
            `condition of step ${step.ref} is false: ${step.condition.if}`,
          ),
          ran: false,
        };
      }
      return { next: otherwise === "succeed" ? "succeed" : "continue", context, ran: false };
    }
  }
  try {
    const input: Json = step.input_mapping ? buildInput(step.input_mapping, doc) : context.input;
    const wait = waitFor(step, input, approved);
    if (wait) {
      // A step that waits is still an action call: its input is checked now, its output on resume.
      const problems = validateJson(step.action.requires, input, "input");
      if (problems.length > 0) {
        throw EngineError.terminal(
          "action.invalid_input",
          `the input of action ${step.action.id} does not match its "requires" schema`,
          problems,
        );
      }
      return { next: "suspend", wait, ran: false };
    }
    const { output } = await invokeAction(step.action, input, {
      context: { ...deps.context, payload },
      taskSignal: signal,
      clock: deps.clock,
    });
    return { next: "continue", context: writeStepOutput(step, output, context), ran: true, usage: metaOf(output) };
  } catch (thrown) {
    const error = ensureEngineError(thrown, "step.failed");
    const outcome = onStepFailure(step, error, context, signal);
    // A failed call may still have been paid for (an llm answer that did not match).
    return error.meta === undefined ? outcome : { ...outcome, usage: error.meta as Json };
  }
}

/**
 * What a step must wait for before it can run, if anything: a human step
 * waits for its gate, a workflow step for its child run, and a high-risk
 * action for an approval (unless this dispatch carries that approval).
 */
function waitFor(step: ResolvedStep, input: Json, approved: boolean): TaskSuspension["wait"] | undefined {
  const action = step.action;
  if (action.risk === "high" && !approved) {
    return {
      kind: "gate",
      gate_kind: "approval",
      prompt: `Step "${step.ref}" wants to run the high-risk ${action.kind} action ${action.id}@${action.version} with input ${preview(input)}. Approve?`,
      input_schema: APPROVAL_SCHEMA,
      action: { id: action.id, version: action.version, kind: action.kind },
    };
  }
  if (action.kind === "human") {
    const implementation = action.implementation;
    return {
      kind: "gate",
      gate_kind: "input",
      prompt: renderTemplate(implementation.prompt_template, input),
      input_schema: implementation.input_schema,
      ...(implementation.timeout_ms === undefined ? {} : { timeout_ms: implementation.timeout_ms }),
      ...(implementation.on_timeout === undefined ? {} : { on_timeout: implementation.on_timeout }),
    };
  }
  if (action.kind === "workflow") {
    return {
      kind: "child",
      workflow: action.implementation.workflow,
      input,
      on_failure: action.implementation.on_failure ?? "propagate",
    };
  }
  return undefined;
}

function preview(input: Json): string {
  const text = JSON.stringify(input);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/**
 * The step a suspended task stopped at, once its wait is over: its output
 * (a gate's answer, a child's output) is written as any step output would
 * be, and a failure (a child that failed, a rejected approval) is handled by
 * the step's `on_failure`.
 */
function resumeStep(payload: TaskPayload, resume: TaskResume, context: TaskContext, signal: AbortSignal): StepOutcome {
  const step = payload.task.steps[resume.step_index];
  if (!step) {
    return {
      next: "fail",
      error: EngineError.terminal("task.bad_resume", `the task has no step ${resume.step_index}`),
      ran: false,
    };
  }
  if (resume.mode === "approved") {
    return { next: "continue", context, ran: false };
  }
  if (resume.mode === "rejected") {
    const rejected = EngineError.terminal(
      "approval.rejected",
      `step ${step.ref} was not approved${resume.reason ? `: ${resume.reason}` : ""}`,
    );
    return onStepFailure(
      { ...step, on_failure: step.on_failure === "continue" ? "continue" : "abort" },
      rejected,
      context,
      signal,
    );
  }
  const outcome = resume.outcome;
  if (!outcome) {
    return {
      next: "fail",
      error: EngineError.terminal("task.bad_resume", `resuming step ${step.ref} needs its outcome`),
      ran: false,
    };
  }
  if (!outcome.ok) {
    return onStepFailure(step, EngineError.terminal(outcome.error.code, outcome.error.message), context, signal);
  }
  try {
    const problems = validateJson(step.action.produces, outcome.output, "output");
    if (problems.length > 0) {
      throw EngineError.terminal(
        "action.invalid_output",
        `the output of action ${step.action.id} does not match its "produces" schema`,
        problems,
      );
    }
    return { next: "continue", context: writeStepOutput(step, outcome.output as Json, context), ran: true };
  } catch (thrown) {
    return onStepFailure(step, ensureEngineError(thrown, "mapping.failed"), context, signal);
  }
}

/** A step's output goes where its output mapping says, or to `state.<ref>`. */
function writeStepOutput(step: ResolvedStep, output: Json, context: TaskContext): TaskContext {
  const target = { state: context.state as JsonRecord, output: context.output as JsonRecord };
  const next = step.output_mapping
    ? applyOutputMapping(step.output_mapping, output, target)
    : setTargetPath(target, `state.${step.ref}`, output);
  return { ...context, state: next.state, output: next.output };
}

function onStepFailure(step: ResolvedStep, error: EngineError, context: TaskContext, signal: AbortSignal): StepOutcome {
  if (signal.aborted) {
    return {
      next: "fail",
      error: EngineError.retryable("task.timeout", `the task ran out of time in step ${step.ref}: ${error.message}`),
      ran: true,
    };
  }
  switch (step.on_failure ?? "abort") {
    case "continue": {
      const errors = Array.isArray(context.state._errors) ? context.state._errors : [];
      const entry = { step: step.ref, error: { code: error.code, message: error.message } };
      return {
        next: "continue",
        context: { ...context, state: { ...context.state, _errors: [...errors, entry] } },
        ran: true,
      };
    }
    case "retry":
      // A spent budget or a value that cannot be signed comes back the same on every attempt: never worth a retry.
      return {
        next: "fail",
        error: new EngineError(error.code, error.message, {
          retryable: !DETERMINISTIC_FAILURES.has(error.code),
          retryAfterMs: error.retryAfterMs,
          details: error.details,
        }),
        ran: true,
      };
    case "abort":
      return {
        next: "fail",
        error: new EngineError(error.code, error.message, { retryable: false, details: error.details }),
        ran: true,
      };
  }
}

function toTaskError(
  error: EngineError,
  stepRef: string | null,
  context: TaskContext | null,
): NonNullable<TaskResult["error"]> {
  // A snapshot too large to travel and store is left out rather than failing the report.
  const snapshot = context !== null && JSON.stringify(context).length <= MAX_TASK_OUTPUT_CHARS ? context : null;
  return engineErrorToTaskError(error, stepRef, snapshot);
}

/** An action's `_meta` (llm actions report `tokens { input, output }` and `cost_usd` there). */
function metaOf(output: Json): Json | undefined {
  return output !== null && typeof output === "object" && !Array.isArray(output) ? output._meta : undefined;
}

/** Adds an action's reported usage to the task's totals; anything malformed counts as nothing. */
function addUsage(total: { input: number; output: number; cost_usd: number }, meta: Json | undefined): void {
  if (meta === null || typeof meta !== "object" || Array.isArray(meta)) {
    return;
  }
  const tokens = meta.tokens;
  const count = (value: Json | undefined) =>
    typeof value === "number" && Number.isFinite(value) && value >= 0 ? value : 0;
  if (tokens !== null && typeof tokens === "object" && !Array.isArray(tokens)) {
    total.input += Math.round(count(tokens.input));
    total.output += Math.round(count(tokens.output));
  }
  total.cost_usd += count(meta.cost_usd);
}
