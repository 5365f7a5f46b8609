import { contextAction } from "./context.ts";
import { httpAction } from "./http.ts";
import { llmAction } from "./llm.ts";
import { mcpAction } from "./mcp.ts";
import { metricAction } from "./metric.ts";
import { handledByTaskRunner } from "./not-implemented.ts";
import { shellAction } from "./shell.ts";
import { toolAction } from "./tool.ts";
import type { ActionRegistry } from "./types.ts";
import { vectorAction } from "./vector.ts";

export type { ActionContext, ActionHandler, ActionRegistry } from "./types.ts";

/** Every action kind and the handler that runs it. */
export const ACTION_HANDLERS = {
  context: contextAction,
  http: httpAction,
  llm: llmAction,
  mcp: mcpAction,
  tool: toolAction,
  shell: shellAction,
  workflow: handledByTaskRunner("workflow"),
  human: handledByTaskRunner("human"),
  vector: vectorAction,
  metric: metricAction,
} satisfies ActionRegistry;
