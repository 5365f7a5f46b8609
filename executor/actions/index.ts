import { contextAction } from "./context.ts";
import { httpAction } from "./http.ts";
import { handledByTaskRunner, notImplemented } from "./not-implemented.ts";
import type { ActionRegistry } from "./types.ts";

export type { ActionContext, ActionHandler, ActionRegistry } from "./types.ts";

/** Every action kind and the handler that runs it. */
export const ACTION_HANDLERS = {
  context: contextAction,
  http: httpAction,
  llm: notImplemented("llm"),
  mcp: notImplemented("mcp"),
  tool: notImplemented("tool"),
  shell: notImplemented("shell"),
  workflow: handledByTaskRunner("workflow"),
  human: handledByTaskRunner("human"),
  vector: notImplemented("vector"),
  metric: notImplemented("metric"),
} satisfies ActionRegistry;
