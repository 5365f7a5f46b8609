import type { ActionKind } from "../../schemas/actions.ts";
import type { Json } from "../../schemas/common.ts";
import type { TaskContext } from "../../schemas/payload.ts";
import type { ResolvedAction } from "../../schemas/resolved.ts";
import { contextAction } from "./context.ts";
import { eventAction } from "./event.ts";
import { httpAction } from "./http.ts";
import { humanAction } from "./human.ts";
import { llmAction } from "./llm.ts";
import { mcpAction } from "./mcp.ts";
import { metricAction } from "./metric.ts";
import { planAction } from "./plan.ts";
import { shellAction } from "./shell.ts";
import { sleepAction } from "./sleep.ts";
import { toolAction } from "./tool.ts";
import type { ActionRegistry, ActionWait, ResolvedActionOf } from "./types.ts";
import { vectorAction } from "./vector.ts";
import { workflowAction } from "./workflow.ts";

export type { ActionContext, ActionHandler, ActionRegistry, ActionWait, ResolvedActionOf } from "./types.ts";

/**
 * Every action kind and the handler that runs it. Typed as the registry (not
 * `satisfies` it) so that indexing it with a generic kind gives that kind's
 * handler: `runHandler` calls it without a cast.
 */
export const ACTION_HANDLERS: ActionRegistry = {
  context: contextAction,
  http: httpAction,
  llm: llmAction,
  mcp: mcpAction,
  tool: toolAction,
  shell: shellAction,
  workflow: workflowAction,
  human: humanAction,
  vector: vectorAction,
  metric: metricAction,
  sleep: sleepAction,
  event: eventAction,
  plan: planAction,
};

/**
 * What a step of a suspending kind (its handler has `suspend`: `human`,
 * `workflow`, `sleep`, `event`, `plan`) waits for before it can finish; undefined for a kind
 * that runs (and for a sleep whose time has already come).
 */
export function suspensionFor(action: ResolvedAction, input: Json, context: TaskContext): ActionWait | undefined {
  return suspendWith(action.kind, action, input, context);
}

function suspendWith<K extends ActionKind>(
  kind: K,
  action: ResolvedActionOf<K>,
  input: Json,
  context: TaskContext,
): ActionWait | undefined {
  return ACTION_HANDLERS[kind].suspend?.(action, input, context);
}
