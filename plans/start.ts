import { EngineError } from "../lib/errors.ts";
import { sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import type { Result } from "../lib/result.ts";
import { validateJson } from "../lib/json-schema.ts";
import type { Json } from "../schemas/common.ts";
import type { PlanGraph, PlanOrigin } from "../schemas/plans.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import type { PlanStepRecord } from "../schemas/run.ts";
import { compilePlan, type CompiledPlan } from "./compile.ts";
import { finishPlan } from "./finish.ts";
import { checkGraph } from "./graph.ts";
import { normalizePlan, type NormalPlan } from "./normalize.ts";

/**
 * Starting a plan, whoever asks: `POST /v1/plans` (src/plans.ts) and a `plan`
 * step's child run (coordinator/children.ts) go through the same checks,
 * compilation and resolution, so a plan runs the same either way.
 */

/** What a plan start names: the plan as given, its allowlist, its inputs and its pre-approved steps. */
export interface PlanStart {
  given: Record<string, Json>;
  tools: readonly string[];
  input: Record<string, Json>;
  approvedSteps: readonly string[];
}

/** The plan, compiled into a workflow (nothing resolved yet). */
export interface CheckedPlan {
  plan: NormalPlan;
  compiled: CompiledPlan;
}

/** The plan, resolved into the snapshot its run keeps, and the graph a preview shows. */
export interface PreparedPlan extends CheckedPlan {
  snapshot: RunSnapshot;
  graph: PlanGraph;
}

/** What preparing a plan needs besides the plan: the catalog's resolution and the deployment's setting. */
export interface PlanStartDeps {
  resolvePlan(workflow: unknown): Promise<Result<RunSnapshot>>;
  /** `PLAN_PREAPPROVAL` is `allow`: a start may turn high-risk steps' gates off. */
  preapprovalAllowed: boolean;
}

/**
 * The checks that need nothing but the plan (400 / 403 for `POST /v1/plans`;
 * a `plan` step's failure before any child exists): the notation, the graph,
 * the given inputs, the pre-approved steps, the allowlist and compilation.
 * `preapprovalAllowed` undefined leaves the deployment's setting to the start.
 */
export function checkPlan(start: PlanStart, preapprovalAllowed?: boolean): CheckedPlan {
  const plan = normalizePlan(start.given);
  checkGraph(plan);
  checkInput(plan, start.input);
  if (preapprovalAllowed !== undefined) {
    checkPreapproval(start.approvedSteps, preapprovalAllowed);
  }
  checkApprovedSteps(plan, start.approvedSteps);
  return { plan, compiled: compilePlan(plan, start.tools, start.input) };
}

/**
 * The checked plan resolved against the catalog (as a registration would
 * check it, problems at the path of the step's tool) and finished: the
 * snapshot its run keeps and the graph a preview answers.
 */
export async function preparePlan(start: PlanStart, deps: PlanStartDeps): Promise<PreparedPlan> {
  const { plan, compiled } = checkPlan(start, deps.preapprovalAllowed);
  const snapshot = atStepPaths(plan, await deps.resolvePlan(compiled.workflow));
  const graph = finishPlan(snapshot, plan, compiled, {
    preapprovalAllowed: deps.preapprovalAllowed,
    approvedSteps: start.approvedSteps,
  });
  return { plan, compiled, snapshot, graph };
}

/**
 * What a plan run records of its plan: the origin its first journal entry
 * carries (the plan as given, the allowlist, the graph, the SHA-256 of the
 * compiled workflow) and its steps in plan order, for `results`.
 */
export async function toPlanRecord(
  start: PlanStart,
  prepared: PreparedPlan,
): Promise<{ origin: PlanOrigin; steps: PlanStepRecord[] }> {
  const origin: PlanOrigin = {
    notation: prepared.plan.notation,
    given: start.given,
    tools: [...start.tools],
    graph: prepared.graph,
    workflow_sha256: await sha256Hex(canonicalJson(prepared.snapshot.workflow.definition)),
  };
  checkEntrySize(origin, start.input);
  return { origin, steps: prepared.plan.steps.map((step) => ({ id: step.id, tool: step.tool })) };
}

/**
 * A plan run by a `plan` step may do no more than the run the step is in:
 * every `tool:` and `mcp:` grant of its allowlist (what the compiled
 * workflow's `tools` will be) must be on that run's own `tools`, as written,
 * or `mcp:<server>/<tool>` under the run's `mcp:<server>/*`. Registered
 * actions are not grants of a run's allowlist and are not checked here.
 */
export function checkGrantsWithin(tools: readonly string[], allowlist: readonly string[]): void {
  const granted = new Set(allowlist);
  const problems = tools.flatMap((grant, index) => {
    if (!grant.startsWith("tool:") && !grant.startsWith("mcp:")) {
      return [];
    }
    const server = /^mcp:([^/]+)\//.exec(grant)?.[1];
    if (granted.has(grant) || (server !== undefined && granted.has(`mcp:${server}/*`))) {
      return [];
    }
    const message = `"${grant}" is not on this run's tools allowlist (the workflow's "tools")`;
    return [{ path: `tools.${index}`, message, code: "plan.tool_not_allowed" }];
  });
  if (problems.length > 0) {
    throw EngineError.terminal(
      "plan.tool_not_allowed",
      `the plan may call what this run may not: ${problems.length} grant(s) are not on its tools allowlist`,
      problems,
    );
  }
}

/**
 * The resolved snapshot, or the catalog's refusal with each problem's path
 * in the compiled workflow (`compiled.nodes.step-0.task.steps.0.action…`)
 * given as the path of the step's tool in the request (`plan.steps.0.tool`).
 */
function atStepPaths(plan: NormalPlan, result: Result<RunSnapshot>): RunSnapshot {
  if (result.ok) {
    return result.value;
  }
  const error = EngineError.fromData(result.error);
  const indexOf = new Map(plan.steps.map((step) => [step.id, step.index]));
  const details = error.details?.map((detail) => {
    const match = /^compiled\.nodes\.([^.]+)\.task\.steps\.0\.action\b/.exec(detail.path);
    const index = match === null ? undefined : indexOf.get(match[1] ?? "");
    return index === undefined ? detail : { ...detail, path: `plan.steps.${index}.tool` };
  });
  throw new EngineError(error.code, error.message, { retryable: false, details });
}

/**
 * The most characters the plan, its graph and the input may take on the
 * journal's first entry: a SQLite row holds at most 2 MB, and a plan near
 * the body limit compiles to a graph of about its own size.
 */
const MAX_CREATED_ENTRY_CHARS = 1_500_000;

function checkEntrySize(origin: PlanOrigin, input: Record<string, Json>): void {
  const chars = canonicalJson(origin).length + canonicalJson(input).length;
  if (chars > MAX_CREATED_ENTRY_CHARS) {
    throw EngineError.terminal(
      "plan.too_large",
      `the plan, the graph it compiles to and the input take ${chars} characters on the run's first journal entry (at most ${MAX_CREATED_ENTRY_CHARS})`,
    );
  }
}

/** The given inputs must match the plan's `inputs` schema, except for required ones left out (asked through the gate). */
function checkInput(plan: NormalPlan, input: Record<string, unknown>): void {
  if (plan.inputs === undefined || typeof plan.inputs === "boolean") {
    return;
  }
  const { required: _required, ...lenient } = plan.inputs;
  const problems = validateJson(lenient, input, "input");
  if (problems.length > 0) {
    throw EngineError.terminal("plan.invalid_input", "the input does not match the plan's inputs schema", problems);
  }
}

/**
 * `approved_steps` on a new plan turns the approval gate of those high-risk
 * steps off: only where the deployment allows it (`PLAN_PREAPPROVAL=allow`,
 * 403 `plan.preapproval_disabled` otherwise).
 */
function checkPreapproval(approved: readonly string[], allowed: boolean): void {
  if (approved.length > 0 && !allowed) {
    throw EngineError.terminal(
      "plan.preapproval_disabled",
      'this deployment does not let a request pre-approve high-risk steps (PLAN_PREAPPROVAL is not "allow"); approve them at their gates',
    );
  }
}

/** `approved_steps` names only steps of the plan. */
function checkApprovedSteps(plan: NormalPlan, approved: readonly string[]): void {
  const ids = new Set(plan.steps.map((step) => step.id));
  const unknown = approved.filter((id) => !ids.has(id));
  if (unknown.length > 0) {
    throw EngineError.terminal(
      "plan.invalid",
      "approved_steps names steps the plan does not have",
      unknown.map((id) => ({ path: "approved_steps", message: `no step "${id}"`, code: "plan.invalid_reference" })),
    );
  }
}
