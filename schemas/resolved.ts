import { z } from "zod";
import { InputMapping, JsonSchema, RetryPolicy } from "./common.ts";
import {
  ACTION_IMPLEMENTATIONS,
  actionUnion,
  LlmToolName,
  MAX_FALLBACK_MODELS,
  MAX_LLM_TOOLS,
  McpServer,
  Model,
  Prompt,
} from "./actions.ts";
import { DefinitionKind, Step, Workflow } from "./definitions.ts";
import { ResolvedLimitUses } from "./limits.ts";

/**
 * The resolved stage of definitions: what a run snapshots when it starts.
 * Every reference is replaced by the definition it named at that moment, with
 * its version, so nothing registered later can change a running run.
 * Inline definitions get a synthetic id (`<parent>/<ref>`) and version 0.
 */
const resolvedIdentity = { id: z.string().min(1), version: z.number().int().min(0) };

/** A prompt as a run uses it: the definition itself (inline ones get `<action id>/prompt`, version 0). */
export const ResolvedPrompt = Prompt.extend(resolvedIdentity);
export type ResolvedPrompt = z.infer<typeof ResolvedPrompt>;

/** A model as a run uses it. `api_key` stays a `$env:NAME` reference: secrets resolve at call time only. */
export const ResolvedModel = Model.extend({ ...resolvedIdentity, limits: ResolvedLimitUses.optional() });
export type ResolvedModel = z.infer<typeof ResolvedModel>;

/** An MCP server as a run uses it. Credential headers stay `$env:` references. */
export const ResolvedMcpServer = McpServer.extend(resolvedIdentity);
export type ResolvedMcpServer = z.infer<typeof ResolvedMcpServer>;

/** Implementations once resolved: `llm` and `mcp` carry the definitions they referenced (an `llm` its fallback models too). */
const RESOLVED_BASE_IMPLEMENTATIONS = {
  ...ACTION_IMPLEMENTATIONS,
  llm: ACTION_IMPLEMENTATIONS.llm
    .omit({ tools: true, max_turns: true, budget: true, parallel_tool_calls: true })
    .extend({
      prompt: ResolvedPrompt,
      model: ResolvedModel,
      fallback_models: z.array(ResolvedModel).min(1).max(MAX_FALLBACK_MODELS).optional(),
    }),
  mcp: ACTION_IMPLEMENTATIONS.mcp.extend({ server: ResolvedMcpServer }),
};

/** An undo's action as a run calls it (it has no undo of its own). */
export const ResolvedUndoAction = actionUnion(
  { ...resolvedIdentity, limits: ResolvedLimitUses.optional() },
  RESOLVED_BASE_IMPLEMENTATIONS,
);
export type ResolvedUndoAction = z.infer<typeof ResolvedUndoAction>;

/** An action's `undo` with its action resolved. */
export const ResolvedUndo = z.strictObject({
  action: ResolvedUndoAction,
  input_mapping: InputMapping.optional(),
  retry: RetryPolicy.optional(),
});
export type ResolvedUndo = z.infer<typeof ResolvedUndo>;

/** A tool's action as a run calls it: one call, with its undo. */
export const ResolvedToolAction = actionUnion(
  { ...resolvedIdentity, undo: ResolvedUndo.optional(), limits: ResolvedLimitUses.optional() },
  RESOLVED_BASE_IMPLEMENTATIONS,
);
export type ResolvedToolAction = z.infer<typeof ResolvedToolAction>;

/**
 * A tool as the model is offered it and the coordinator calls it. `input_schema`
 * is the action's `requires` (`{ "type": "object" }` without one), or null for
 * an MCP tool whose schema the server gives when the loop starts.
 */
export const ResolvedLlmTool = z.strictObject({
  name: LlmToolName,
  description: z.string().optional(),
  input_schema: JsonSchema.nullable(),
  action: ResolvedToolAction,
});
export type ResolvedLlmTool = z.infer<typeof ResolvedLlmTool>;

const RESOLVED_IMPLEMENTATIONS = {
  ...RESOLVED_BASE_IMPLEMENTATIONS,
  llm: RESOLVED_BASE_IMPLEMENTATIONS.llm.extend({
    tools: z.array(ResolvedLlmTool).min(1).max(MAX_LLM_TOOLS).optional(),
    max_turns: ACTION_IMPLEMENTATIONS.llm.shape.max_turns,
    budget: ACTION_IMPLEMENTATIONS.llm.shape.budget,
    parallel_tool_calls: ACTION_IMPLEMENTATIONS.llm.shape.parallel_tool_calls,
  }),
};

export const ResolvedAction = actionUnion(
  { ...resolvedIdentity, undo: ResolvedUndo.optional(), limits: ResolvedLimitUses.optional() },
  RESOLVED_IMPLEMENTATIONS,
);
export type ResolvedAction = z.infer<typeof ResolvedAction>;

export const ResolvedStep = Step.extend({ action: ResolvedAction });
export type ResolvedStep = z.infer<typeof ResolvedStep>;

export const ResolvedTask = z.strictObject({
  id: z.string().min(1),
  version: z.number().int().min(0),
  input_schema: JsonSchema.optional(),
  output_schema: JsonSchema.optional(),
  steps: z.array(ResolvedStep).min(1),
});
export type ResolvedTask = z.infer<typeof ResolvedTask>;

/** A pinned reference to a workflow: children run the version resolved when the parent started. */
export const PinnedWorkflow = z.strictObject({ id: z.string().min(1), version: z.number().int().min(1) });
export type PinnedWorkflow = z.infer<typeof PinnedWorkflow>;

/** Everything a run needs, frozen at start. */
export const RunSnapshot = z.strictObject({
  workflow: PinnedWorkflow.extend({ definition: Workflow }),
  /** The task each task node runs, by node id. */
  tasks: z.record(z.string(), ResolvedTask),
  /** The child workflow each workflow node runs, by node id. */
  workflows: z.record(z.string(), PinnedWorkflow),
  /** For a workflow node that chooses its child at run time (`{ from, allowed }`): each allowed workflow, pinned. */
  choices: z.record(z.string(), z.array(PinnedWorkflow)).optional(),
  /** The workflow's `limits`, resolved: the run holds a slot of each from its start to its end. */
  limits: ResolvedLimitUses.optional(),
});
export type RunSnapshot = z.infer<typeof RunSnapshot>;

/** A definition a resolution read as `"id"` (the latest), with the version it found. */
export const DefinitionPointer = z.strictObject({
  kind: DefinitionKind,
  id: z.string(),
  version: z.number().int().min(1),
});
export type DefinitionPointer = z.infer<typeof DefinitionPointer>;

/**
 * A resolved workflow version, as the catalog returns it and the snapshot
 * caches keep it: the snapshot, and every `"id"` reference it read with the
 * version found. The snapshot is still current while each of those is still
 * the latest (catalog/snapshots.ts).
 */
export const ResolvedRun = z.strictObject({ snapshot: RunSnapshot, floating: z.array(DefinitionPointer) });
export type ResolvedRun = z.infer<typeof ResolvedRun>;
