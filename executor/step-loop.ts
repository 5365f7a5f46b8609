import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { evalCelBool } from "../lib/expr/cel.ts";
import { buildInput } from "../lib/expr/mapping.ts";
import { inRunScope } from "./run-variables.ts";
import type { StepRunVariables } from "../lib/expr/run-scope.ts";
import type { Json } from "../schemas/common.ts";
import {
  APPROVAL_SCHEMA,
  type CallAttempt,
  type StepRecord,
  type StepUndo,
  type TaskContext,
  type TaskPayload,
  type TaskSuspension,
} from "../schemas/payload.ts";
import type { ResolvedStep } from "../schemas/resolved.ts";
import type { AgentState } from "../schemas/agent.ts";
import { suspensionFor, type ActionContext } from "./actions/index.ts";
import { isAgentStep, runAgentTurn } from "./agent.ts";
import { checkRequires, invokeAction, type Clock, type InvokeOptions } from "./invoke.ts";
import { LimitNoRoom } from "./limits.ts";
import { onStepFailure, stepRecord, writeStepOutput, type StepOutcome, type TaskFailure } from "./step-outcome.ts";
import type { TaskStart } from "./task-start.ts";

/** What the step loop needs from outside: the action context and the clock. */
export interface StepLoopDeps {
  context: Omit<ActionContext, "signal" | "payload">;
  clock: Clock;
  /** The task's own deadline: aborted when this attempt runs out of time. */
  signal: AbortSignal;
  /** Each step's `run` variable, by step index. */
  run: readonly StepRunVariables[];
}

/** How the step loop ended: every step done, a step failed, or a step waits. */
export type LoopEnd =
  | { end: "done"; context: TaskContext }
  | ({ end: "fail" } & TaskFailure)
  | { end: "suspend"; stepRef: string; stepIndex: number; context: TaskContext; wait: TaskSuspension["wait"] };

/** What the loop counts as it goes, for the result's metrics and its step records. */
export interface StepTally {
  stepsExecuted: number;
  usage: { input: number; output: number; cost_usd: number };
  steps: StepRecord[];
}

/**
 * Runs a task's steps strictly in order from its start, over its context
 * `{ input, state, output }`, until they are done, one fails, one waits, or
 * one's condition ends the task successfully (`else: "succeed"`).
 */
export async function runSteps(
  payload: TaskPayload,
  start: Extract<TaskStart, { ok: true }>,
  deps: StepLoopDeps,
  tally: StepTally,
): Promise<LoopEnd> {
  let context = start.context;
  for (let index = start.first; index < payload.task.steps.length; index += 1) {
    const step = payload.task.steps[index] as ResolvedStep;
    const started = deps.clock.now();
    const attempts: CallAttempt[] = [];
    const run = deps.run[index];
    const granted = index === start.first ? start.granted : undefined;
    const call: InvokeOptions = {
      context: { ...deps.context, payload, ...(run === undefined ? {} : { run }) },
      place: granted === undefined ? { step: step.ref } : { step: step.ref, granted },
      taskSignal: deps.signal,
      clock: deps.clock,
      attempts,
    };
    const agent = index === start.first ? start.agent : undefined;
    const outcome = await inRunScope(run, () => runStep(step, context, call, start.approvedIndex === index, agent));
    tally.steps.push(stepRecord(step, outcome, attempts, deps.clock.now() - started));
    tally.stepsExecuted += outcome.ran ? 1 : 0;
    addUsage(tally.usage, outcome.usage);
    if (outcome.next === "fail") {
      return { end: "fail", error: outcome.error, stepRef: step.ref, context };
    }
    if (outcome.next === "suspend") {
      return { end: "suspend", stepRef: step.ref, stepIndex: index, context, wait: outcome.wait };
    }
    context = outcome.context;
    if (outcome.next === "succeed") {
      break;
    }
  }
  return { end: "done", context };
}

/**
 * One step: its condition, then its action (or its wait), then its output or its `on_failure`.
 * The context is the document its condition and input mapping read (`input`, `state`, `output`).
 */
async function runStep(
  step: ResolvedStep,
  context: TaskContext,
  call: InvokeOptions,
  approved: boolean,
  agent: AgentState | undefined,
): Promise<StepOutcome> {
  // An agent step between turns already passed its condition.
  const skipped = agent === undefined ? checkCondition(step, context) : null;
  if (skipped !== null) {
    return skipped;
  }
  try {
    const input: Json = step.input_mapping ? buildInput(step.input_mapping, context) : context.input;
    const wait = waitFor(step, input, approved, context);
    if (wait === undefined && isAgentStep(step)) {
      return await runAgentTurn(step, input, context, call, agent);
    }
    if (wait) {
      // A step that waits is still an action call: its input is checked now, its output on resume.
      checkRequires(step.action, input);
      return { next: "suspend", wait, ran: false };
    }
    const output = await invokeAction(step.action, input, call);
    const undo = undoOf(step, input, output);
    const done = { ran: true, usage: metaOf(output), ...(undo === undefined ? {} : { undo }) };
    try {
      return { next: "continue", context: writeStepOutput(step, output, context), ...done };
    } catch (thrown) {
      // The call happened: its undo stays enqueued though its output could not be written.
      const error = ensureEngineError(thrown, "mapping.failed");
      return { ...onStepFailure(step, error, context, call.taskSignal), ...done };
    }
  } catch (thrown) {
    if (thrown instanceof LimitNoRoom && thrown.suspends) {
      // A limit had no room: the step holds nothing and waits (executor/limits.ts).
      return {
        next: "suspend",
        wait: thrown.wait,
        ran: false,
        ...(thrown.meta === undefined ? {} : { usage: thrown.meta as Json }),
      };
    }
    const error = ensureEngineError(thrown, "step.failed");
    const outcome = onStepFailure(step, error, context, call.taskSignal);
    // A failed call may still have been paid for (an llm answer that did not match).
    return error.meta === undefined ? outcome : { ...outcome, usage: error.meta as Json };
  }
}

/**
 * The undo a completed call enqueues, when its action declares one: the undo's
 * input is built now, from the call's own `{ input, output }`, because that is
 * all it may read (the task context moves on). A mapping that fails leaves the
 * undo on record with its error: the call happened, and compensation will say
 * that it could not be undone.
 */
function undoOf(step: ResolvedStep, input: Json, output: Json): StepUndo | undefined {
  const undo = step.action.undo;
  if (undo === undefined) {
    return undefined;
  }
  const action = `${undo.action.kind} ${undo.action.id}@${undo.action.version}`;
  try {
    return { action, input: undo.input_mapping ? buildInput(undo.input_mapping, { input, output }) : input };
  } catch (thrown) {
    const error = ensureEngineError(thrown, "undo.invalid_mapping");
    return { action, error: { code: error.code, message: error.message } };
  }
}

/**
 * A step's `condition`: null when it holds (or there is none) and the step
 * runs; otherwise how the step ends by `else` (skip, succeed, fail). A
 * condition that errors fails the task.
 */
function checkCondition(step: ResolvedStep, context: TaskContext): StepOutcome | null {
  if (!step.condition) {
    return null;
  }
  let holds: boolean;
  try {
    holds = evalCelBool(step.condition.if, context);
  } catch (thrown) {
    return { next: "fail", error: ensureEngineError(thrown, "step.condition_failed"), ran: false };
  }
  if (holds) {
    return null;
  }
  const otherwise = step.condition.else ?? "skip";
  if (otherwise === "fail") {
    const message = `condition of step ${step.ref} is false: ${step.condition.if}`;
    return { next: "fail", error: EngineError.terminal("step.condition_failed", message), ran: false };
  }
  return { next: otherwise === "succeed" ? "succeed" : "continue", context, ran: false };
}

/**
 * What a step must wait for before it can run, if anything: a human step
 * waits for its gate, a workflow step for its child run, and a high-risk
 * action for an approval (unless this dispatch carries that approval).
 */
function waitFor(
  step: ResolvedStep,
  input: Json,
  approved: boolean,
  context: TaskContext,
): TaskSuspension["wait"] | undefined {
  const action = step.action;
  if (action.risk === "high" && !approved) {
    return {
      kind: "gate",
      gate_kind: "approval",
      prompt: `Step "${step.ref}" wants to run the high-risk ${action.kind} action ${action.id}@${action.version} with input ${preview(input)}. Approve?`,
      input_schema: APPROVAL_SCHEMA,
      action: { id: action.id, version: action.version, kind: action.kind },
      ...(action.approvers === undefined ? {} : { approvers: action.approvers }),
    };
  }
  return suspensionFor(action, input, context);
}

function preview(input: Json): string {
  const text = JSON.stringify(input);
  return text.length > 500 ? `${text.slice(0, 500)}…` : text;
}

/** An action's `_meta` (llm actions report `tokens { input, output }` and `cost_usd` there). */
function metaOf(output: Json): Json | undefined {
  return output !== null && typeof output === "object" && !Array.isArray(output) ? output._meta : undefined;
}

/** Adds an action's reported usage to the task's totals; anything malformed counts as nothing. */
function addUsage(total: StepTally["usage"], meta: Json | undefined): void {
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
