import { EngineError, type ErrorDetail } from "../lib/errors.ts";
import type { InlineAction } from "../schemas/actions.ts";
import { type Json, type JsonSchema, parseReference } from "../schemas/common.ts";
import type { Node } from "../schemas/definitions.ts";
import { ancestorsOf } from "./graph.ts";
import type { NormalPlan, NormalStep } from "./normalize.ts";

/**
 * What `fallback` waits for: a step whose placeholders selected nothing fails
 * its node with `mapping.unresolved` (the notation's `plan.args_unresolved`),
 * recorded in `state._errors` because plan steps continue past failures.
 */
export const UNRESOLVED_WHEN = "has(state._errors) && state._errors.exists(e, e.error.code == 'mapping.unresolved')";

/**
 * Every step's tool must be on the plan's allowlist, as a workflow's `tools`
 * must list what it calls: a registered action as `id` (any version) or
 * `id@n`, `tool:<name>`, `mcp:<server>/<tool>` or `mcp:<server>/*`.
 * Fails closed, before anything runs (and the executor checks `tool:` and
 * `mcp:` grants again on every call).
 */
export function checkAllowlist(steps: readonly NormalStep[], tools: readonly string[]): void {
  const granted = new Set(tools);
  const problems: ErrorDetail[] = [];
  for (const step of steps) {
    const { tool } = step;
    const mcp = /^mcp:([^/]+)\/(.+)$/.exec(tool);
    const reference = parseReference(tool);
    const allowed =
      granted.has(tool) ||
      (mcp !== null && granted.has(`mcp:${mcp[1] ?? ""}/*`)) ||
      (reference !== undefined && reference.version !== undefined && granted.has(reference.id));
    const known = mcp !== null || /^tool:[a-z][a-z0-9_]*$/.test(tool) || reference !== undefined;
    if (!known) {
      problems.push({
        path: `plan.steps.${step.index}.tool`,
        message: `"${tool}" names no action ("id" or "id@n"), standard tool ("tool:<name>") or MCP tool ("mcp:<server>/<tool>")`,
        code: "plan.unknown_tool",
      });
    } else if (!allowed) {
      problems.push({
        path: `plan.steps.${step.index}.tool`,
        message: `"${tool}" is not on the plan's tools allowlist`,
        code: "plan.tool_not_allowed",
      });
    }
  }
  if (problems.length > 0) {
    const code = problems.some((problem) => problem.code === "plan.tool_not_allowed")
      ? "plan.tool_not_allowed"
      : "plan.invalid";
    throw EngineError.terminal(code, `${problems.length} step(s) call what the plan may not call`, problems);
  }
}

/**
 * The notation's config as an action's `execution`: `toolTimeout` bounds each
 * call; `maxRetries` retries of an infrastructure failure (network, timeout,
 * 429, 5xx), the first after `retryDelay`, doubling, without jitter.
 */
export function planExecution(config: NormalPlan["config"]): {
  timeout_ms: number;
  retry_policy: { max_attempts: number; initial_delay_ms: number; backoff_coefficient: number; jitter: boolean };
} {
  return {
    timeout_ms: config.toolTimeout,
    retry_policy: {
      max_attempts: config.maxRetries + 1,
      initial_delay_ms: config.retryDelay,
      backoff_coefficient: 2,
      jitter: false,
    },
  };
}

/** The most a delay between retries waits (the retry policy's default `max_delay_ms`). */
const MAX_RETRY_DELAY_MS = 60_000;

/**
 * A step's task bound: every attempt's timeout and every delay between them,
 * plus 5 s for the task around the call (at most a day, the engine's bound).
 */
export function stepTimeoutMs(config: NormalPlan["config"]): number {
  let delays = 0;
  for (let retry = 0; retry < config.maxRetries; retry += 1) {
    delays += Math.min(config.retryDelay * 2 ** retry, MAX_RETRY_DELAY_MS);
  }
  return Math.min((config.maxRetries + 1) * config.toolTimeout + delays + 5000, 86_400_000);
}

/** A step's tool as a step action: a registered action by reference, or an inline `tool` / `mcp` action. */
export function actionOf(tool: string, config: NormalPlan["config"]): string | InlineAction {
  const execution = planExecution(config);
  if (tool.startsWith("tool:")) {
    return { kind: "tool", implementation: { tool: tool.slice("tool:".length) }, execution };
  }
  const mcp = /^mcp:([^/]+)\/(.+)$/.exec(tool);
  if (mcp !== null) {
    return { kind: "mcp", implementation: { server: mcp[1] ?? "", tool: mcp[2] ?? "" }, execution };
  }
  return tool;
}

/** The required inputs the request's `input` lacks: they are asked through the input gate. */
export function missingInputs(schema: JsonSchema | undefined, input: Record<string, Json>): string[] {
  if (schema === undefined || typeof schema === "boolean" || !Array.isArray(schema.required)) {
    return [];
  }
  return schema.required.filter((name): name is string => typeof name === "string" && !Object.hasOwn(input, name));
}

/** The input gate: a human step asking for the missing inputs, its answer kept at `state.inputs`. */
export function inputsNode(schema: JsonSchema | undefined, asked: readonly string[]): Node {
  const properties =
    schema !== undefined && typeof schema !== "boolean" && isObject(schema.properties) ? schema.properties : {};
  const inputSchema: Record<string, Json> = {
    type: "object",
    properties: Object.fromEntries(asked.map((name) => [name, properties[name] ?? {}])),
    required: [...asked],
  };
  return {
    description: "the inputs the plan needs before any step runs",
    task: {
      steps: [
        {
          ref: "ask",
          action: {
            kind: "human",
            implementation: {
              prompt_template: `The plan needs these inputs before it runs: ${asked.join(", ")}`,
              input_schema: inputSchema,
            },
          },
          output_mapping: { "output.answer": "$.response" },
        },
      ],
    },
    input_mapping: {},
    output_mapping: { "state.inputs": "$.answer" },
  };
}

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/**
 * The fallback step runs only when a step's placeholders did not resolve: it
 * waits for every step that does not itself wait for it, and its `when`
 * looks for `mapping.unresolved` among the errors the run went on past.
 */
export function routeFallback(
  nodes: Record<string, Node>,
  fallback: string,
  steps: readonly NormalStep[],
  byId: ReadonlyMap<string, NormalStep>,
): void {
  const node = nodes[fallback];
  if (node === undefined) {
    return;
  }
  const others = steps
    .filter((step) => step.id !== fallback && !ancestorsOf(step, byId).has(fallback))
    .map((step) => step.id);
  nodes[fallback] = {
    ...node,
    depends_on: [...new Set([...(node.depends_on ?? []), ...others])],
    when: UNRESOLVED_WHEN,
  };
}

/** Steps with each one after the steps it depends on (the graph was checked for cycles). */
export function topological(steps: readonly NormalStep[], byId: ReadonlyMap<string, NormalStep>): NormalStep[] {
  const ordered: NormalStep[] = [];
  const seen = new Set<string>();
  const visit = (step: NormalStep): void => {
    if (seen.has(step.id)) {
      return;
    }
    seen.add(step.id);
    step.dependsOn.map((id) => byId.get(id)).forEach((dep) => dep && visit(dep));
    ordered.push(step);
  };
  steps.forEach(visit);
  return ordered;
}
