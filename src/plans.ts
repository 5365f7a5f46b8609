import { EngineError } from "../lib/errors.ts";
import { newRunId, runIdFor, sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import { unwrap, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { validateJson } from "../lib/json-schema.ts";
import { checkGraph, compilePlan, finishPlan, normalizePlan, type NormalPlan } from "../plans/index.ts";
import type { RunView } from "../schemas/api.ts";
import type { Json } from "../schemas/common.ts";
import { ApproveBody, PlanRequest, type PlanOrigin, type StartPlanResponse } from "../schemas/plans.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import { catalog, controlRun, coordinator, createRun } from "./service.ts";

/**
 * `POST /v1/plans`: an agent plan in either notation, compiled into a
 * workflow snapshot (plans/) and run as a run like any other; `preview`
 * answers the compiled graph and creates nothing.
 */
export async function startPlan(
  env: Env,
  body: unknown,
  createdBy: string,
  waitMs = 0,
): Promise<{ created: boolean; run: StartPlanResponse }> {
  const request = parseOrThrow(PlanRequest, body, "plan.invalid_request", "the plan request");
  const mode = request.mode ?? "auto";
  const input = request.input ?? {};
  const plan = normalizePlan(request.plan);
  checkGraph(plan);
  checkInput(plan, input);
  const approvedSteps = request.approved_steps ?? [];
  const preapprovalAllowed = env.PLAN_PREAPPROVAL === "allow";
  checkApprovedSteps(plan, approvedSteps, preapprovalAllowed);
  const compiled = compilePlan(plan, request.tools, input);
  const snapshot = atStepPaths(plan, await catalog(env).resolvePlan(compiled.workflow));
  const graph = finishPlan(snapshot, plan, compiled, { preapprovalAllowed, approvedSteps });
  const workflow = { id: snapshot.workflow.id, version: snapshot.workflow.version };
  if (mode === "preview") {
    return { created: false, run: { run_id: null, status: "preview", workflow, graph } };
  }
  const origin = {
    notation: plan.notation,
    given: request.plan,
    tools: request.tools,
    graph,
    workflow_sha256: await sha256Hex(canonicalJson(snapshot.workflow.definition)),
  };
  checkEntrySize(origin, input);
  const requestHash = await sha256Hex(canonicalJson({ plan: request, mode }));
  const runId = request.idempotency_key === undefined ? newRunId() : await runIdFor(`plan\n${request.idempotency_key}`);
  const outcome = await createRun(
    env,
    {
      run_id: runId,
      snapshot,
      input,
      mode,
      idempotency_key: request.idempotency_key ?? null,
      request_hash: requestHash,
      created_by: createdBy,
      plan: { origin, steps: plan.steps.map((step) => ({ id: step.id, tool: step.tool })) },
    },
    waitMs,
  );
  return { created: outcome.created, run: { ...outcome.run, graph } };
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
 * 403 `plan.preapproval_disabled` otherwise), and only for steps of the plan.
 */
function checkApprovedSteps(plan: NormalPlan, approved: readonly string[], allowed: boolean): void {
  if (approved.length === 0) {
    return;
  }
  if (!allowed) {
    throw EngineError.terminal(
      "plan.preapproval_disabled",
      'this deployment does not let a request pre-approve high-risk steps (PLAN_PREAPPROVAL is not "allow"); approve them at their gates',
    );
  }
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

/**
 * `POST /v1/runs/{id}/approve` with `approved_steps`: starts a run waiting
 * in drafting (as a plain approve does), then approves those steps for the
 * rest of the run (coordinator/standing-approvals.ts): every matching
 * approval gate, open now or opening later, is granted, an expanded step's
 * children included (`step-02` matches the gates of `step-02-0`,
 * `step-02-1`, …; `step-02-1` only that child's). Without `approved_steps`
 * it is the plain control.
 */
export async function approveRun(env: Env, runId: string, body: unknown, responder: string): Promise<RunView> {
  // Without `approved_steps` the body is ignored, as it always was: the plain control.
  if (typeof body !== "object" || body === null || !("approved_steps" in body)) {
    return controlRun(env, runId, "approve");
  }
  const request = parseOrThrow(ApproveBody, body, "run.invalid_request", "the approve request");
  const view = unwrap(await coordinator(env, runId).get());
  if (view.status === "drafting") {
    await controlRun(env, runId, "approve");
  }
  const steps = request.approved_steps ?? [];
  if (steps.length === 0) {
    return unwrap(await coordinator(env, runId).get());
  }
  // A standing approval: the open gates now, and each matching gate that opens later.
  return unwrap(await coordinator(env, runId).approveSteps({ steps, responder }));
}
