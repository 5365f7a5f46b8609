import { EngineError, type ErrorDetail } from "../lib/errors.ts";
import { issuesToDetails } from "../lib/validation.ts";
import { type Json, type JsonSchema, RESERVED_KEYS } from "../schemas/common.ts";
import { DependencyPlan, type DependencyPlanConfig, PLAN_CONFIG_DEFAULTS, PlaceholderPlan } from "../schemas/plans.ts";
import { parseDependencyArg, parsePlaceholderArg, refsOf, type ArgValue } from "./refs.ts";

/** The node of the input gate a plan with missing inputs starts with; no step may take its name. */
export const INPUTS_NODE = "inputs";

export type Notation = "dependency" | "placeholder";

/** One plan step in the shape both notations share. */
export interface NormalStep {
  /** The step id, also its node id: `step-<position>` in the dependency notation. */
  id: string;
  /** Where the step is in the plan (its ToolResult's position). */
  index: number;
  tool: string;
  args: Record<string, ArgValue>;
  /** Step ids it waits for: as written, plus (placeholder notation) every step its args reference. */
  dependsOn: string[];
  risk: "low" | "medium" | "high" | undefined;
  /** Where its args are in the request, for problems' paths (`plan.steps.1.params`). */
  path: string;
}

export interface NormalPlan {
  notation: Notation;
  steps: NormalStep[];
  config: Required<DependencyPlanConfig>;
  inputs: JsonSchema | undefined;
  fallback: string | null;
}

/** Which notation a plan is written in: step ids and `args` are the placeholder notation's marks. */
export function detectNotation(plan: Record<string, Json>): Notation {
  const steps = Array.isArray(plan.steps) ? plan.steps : [];
  const placeholder = steps.some(
    (step) =>
      step !== null &&
      typeof step === "object" &&
      !Array.isArray(step) &&
      ("id" in step || "args" in step || (Array.isArray(step.depends_on) && typeof step.depends_on[0] === "string")),
  );
  return placeholder || "fallback" in plan ? "placeholder" : "dependency";
}

/** Parses a plan in either notation into the shared shape; a 400 `plan.invalid` lists every problem with its path. */
export function normalizePlan(plan: Record<string, Json>): NormalPlan {
  const notation = detectNotation(plan);
  const problems: ErrorDetail[] = [];
  const normal = notation === "dependency" ? fromDependency(plan, problems) : fromPlaceholder(plan, problems);
  problems.push(...(normal === undefined ? [] : reservedNames(normal)));
  if (normal === undefined || problems.length > 0) {
    throw EngineError.terminal(
      "plan.invalid",
      `the plan (${notation} notation) is invalid: ${problems.length} problem(s)`,
      problems,
    );
  }
  return normal;
}

function fromDependency(raw: Record<string, Json>, problems: ErrorDetail[]): NormalPlan | undefined {
  const parsed = DependencyPlan.safeParse(raw);
  if (!parsed.success) {
    problems.push(...issuesToDetails(parsed.error.issues, "plan"));
    return undefined;
  }
  const { steps, config, inputs } = parsed.data;
  const normal = steps.map((step, index): NormalStep => {
    const path = `plan.steps.${index}`;
    for (const dep of step.depends_on ?? []) {
      if (dep >= steps.length) {
        problems.push({
          path: `${path}.depends_on`,
          message: `there is no step ${dep}`,
          code: "plan.invalid_reference",
        });
      }
    }
    return {
      id: `step-${index}`,
      index,
      tool: step.tool,
      args: Object.fromEntries(
        Object.entries(step.params ?? {}).map(([key, value]) => [key, parseDependencyArg(value)]),
      ),
      dependsOn: (step.depends_on ?? []).map((dep) => `step-${dep}`),
      risk: step.risk,
      path: `${path}.params`,
    };
  });
  // `${step[N]…}` names a position: the compiler works with ids.
  for (const ref of normal.flatMap((step) => Object.values(step.args).flatMap(refsOf))) {
    if (ref.source.kind === "step") {
      ref.source = { kind: "step", step: `step-${ref.source.step}` };
    }
  }
  return { notation: "dependency", steps: normal, config: withDefaults(config), inputs, fallback: null };
}

function fromPlaceholder(raw: Record<string, Json>, problems: ErrorDetail[]): NormalPlan | undefined {
  const parsed = PlaceholderPlan.safeParse(raw);
  if (!parsed.success) {
    problems.push(...issuesToDetails(parsed.error.issues, "plan"));
    return undefined;
  }
  const { steps, config, inputs, fallback } = parsed.data;
  const ids = new Set<string>();
  steps.forEach((step, index) => {
    if (ids.has(step.id) || step.id === INPUTS_NODE) {
      const message = step.id === INPUTS_NODE ? `"${INPUTS_NODE}" is reserved` : `"${step.id}" is used twice`;
      problems.push({ path: `plan.steps.${index}.id`, message, code: "plan.invalid_step_id" });
    }
    ids.add(step.id);
  });
  if (fallback !== undefined && !ids.has(fallback)) {
    problems.push({ path: "plan.fallback", message: `no step "${fallback}"`, code: "plan.invalid_reference" });
  }
  const normal = steps.map((step, index): NormalStep => {
    const args = Object.fromEntries(
      Object.entries(step.args ?? {}).map(([key, value]) => [key, parsePlaceholderArg(value, (id) => ids.has(id))]),
    );
    const path = `plan.steps.${index}`;
    (step.depends_on ?? []).forEach((dep, i) => {
      if (!ids.has(dep)) {
        problems.push({ path: `${path}.depends_on.${i}`, message: `no step "${dep}"`, code: "plan.invalid_reference" });
      }
    });
    return {
      id: step.id,
      index,
      tool: step.tool,
      args,
      dependsOn: [...new Set([...(step.depends_on ?? []), ...referencedSteps(args, ids)])],
      risk: step.risk,
      path: `${path}.args`,
    };
  });
  return { notation: "placeholder", steps: normal, config: withDefaults(config), inputs, fallback: fallback ?? null };
}

/**
 * The steps a placeholder step's args reference, which it depends on. A
 * reference to an expanded step's child (`$step-02-1.x`) is rewritten to the
 * base step with the child's index (`$step-02[1].x`).
 */
function referencedSteps(args: Record<string, ArgValue>, ids: ReadonlySet<string>): string[] {
  const referenced: string[] = [];
  for (const ref of Object.values(args).flatMap(refsOf)) {
    if (ref.source.kind !== "step") {
      continue;
    }
    const id = String(ref.source.step);
    const child = /^(.*)-(\d+)$/.exec(id);
    if (!ids.has(id) && child !== null && ids.has(child[1] ?? "")) {
      ref.source = { kind: "step", step: child[1] ?? "" };
      ref.segments = [{ kind: "index", index: Number(child[2]) }, ...ref.segments];
    }
    referenced.push(String(ref.source.step));
  }
  return referenced;
}

/** Arg names and step ids become mapping fields and target paths: JavaScript's reserved names cannot be either. */
function reservedNames(plan: NormalPlan): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  const report = (path: string, name: string) =>
    problems.push({
      path,
      message: `"${name}" is a reserved name (__proto__, constructor, prototype)`,
      code: "plan.reserved_key",
    });
  for (const step of plan.steps) {
    if (RESERVED_KEYS.has(step.id)) {
      report(`plan.steps.${step.index}.id`, step.id);
    }
    Object.keys(step.args)
      .filter((name) => RESERVED_KEYS.has(name))
      .forEach((name) => report(`${step.path}.${name}`, name));
  }
  return problems;
}

function withDefaults(config: DependencyPlanConfig | undefined): Required<DependencyPlanConfig> {
  return { ...PLAN_CONFIG_DEFAULTS, ...config };
}
