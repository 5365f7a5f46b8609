import { EngineError } from "../lib/errors.ts";
import type { Json } from "../schemas/common.ts";
import type { Node, Workflow } from "../schemas/definitions.ts";
import {
  actionOf,
  checkAllowlist,
  stepTimeoutMs,
  inputsNode,
  missingInputs,
  routeFallback,
  topological,
} from "./compile-parts.ts";
import { INPUTS_NODE, type NormalPlan, type NormalStep } from "./normalize.ts";
import { literalSource, quoteName, refsOf, stepDataPath, toJsonPath, type Reference, type Segment } from "./refs.ts";

/** The workflow id every plan run carries (`GET /v1/runs?workflow=plan` lists plan runs). */
export const PLAN_WORKFLOW_ID = "plan";

export interface Expansion {
  step: string;
  over: string;
  implicit: boolean;
}

/** A plan compiled into a workflow definition, with what the preview shows of each step. */
export interface CompiledPlan {
  workflow: Workflow;
  expansions: Expansion[];
  /** Input names asked through the input gate (absent from the request's `input`). */
  asked: string[];
}

/** Where a step's data is: the node's state, or one item of the node's foreach. */
interface Scope {
  askedInputs: ReadonlySet<string>;
  /** Steps that run once per item (their state is an array of item data). */
  expanded: Set<string>;
}

/**
 * Compiles a checked plan into a workflow: one node per step, each running an
 * inline task of one step that calls the named tool; references become
 * JSONPath input mappings over `state.<step>`; an expanding reference (or an
 * implicit fan-out) becomes the node's `foreach`; the notation's config
 * becomes max_parallel, timeouts, retries and fail_fast.
 */
export function compilePlan(plan: NormalPlan, tools: readonly string[], input: Record<string, Json>): CompiledPlan {
  checkAllowlist(plan.steps, tools);
  const asked = missingInputs(plan.inputs, input);
  const scope: Scope = { askedInputs: new Set(asked), expanded: new Set() };
  const byId = new Map(plan.steps.map((step) => [step.id, step]));
  const nodes: Record<string, Node> = {};
  const expansions: Expansion[] = [];
  if (asked.length > 0) {
    nodes[INPUTS_NODE] = inputsNode(plan.inputs, asked);
  }
  for (const step of topological(plan.steps, byId)) {
    const { node, expansion } = compileStep(plan, step, scope);
    nodes[step.id] = asked.length > 0 ? { ...node, depends_on: [...(node.depends_on ?? []), INPUTS_NODE] } : node;
    if (expansion) {
      expansions.push(expansion);
      scope.expanded.add(step.id);
    }
  }
  if (plan.fallback !== null) {
    routeFallback(nodes, plan.fallback, plan.steps, byId);
  }
  const workflow: Workflow = {
    id: PLAN_WORKFLOW_ID,
    description: `an agent plan (${plan.notation} notation)`,
    max_parallel: plan.config.maxParallelExecutions,
    fail_fast: plan.config.failFast,
    tools: tools.filter((grant) => grant.startsWith("tool:") || grant.startsWith("mcp:")),
    // Plan order, so the run view lists nodes as the plan lists steps.
    nodes: Object.fromEntries(
      [...(asked.length > 0 ? [INPUTS_NODE] : []), ...plan.steps.map((step) => step.id)].map((id) => [
        id,
        nodes[id] as Node,
      ]),
    ),
  };
  return { workflow, expansions, asked };
}

function compileStep(plan: NormalPlan, step: NormalStep, scope: Scope): { node: Node; expansion?: Expansion } {
  const { config } = plan;
  const expansion = plan.notation === "placeholder" ? expansionOf(step, scope) : undefined;
  const inputMapping: Record<string, Json> = {};
  for (const [field, arg] of Object.entries(step.args)) {
    if (arg.kind === "literal") {
      inputMapping[field] = literalSource(arg.value);
    } else if (arg.kind === "ref") {
      inputMapping[field] = sourceOf(arg.ref, scope, expansion);
    } else if (arg.kind === "template") {
      // Text with references: each reference resolves as a whole one would, then all join into a string.
      inputMapping[field] = {
        concat: arg.parts.map((part) =>
          part.kind === "text" ? literalSource(part.text) : sourceOf(part.ref, scope, expansion),
        ),
      };
    }
  }
  const node: Node = {
    description: step.tool,
    task: { steps: [{ ref: "call", action: actionOf(step.tool, config), output_mapping: { "output.data": "$" } }] },
    input_mapping: inputMapping,
    output_mapping: { [`state.${step.id}`]: "$.data" },
    timeout_ms: stepTimeoutMs(config),
    // A plan with a fallback must go on past the failure the fallback answers.
    on_failure: config.failFast && plan.fallback === null ? "fail" : "continue",
    ...(step.dependsOn.length > 0 ? { depends_on: [...step.dependsOn] } : {}),
    ...(expansion
      ? { foreach: { items: expansion.over, max_parallel: Math.min(config.maxParallelExecutions, 1000) } }
      : {}),
  };
  return expansion ? { node, expansion } : { node };
}

/**
 * The items a placeholder step runs once for: an explicit `[*]` in its args
 * (`$step-01.items[*].id`: one call per item, the arg taking the item's
 * `id`), or, without one, a base step it references that itself ran per
 * item (implicit fan-out: one call per child of that step). A step may
 * expand over one list only.
 */
function expansionOf(step: NormalStep, scope: Scope): Expansion | undefined {
  const overs = new Set<string>();
  let implicit = false;
  for (const ref of Object.values(step.args).flatMap(refsOf)) {
    if (ref.source.kind !== "step") {
      continue;
    }
    const base = String(ref.source.step);
    const star = ref.segments.findIndex((segment) => segment.kind === "wildcard");
    if (star >= 0) {
      overs.add(toJsonPath(stepDataPath(base), ref.segments.slice(0, star + 1)));
    } else if (scope.expanded.has(base) && ref.segments[0]?.kind !== "index") {
      overs.add(`${stepDataPath(base)}[*]`);
      implicit = true;
    }
  }
  if (overs.size > 1) {
    throw EngineError.terminal("plan.invalid", `step ${step.id} expands over more than one list`, [
      { path: step.path, message: `expands over ${[...overs].join(" and ")}`, code: "plan.ambiguous_expansion" },
    ]);
  }
  const [over] = overs;
  return over === undefined ? undefined : { step: step.id, over, implicit: implicit && overs.size === 1 };
}

/** A reference as a mapping source: a JSONPath over the run context (or over the item, when the step expands). */
function sourceOf(ref: Reference, scope: Scope, expansion: Expansion | undefined): string {
  if (ref.source.kind === "input") {
    const [first, ...rest] = ref.segments;
    const asked = first?.kind === "name" && scope.askedInputs.has(first.name);
    return toJsonPath(asked ? `$.state[${quoteName(INPUTS_NODE)}]` : "$.input", [...(first ? [first] : []), ...rest]);
  }
  const base = stepDataPath(String(ref.source.step));
  if (expansion !== undefined) {
    const star = ref.segments.findIndex((segment) => segment.kind === "wildcard");
    if (star >= 0 && toJsonPath(base, ref.segments.slice(0, star + 1)) === expansion.over) {
      return toJsonPath("$.item", ref.segments.slice(star + 1));
    }
    if (expansion.implicit && expansion.over === `${base}[*]`) {
      return toJsonPath("$.item", ref.segments);
    }
  }
  return toJsonPath(base, ref.segments satisfies Segment[]);
}
