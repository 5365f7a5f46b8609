import { EngineError, type ErrorDetail } from "../lib/errors.ts";
import { validateJson } from "../lib/json-schema.ts";
import { issuesToDetails } from "../lib/validation.ts";
import type { Json } from "../schemas/common.ts";
import type { PlanGraph, PlannedStep } from "../schemas/plans.ts";
import type { ResolvedAction, RunSnapshot } from "../schemas/resolved.ts";
import { TOOL_SCHEMAS, isToolName } from "../schemas/tools.ts";
import type { CompiledPlan } from "./compile.ts";
import { planExecution } from "./compile-parts.ts";
import { layersOf } from "./graph.ts";
import type { NormalPlan, NormalStep } from "./normalize.ts";

const RISK_ORDER = { low: 0, medium: 1, high: 2 } as const;
type Risk = keyof typeof RISK_ORDER;

/** How a request may approve high-risk steps ahead (docs/plans.md "Approvals"). */
export interface ApprovalPolicy {
  /** The deployment setting `PLAN_PREAPPROVAL` (`"allow"`); off by default. */
  preapprovalAllowed: boolean;
  approvedSteps: readonly string[];
}

/**
 * Completes a plan's resolved snapshot with what only resolution tells: an
 * `http` action's data is its response body; a step's risk is its action's
 * or the step's own, whichever is higher, and a high-risk step the request
 * approved runs without its gate; literal args are checked against the
 * tool's input schema now (`plan.args_invalid`, 400). Returns the graph a
 * preview shows and the journal's first entry records.
 */
export function finishPlan(
  snapshot: RunSnapshot,
  plan: NormalPlan,
  compiled: CompiledPlan,
  policy: ApprovalPolicy,
): PlanGraph {
  const problems: ErrorDetail[] = [];
  const planned = plan.steps.map((step) =>
    finishStep(snapshot, step, plan, policy, (found) => problems.push(...found), compiled),
  );
  if (problems.length > 0) {
    throw EngineError.terminal(
      "plan.args_invalid",
      `${problems.length} arg(s) do not match their tool's input schema`,
      problems,
    );
  }
  return {
    notation: plan.notation,
    layers: layersOf(
      Object.entries(snapshot.workflow.definition.nodes).map(([id, node]) => ({
        id,
        dependsOn: node.depends_on ?? [],
      })),
    ),
    steps: planned,
    expansions: compiled.expansions,
    high_risk: planned.filter((step) => step.risk === "high").map((step) => step.id),
    inputs_gate: compiled.asked.length > 0,
    fallback: plan.fallback,
    config: plan.config,
    approvals: { preapproval_allowed: policy.preapprovalAllowed, approved_steps: [...policy.approvedSteps] },
  };
}

/** One step: its action as the run will call it (risk, approval, execution, data), and how a preview shows it. */
function finishStep(
  snapshot: RunSnapshot,
  step: NormalStep,
  plan: NormalPlan,
  policy: ApprovalPolicy,
  report: (problems: ErrorDetail[]) => void,
  compiled: CompiledPlan,
): PlannedStep {
  const task = snapshot.tasks[step.id];
  const call = task?.steps[0];
  if (task === undefined || call === undefined) {
    throw EngineError.terminal("plan.internal", `step ${step.id} did not compile to a task`);
  }
  const risk = higher(call.action.risk ?? "low", step.risk ?? "low");
  const approved = risk === "high" && policy.approvedSteps.includes(step.id);
  const action: ResolvedAction = {
    ...call.action,
    risk: approved ? "low" : risk,
    // A registered action keeps what it says of its calls; the notation's config fills in the rest.
    execution: { ...planExecution(plan.config), ...call.action.execution },
  };
  task.steps[0] = { ...call, action, output_mapping: { "output.data": action.kind === "http" ? "$.body" : "$" } };
  report(checkLiteralArgs(step, action, compiled));
  const node = snapshot.workflow.definition.nodes[step.id];
  return {
    id: step.id,
    tool: step.tool,
    depends_on: node?.depends_on ?? [],
    risk,
    expands_over: node?.foreach?.items ?? null,
    args: (node?.input_mapping ?? {}) as Record<string, Json>,
  };
}

function higher(a: Risk, b: Risk): Risk {
  return RISK_ORDER[a] >= RISK_ORDER[b] ? a : b;
}

/**
 * A step whose args are all literals is checked now, against the action's
 * `requires` or the standard tool's input schema. Args with references are
 * checked on the call, once they resolved (`action.invalid_input` /
 * `tool.invalid_input`, reported as `plan.args_invalid` in the results).
 */
function checkLiteralArgs(step: NormalStep, action: ResolvedAction, compiled: CompiledPlan): ErrorDetail[] {
  const args: Record<string, Json> = {};
  for (const [field, arg] of Object.entries(step.args)) {
    if (arg.kind !== "literal") {
      return [];
    }
    args[field] = arg.value;
  }
  if (compiled.expansions.some((expansion) => expansion.step === step.id)) {
    return [];
  }
  const problems = validateJson(action.requires, args, step.path);
  if (action.kind === "tool" && isToolName(action.implementation.tool)) {
    const parsed = TOOL_SCHEMAS[action.implementation.tool].input.safeParse(args);
    if (!parsed.success) {
      problems.push(...issuesToDetails(parsed.error.issues, step.path));
    }
  }
  return problems.map((problem) => ({ ...problem, code: "plan.args_invalid" }));
}
