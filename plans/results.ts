import type { Json, JsonObject } from "../schemas/common.ts";
import type { Failure } from "../schemas/errors.ts";
import type { ToolResult } from "../schemas/plans.ts";
import type { NodeRecord, PlanStepRecord } from "../schemas/run.ts";

/**
 * The engine's codes a plan step fails with, as the plan notations name them:
 * a placeholder that selected nothing, and args a tool refused.
 */
const PLAN_CODES: Readonly<Record<string, string>> = {
  "mapping.unresolved": "plan.args_unresolved",
  "action.invalid_input": "plan.args_invalid",
  "tool.invalid_input": "plan.args_invalid",
};

/**
 * The dependency notation's result: one ToolResult per plan step, in plan
 * order, from the run's nodes and context (`state.<step>` holds a step's
 * data). `executionTime` is the node's start to its end (retries and
 * waits included), `timestamp` its start, `retries` its calls beyond the
 * first. A step that has not run yet, or was skipped, is `success: false`.
 */
export function toPlanResults(
  steps: readonly PlanStepRecord[],
  nodes: Readonly<Record<string, NodeRecord>>,
  state: JsonObject,
): ToolResult[] {
  return steps.map((step) => {
    const node = nodes[step.id];
    const success = node?.status === "completed";
    const data: Json = success && Object.hasOwn(state, step.id) ? (state[step.id] ?? null) : null;
    const error = node === undefined ? undefined : errorOf(node);
    return {
      step: step.id,
      success,
      tool: step.tool,
      data,
      ...(error === undefined ? {} : { error }),
      metadata: {
        executionTime: node?.started_at != null && node.finished_at !== null ? node.finished_at - node.started_at : 0,
        timestamp: node?.started_at != null ? new Date(node.started_at).toISOString() : null,
        retries: node === undefined ? 0 : retriesOf(node),
      },
    };
  });
}

/**
 * Calls beyond the first, over every invocation (an expanded step's children)
 * and every attempt of each: the node's own `attempts` counts one per child,
 * so an expanded step's children are not retries.
 */
function retriesOf(node: NodeRecord): number {
  return node.invocations.reduce(
    (sum, invocation) =>
      sum + Math.max(0, (invocation.steps?.[0]?.attempts ?? 1) - 1) + Math.max(0, invocation.attempts - 1),
    0,
  );
}

function errorOf(node: NodeRecord): ToolResult["error"] {
  if (node.error !== null) {
    return toPlanError(node.error);
  }
  if (node.status === "skipped" || node.status === "cancelled") {
    return { code: `plan.step_${node.status}`, message: `the step was ${node.status}` };
  }
  return undefined;
}

function toPlanError(error: Failure): { code: string; message: string } {
  return { code: PLAN_CODES[error.code] ?? error.code, message: error.message };
}
