import type { Json } from "../schemas/common.ts";
import type { ChildPlan, ResourceHandle, TaskResume } from "../schemas/payload.ts";
import type { InvocationRecord, Suspension } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * What every kind of wait shares (coordinator/wait-kinds.ts has the kinds):
 * where a wait is, how it is found again, and how the step it holds goes on.
 * Nothing is held open meanwhile: the invocation is `suspended` with the task
 * context, and the task is dispatched again, with a resume, when the answer,
 * the child's result or the time arrives.
 */

/** The deepest a chain of sub-workflows may go: a run started by a client is depth 0. */
export const MAX_WORKFLOW_DEPTH = 8;
/** Child runs started per wake, at most: each start is two calls (catalog, child). */
export const MAX_CHILD_STARTS_PER_EVENT = 5;

/**
 * Where a wait is: stable for one attempt of one step (or node) of one
 * iteration of one run (and one redrive of it), so a child start is
 * idempotent and a new attempt, iteration or redrive gets a new child or
 * timer. Never what the wait waits for (a timer is not keyed by its
 * duration). The iteration is a last segment from a `repeat` node's second
 * iteration on (the first keeps the key runs had before iterations were part of it).
 */
export function waitKey(draft: Draft, nodeId: string, invocation: InvocationRecord, stepRef: string | null): string {
  const { run_id, redrives } = draft.record;
  const iteration = draft.node(nodeId).iterations;
  const base = `${run_id}/${redrives}/${nodeId}/${invocation.index}/${invocation.attempts}/${stepRef ?? "-"}`;
  return iteration > 1 ? `${base}/${iteration}` : base;
}

/** The invocation suspended on a wait that `predicate` picks, if one still waits for it. */
export function findWaiter(
  draft: Draft,
  predicate: (waitingFor: Suspension["waiting_for"]) => boolean,
): { nodeId: string; invocation: InvocationRecord; suspension: Suspension } | undefined {
  for (const nodeId of draft.activeNodeIds()) {
    for (const invocation of draft.node(nodeId).invocations) {
      const suspension = invocation.suspension;
      if (invocation.status === "suspended" && suspension !== undefined && predicate(suspension.waiting_for)) {
        return { nodeId, invocation, suspension };
      }
    }
  }
  return undefined;
}

/** Continues a suspended invocation: it goes back to `pending` and its next dispatch carries the resume. */
export function resumeInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  resume: Omit<TaskResume, "step_index" | "context">,
): void {
  const suspension = invocation.suspension;
  if (!suspension?.context) {
    return;
  }
  draft.setInvocation(nodeId, invocation.index, {
    status: "pending",
    suspension: undefined,
    resume: { ...resume, step_index: suspension.step_index, context: suspension.context },
  });
}

/**
 * Starts a child run (the Durable Object resolves and creates it), unless the
 * depth limit forbids it. A `plan` step's child carries its plan and this
 * run's allowlist, which every `tool:` and `mcp:` grant of the plan must be on.
 */
export function requestChild(
  draft: Draft,
  key: string,
  workflow: string,
  input: Json,
  resources?: Record<string, ResourceHandle>,
  plan?: ChildPlan,
): void {
  draft.commands.push({
    kind: "start_child",
    key,
    workflow,
    input,
    depth: draft.record.depth + 1,
    ...(resources ? { resources } : {}),
    ...(plan ? { plan: { ...plan, parent_tools: draft.workflow.tools ?? [] } } : {}),
    ...(draft.record.priority === undefined ? {} : { priority: draft.record.priority }),
  });
}
