import { newRunId, runIdFor, sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/index.ts";
import { unwrap } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { preparePlan, toPlanRecord, type PlanStart } from "../plans/index.ts";
import type { RunView } from "../schemas/api.ts";
import { byOf, type Principal } from "../schemas/auth.ts";
import { ApproveBody, PlanRequest, type StartPlanResponse } from "../schemas/plans.ts";
import { catalog, controlRun, coordinator, createRun } from "./service.ts";

/**
 * `POST /v1/plans`: an agent plan in either notation, compiled into a
 * workflow snapshot (plans/) and run as a run like any other; `preview`
 * answers the compiled graph and creates nothing.
 */
export async function startPlan(
  env: Env,
  body: unknown,
  principal: Principal,
  waitMs = 0,
): Promise<{ created: boolean; run: StartPlanResponse }> {
  const request = parseOrThrow(PlanRequest, body, "plan.invalid_request", "the plan request");
  const mode = request.mode ?? "auto";
  const start: PlanStart = {
    given: request.plan,
    tools: request.tools,
    input: request.input ?? {},
    approvedSteps: request.approved_steps ?? [],
  };
  const prepared = await preparePlan(start, {
    resolvePlan: (workflow) => catalog(env).resolvePlan(workflow),
    preapprovalAllowed: env.PLAN_PREAPPROVAL === "allow",
  });
  const { snapshot, graph } = prepared;
  const workflow = { id: snapshot.workflow.id, version: snapshot.workflow.version };
  if (mode === "preview") {
    return { created: false, run: { run_id: null, status: "preview", workflow, graph } };
  }
  const plan = await toPlanRecord(start, prepared);
  const requestHash = await sha256Hex(canonicalJson({ plan: request, mode }));
  const runId = request.idempotency_key === undefined ? newRunId() : await runIdFor(`plan\n${request.idempotency_key}`);
  const outcome = await createRun(
    env,
    {
      run_id: runId,
      snapshot,
      input: start.input,
      mode,
      idempotency_key: request.idempotency_key ?? null,
      request_hash: requestHash,
      created_by: principal.created_by,
      by: byOf(principal),
      trigger: { kind: "plan" },
      plan,
      ...(request.priority === undefined ? {} : { priority: request.priority }),
    },
    waitMs,
  );
  return { created: outcome.created, run: { ...outcome.run, graph } };
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
export async function approveRun(env: Env, runId: string, body: unknown, principal: Principal): Promise<RunView> {
  const by = byOf(principal);
  // Without `approved_steps` the body is ignored, as it always was: the plain control.
  if (typeof body !== "object" || body === null || !("approved_steps" in body)) {
    return controlRun(env, runId, "approve", undefined, by);
  }
  const request = parseOrThrow(ApproveBody, body, "run.invalid_request", "the approve request");
  const view = unwrap(await coordinator(env, runId).get());
  if (view.status === "drafting") {
    await controlRun(env, runId, "approve", undefined, by);
  }
  const steps = request.approved_steps ?? [];
  if (steps.length === 0) {
    return unwrap(await coordinator(env, runId).get());
  }
  // A standing approval: the open gates now, and each matching gate that opens later.
  return unwrap(await coordinator(env, runId).approveSteps({ steps, responder: principal.created_by, by }));
}
