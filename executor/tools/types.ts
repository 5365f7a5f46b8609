import type { ToolInput, ToolName, ToolOutput } from "../../schemas/tools.ts";
import type { ActionContext } from "../actions/types.ts";
import type { SandboxClient } from "../sandbox-client.ts";

/** What a tool may use: the action's context, the run's container and the artifact bucket, each on demand. */
export interface ToolContext {
  action: ActionContext;
  /** The container bound to the action's `resource_name`; throws `container.not_bound` when there is none. */
  sandbox(): SandboxClient;
  /** The artifact bucket; throws `tool.unavailable` when the Worker has no ARTIFACTS binding. */
  artifacts(): R2Bucket;
  /** The bound for a command the tool runs when its input gives none. */
  defaultTimeoutMs: number;
}

/** One standard library tool: its input and output are parsed by the schemas in schemas/tools.ts. */
export interface Tool<N extends ToolName> {
  run(input: ToolInput<N>, context: ToolContext): Promise<ToolOutput<N>>;
}

/** Exactly one implementation per tool name, so a new schema breaks the build until implemented. */
export type ToolRegistry = { [N in ToolName]: Tool<N> };
