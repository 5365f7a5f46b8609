import { EngineError, type ErrorDetail } from "../lib/errors.ts";
import type { NormalPlan, NormalStep } from "./normalize.ts";
import { refsOf } from "./refs.ts";

/**
 * The plan's dependency graph: every dependency names a step, there is no
 * cycle, and every reference names a step the referencing step depends on
 * (directly or through others), so its data exists when the step starts.
 * Problems are one 400 `plan.invalid` with the path of each.
 */
export function checkGraph(plan: NormalPlan): void {
  const problems: ErrorDetail[] = [];
  const byId = new Map(plan.steps.map((step) => [step.id, step]));
  for (const step of plan.steps) {
    step.dependsOn.forEach((dep) => {
      if (!byId.has(dep)) {
        problems.push({ path: step.path, message: `references unknown step "${dep}"`, code: "plan.invalid_reference" });
      }
    });
  }
  if (problems.length === 0) {
    problems.push(...findCycles(plan.steps, byId));
  }
  if (problems.length === 0) {
    problems.push(...nonDependencies(plan.steps, byId));
  }
  if (problems.length > 0) {
    throw EngineError.terminal("plan.invalid", `the plan's graph is invalid: ${problems.length} problem(s)`, problems);
  }
}

/** Each cycle once, named by its steps (`step-0 → step-1 → step-0`), at the path of the step that closes it. */
function findCycles(steps: readonly NormalStep[], byId: ReadonlyMap<string, NormalStep>): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  const state = new Map<string, "open" | "done">();
  const visit = (step: NormalStep, trail: string[]): void => {
    state.set(step.id, "open");
    for (const dep of step.dependsOn) {
      const next = byId.get(dep);
      if (next === undefined || state.get(dep) === "done") {
        continue;
      }
      if (state.get(dep) === "open") {
        const cycle = [...trail.slice(trail.indexOf(dep)), step.id, dep].join(" → ");
        problems.push({
          path: `plan.steps.${step.index}.depends_on`,
          message: `circular dependency: ${cycle}`,
          code: "plan.cycle",
        });
        continue;
      }
      visit(next, [...trail, step.id]);
    }
    state.set(step.id, "done");
  };
  for (const step of steps) {
    if (!state.has(step.id)) {
      visit(step, []);
    }
  }
  return problems;
}

/** Every step a step waits for, directly or not. */
export function ancestorsOf(step: NormalStep, byId: ReadonlyMap<string, NormalStep>): Set<string> {
  const seen = new Set<string>();
  const stack = [...step.dependsOn];
  while (stack.length > 0) {
    const id = stack.pop() as string;
    if (!seen.has(id)) {
      seen.add(id);
      stack.push(...(byId.get(id)?.dependsOn ?? []));
    }
  }
  return seen;
}

function nonDependencies(steps: readonly NormalStep[], byId: ReadonlyMap<string, NormalStep>): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  for (const step of steps) {
    const ancestors = ancestorsOf(step, byId);
    for (const [field, arg] of Object.entries(step.args)) {
      if (arg.kind === "unsupported") {
        problems.push({
          path: `${step.path}.${field}`,
          message: `${arg.reason}: a reference is a whole arg value or part of a string arg`,
          code: "plan.unsupported_reference",
        });
      }
      for (const ref of refsOf(arg)) {
        if (ref.source.kind === "step" && !ancestors.has(String(ref.source.step))) {
          problems.push({
            path: `${step.path}.${field}`,
            message: `references ${String(ref.source.step)}, which is not a dependency of ${step.id} (add it to depends_on)`,
            code: "plan.invalid_reference",
          });
        }
      }
    }
  }
  return problems;
}

/** Steps in dependency layers: every step's dependencies are in earlier layers. */
export function layersOf(steps: readonly { id: string; dependsOn: readonly string[] }[]): string[][] {
  const byId = new Map(steps.map((step) => [step.id, step]));
  const layerOf = new Map<string, number>();
  const depth = (id: string): number => {
    const known = layerOf.get(id);
    if (known !== undefined) {
      return known;
    }
    layerOf.set(id, 0); // Cycles were refused; this only guards the recursion.
    const layer = Math.max(-1, ...(byId.get(id)?.dependsOn ?? []).map(depth)) + 1;
    layerOf.set(id, layer);
    return layer;
  };
  const layers: string[][] = [];
  for (const step of steps) {
    (layers[depth(step.id)] ??= []).push(step.id);
  }
  return layers;
}
