/** Agent plans (docs/plans.md): the two notations, parsed, checked and compiled into a workflow snapshot. */
export { PLAN_WORKFLOW_ID, compilePlan, type CompiledPlan, type Expansion } from "./compile.ts";
export { finishPlan, type ApprovalPolicy } from "./finish.ts";
export { checkGraph, layersOf } from "./graph.ts";
export {
  detectNotation,
  normalizePlan,
  INPUTS_NODE,
  type NormalPlan,
  type NormalStep,
  type Notation,
} from "./normalize.ts";
export { toPlanResults } from "./results.ts";
export {
  checkGrantsWithin,
  checkPlan,
  preparePlan,
  toPlanRecord,
  type CheckedPlan,
  type PlanStart,
  type PlanStartDeps,
  type PreparedPlan,
} from "./start.ts";
