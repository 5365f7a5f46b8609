import { EngineError } from "../lib/errors.ts";
import {
  ACTION_TRAITS,
  Action,
  McpServer,
  type InlineModel,
  Model,
  Prompt,
  type InlineAction,
  type InlineUndoAction,
  type LlmTool,
  type Undo,
} from "../schemas/actions.ts";
import { parseReference, type JsonSchema } from "../schemas/common.ts";
import { Task, Workflow, type DefinitionKind, type InlineTask } from "../schemas/definitions.ts";
import type {
  ResolvedAction,
  ResolvedLlmTool,
  ResolvedTask,
  ResolvedUndo,
  ResolvedUndoAction,
  RunSnapshot,
} from "../schemas/resolved.ts";
import { isToolName, TOOL_NAMES } from "../schemas/tools.ts";
import { Limit, type LimitUse, type ResolvedLimitUse } from "../schemas/limits.ts";
import {
  AGENT_FIELDS,
  reservedOutputKeys,
  toolActionRefusal,
  toolEntry,
  toolInputSchema,
  toolName,
  type ToolEntry,
  type ToolTarget,
} from "./llm-tools.ts";

/** A stored definition: its version and body. */
export interface StoredDefinition {
  version: number;
  definition: unknown;
}

/** Reads stored definitions: one version, or the latest when `version` is undefined. */
export interface DefinitionReader {
  read(kind: DefinitionKind, id: string, version: number | undefined): StoredDefinition | undefined;
}

/**
 * Resolves every reference of a workflow, once, into the snapshot a run keeps
 * to its end: `"id"` becomes the latest version now, `"id@3"` that version,
 * and inline definitions are taken as written (version 0). Child workflows
 * are pinned to their current version.
 */
export function resolveRunSnapshot(
  reader: DefinitionReader,
  workflowId: string,
  version: number | undefined,
): RunSnapshot {
  const stored = reader.read("workflows", workflowId, version);
  if (!stored) {
    const what = version === undefined ? `workflow "${workflowId}"` : `version ${version} of workflow "${workflowId}"`;
    throw EngineError.terminal("workflow.not_found", `${what} is not registered`);
  }
  return resolveWorkflowSnapshot(reader, Workflow.parse(stored.definition), stored.version);
}

/**
 * The snapshot of a workflow given as a definition (a registered one's, or
 * one an agent plan compiled to: plans/compile.ts), as `version`.
 */
export function resolveWorkflowSnapshot(reader: DefinitionReader, workflow: Workflow, version: number): RunSnapshot {
  const snapshot: RunSnapshot = {
    workflow: { id: workflow.id, version, definition: workflow },
    tasks: {},
    workflows: {},
  };
  if (workflow.limits !== undefined) {
    snapshot.limits = resolveLimits(reader, workflow.limits);
  }
  for (const [nodeId, node] of Object.entries(workflow.nodes)) {
    if (node.task !== undefined) {
      snapshot.tasks[nodeId] = resolveTask(reader, node.task, `${workflow.id}/${nodeId}`);
    } else if (typeof node.workflow === "string") {
      snapshot.workflows[nodeId] = pin(reader, "workflows", node.workflow);
    } else if (node.workflow !== undefined) {
      // Every workflow the node may choose is pinned now; the choice is made when the node starts.
      const allowed = node.workflow.allowed.map((ref) => pin(reader, "workflows", ref));
      snapshot.choices = { ...snapshot.choices, [nodeId]: allowed };
    }
  }
  return snapshot;
}

function resolveTask(reader: DefinitionReader, task: string | InlineTask, inlineId: string): ResolvedTask {
  const { id, version, definition } =
    typeof task === "string"
      ? load(reader, "tasks", task, Task)
      : { id: task.id ?? inlineId, version: 0, definition: task };
  return {
    id,
    version,
    ...(definition.input_schema === undefined ? {} : { input_schema: definition.input_schema }),
    ...(definition.output_schema === undefined ? {} : { output_schema: definition.output_schema }),
    steps: definition.steps.map((step) => ({
      ...step,
      action: resolveAction(reader, step.action, `${id}/${step.ref}`),
    })),
  };
}

/**
 * An action as the run will call it: kinds that refer to other definitions
 * (`workflow`, `llm`, `mcp`) get them pinned or frozen in; the rest are as written.
 */
function resolveAction(reader: DefinitionReader, action: string | InlineAction, inlineId: string): ResolvedAction {
  const { id, version, definition } =
    typeof action === "string"
      ? load(reader, "actions", action, Action)
      : { id: action.id ?? inlineId, version: 0, definition: action };
  const { undo, limits, ...rest } = definition;
  const resolved =
    rest.kind === "llm"
      ? resolveAgent(reader, { id, version, definition: rest })
      : resolveKind(reader, { id, version, definition: rest });
  const limited = limits === undefined ? resolved : { ...resolved, limits: resolveLimits(reader, limits) };
  return undo === undefined ? limited : { ...limited, undo: resolveUndo(reader, undo, `${id}/undo`) };
}

/** An action's `undo` with its action resolved (a referenced action's own `undo` is not followed). */
function resolveUndo(reader: DefinitionReader, undo: Undo, inlineId: string): ResolvedUndo {
  const { id, version, definition } =
    typeof undo.action === "string"
      ? load(reader, "actions", undo.action, Action)
      : { id: undo.action.id ?? inlineId, version: 0, definition: undo.action };
  const { undo: _ignored, ...action } = definition as InlineAction;
  // A compensation runs each undo as one call, after the run ended: nothing in it may wait, nor loop over tools.
  const refusal =
    ACTION_TRAITS[action.kind].suspends || action.risk === "high"
      ? `a ${action.risk === "high" ? "high-risk" : action.kind} action`
      : action.kind === "llm" && action.implementation.tools !== undefined
        ? "an llm action with tools"
        : undefined;
  if (refusal !== undefined) {
    throw EngineError.terminal(
      "definition.invalid_undo",
      `the undo action ${id}@${version} is ${refusal}: an undo runs as one call, with nothing to wait for`,
    );
  }
  return { ...undo, action: resolveKind(reader, { id, version, definition: action }) };
}

/** An action resolved as one call ({@link resolveImplementation}), with its `limits` frozen in. */
function resolveKind(
  reader: DefinitionReader,
  { id, version, definition }: { id: string; version: number; definition: InlineUndoAction },
): ResolvedUndoAction {
  const { limits, ...rest } = definition;
  const resolved = resolveImplementation(reader, { id, version, definition: rest });
  return limits === undefined ? resolved : { ...resolved, limits: resolveLimits(reader, limits) };
}

/**
 * The kinds that refer to other definitions get them pinned or frozen in; the
 * rest are as written. An `llm` action is resolved as one call here (its tools,
 * if any, by `resolveAgent`).
 */
function resolveImplementation(
  reader: DefinitionReader,
  // Its limits are resolved by the caller (`resolveKind`): written here, they would pass through unresolved.
  { id, version, definition }: { id: string; version: number; definition: InlineUndoAction & { limits?: never } },
): ResolvedUndoAction {
  switch (definition.kind) {
    case "workflow": {
      // The child runs the version that is current now, whatever is registered later
      // (every allowed one, for a child chosen when the step starts).
      const pinned = (ref: string) => {
        const child = pin(reader, "workflows", ref);
        return `${child.id}@${child.version}`;
      };
      const workflow = definition.implementation.workflow;
      return {
        ...definition,
        id,
        version,
        implementation: {
          ...definition.implementation,
          workflow:
            typeof workflow === "string" ? pinned(workflow) : { ...workflow, allowed: workflow.allowed.map(pinned) },
        },
      };
    }
    case "llm":
      return { ...definition, id, version, implementation: resolveLlm(reader, definition.implementation, id) };
    case "mcp":
      return {
        ...definition,
        id,
        version,
        implementation: {
          ...definition.implementation,
          server: loadResolved(reader, "mcp_servers", definition.implementation.server, McpServer),
        },
      };
    default:
      // Every other kind runs as written. This line is type-checked against the resolved union
      // (schemas/resolved.ts): a kind whose resolved implementation differs from its written one
      // fails to compile here until it has a case of its own.
      return { ...definition, id, version };
  }
}

type LlmAction = Extract<InlineAction, { kind: "llm" }>;
type ResolvedLlm = Extract<ResolvedAction, { kind: "llm" }>;

/**
 * An `llm` implementation's call with its prompt and models frozen in (the
 * executor never looks them up); inline ones get ids under the action's.
 * Only the call: the fields of an `llm` with tools are `resolveAgent`'s.
 */
function resolveLlm(
  reader: DefinitionReader,
  implementation: LlmAction["implementation"],
  id: string,
): Extract<ResolvedUndoAction, { kind: "llm" }>["implementation"] {
  const {
    prompt,
    model,
    fallback_models: fallbacks,
    tools: _tools,
    max_turns: _maxTurns,
    budget: _budget,
    parallel_tool_calls: _parallel,
    ...rest
  } = implementation;
  const resolveModel = (ref: string | InlineModel, inlineId: string) => {
    const { limits, ...model } =
      typeof ref === "string"
        ? loadResolved(reader, "models", ref, Model)
        : { ...ref, id: ref.id ?? inlineId, version: 0 };
    return limits === undefined ? model : { ...model, limits: resolveLimits(reader, limits) };
  };
  return {
    ...rest,
    prompt:
      typeof prompt === "string"
        ? loadResolved(reader, "prompts", prompt, Prompt)
        : { ...prompt, id: prompt.id ?? `${id}/prompt`, version: 0 },
    model: resolveModel(model, `${id}/model`),
    ...(fallbacks === undefined
      ? {}
      : { fallback_models: fallbacks.map((ref, i) => resolveModel(ref, `${id}/fallback_models/${i}`)) }),
  };
}

/**
 * An `llm` action as a step calls it: its call, and with `tools` each tool
 * resolved (docs/definitions.md, "Agents") and the loop's limits as written.
 * Registration refuses what is refused here; this refuses it again because a
 * prompt, model or action referenced as `"id"` may have changed since.
 */
function resolveAgent(
  reader: DefinitionReader,
  { id, version, definition }: { id: string; version: number; definition: Omit<LlmAction, "undo" | "limits"> },
): ResolvedLlm {
  const written = definition.implementation;
  const call = resolveLlm(reader, written, id);
  if (written.tools === undefined) {
    const stray = AGENT_FIELDS.filter((field) => written[field] !== undefined);
    if (stray.length > 0) {
      throw invalidTool(id, `${stray.join(", ")} apply only to an llm action with tools, and it has none`);
    }
    return { ...definition, id, version, implementation: call };
  }
  const reserved = reservedOutputKeys(call.prompt.produces);
  if (reserved.length > 0) {
    const prompt = `${call.prompt.id}@${call.prompt.version}`;
    throw invalidTool(id, `its prompt ${prompt} declares ${reserved.join(", ")} in "produces", which the loop reports`);
  }
  const unpriced = [call.model, ...(call.fallback_models ?? [])].filter((model) => model.pricing === undefined);
  if (written.budget?.cost_usd !== undefined && unpriced.length > 0) {
    const names = unpriced.map((model) => `${model.id}@${model.version}`).join(", ");
    throw invalidTool(id, `budget.cost_usd needs every model priced, and ${names} has no "pricing"`);
  }
  const { max_turns: maxTurns, budget, parallel_tool_calls: parallel } = written;
  return {
    ...definition,
    id,
    version,
    implementation: {
      ...call,
      tools: resolveTools(reader, written.tools, id),
      ...(maxTurns === undefined ? {} : { max_turns: maxTurns }),
      ...(budget === undefined ? {} : { budget }),
      ...(parallel === undefined ? {} : { parallel_tool_calls: parallel }),
    },
  };
}

/** Each tool of an `llm` action as the model is offered it and the run calls it; two may not share a name. */
function resolveTools(reader: DefinitionReader, tools: LlmTool[], llmId: string): ResolvedLlmTool[] {
  const resolved = tools.map((tool, i) => {
    const entry = toolEntry(tool);
    const named = toolName(entry);
    if ("problem" in named) {
      throw invalidTool(llmId, `tools.${i}: ${named.problem}`);
    }
    return resolveTool(reader, entry, named.name, `${llmId}/tools/${named.name}`, `${llmId}: tools.${i}`);
  });
  resolved.forEach((tool, i) => {
    const first = resolved.findIndex((other) => other.name === tool.name);
    if (first !== i) {
      throw invalidTool(llmId, `tools.${first} and tools.${i} are both named "${tool.name}"`);
    }
  });
  return resolved;
}

/**
 * One tool: its action (a registered one loaded as a step's, with its undo; an
 * `mcp:` or `tool:` one as an inline action of that kind, `inlineId`, version
 * 0) and its input schema (`toolInputSchemaOf`).
 */
function resolveTool(
  reader: DefinitionReader,
  entry: ToolEntry,
  name: string,
  inlineId: string,
  where: string,
): ResolvedLlmTool {
  const { target } = entry;
  if (entry.pin !== undefined && target.kind !== "mcp") {
    throw invalidTool(where, 'a "pin" applies only to an "mcp:<server>/<tool>" tool');
  }
  const { id, version, definition } =
    target.kind === "action"
      ? load(reader, "actions", target.ref, Action)
      : {
          id: target.kind === "inline" ? (target.action.id ?? inlineId) : inlineId,
          version: 0,
          definition: inlineToolAction(target, entry.pin, where),
        };
  const refusal = toolActionRefusal(definition);
  if (refusal !== undefined) {
    throw invalidTool(where, `${id}@${version}: ${refusal}`);
  }
  const { undo, ...rest } = definition;
  const action = resolveKind(reader, { id, version, definition: rest });
  const description = entry.description ?? definition.description;
  return {
    name,
    ...(description === undefined ? {} : { description }),
    input_schema: toolInputSchemaOf(definition),
    action: undo === undefined ? action : { ...action, undo: resolveUndo(reader, undo, `${id}/undo`) },
  };
}

/**
 * The input schema the model is offered for a tool: the action's `requires`;
 * without one, a standard library tool's own schema, null for an MCP tool
 * (its server gives it when the loop starts), else `{ "type": "object" }`.
 */
function toolInputSchemaOf(action: InlineAction): JsonSchema | null {
  if (action.requires !== undefined) {
    return action.requires;
  }
  if (action.kind === "tool" && isToolName(action.implementation.tool)) {
    return toolInputSchema(action.implementation.tool);
  }
  return action.kind === "mcp" ? null : { type: "object" };
}

/** The action an `mcp:`, `tool:` or inline tool stands for. */
function inlineToolAction(
  target: Exclude<ToolTarget, { kind: "action" }>,
  pin: string | undefined,
  where: string,
): InlineAction {
  switch (target.kind) {
    case "mcp":
      return {
        kind: "mcp",
        implementation: { server: target.server, tool: target.tool, ...(pin === undefined ? {} : { pin }) },
      };
    case "std":
      if (!isToolName(target.tool)) {
        throw invalidTool(where, `"${target.tool}" is not a standard library tool (known: ${TOOL_NAMES.join(", ")})`);
      }
      return { kind: "tool", implementation: { tool: target.tool } };
    case "inline":
      return target.action;
  }
}

function invalidTool(where: string, problem: string): EngineError {
  return EngineError.terminal("definition.invalid_tool", `the llm action ${where}: ${problem}`);
}

/** Each limit a workflow, action or model names, frozen at its current (or pinned) version. */
function resolveLimits(reader: DefinitionReader, uses: readonly LimitUse[]): ResolvedLimitUse[] {
  return uses.map(({ limit, key }) => {
    const { description: _description, ...config } = loadResolved(reader, "limits", limit, Limit);
    return { limit: config, ...(key === undefined ? {} : { key }) };
  });
}

/** A referenced definition with its resolved id and version. */
function loadResolved<T extends object>(
  reader: DefinitionReader,
  kind: DefinitionKind,
  ref: string,
  schema: { parse(value: unknown): T },
): T & { id: string; version: number } {
  const { id, version, definition } = load(reader, kind, ref, schema);
  return { ...definition, id, version };
}

function pin(reader: DefinitionReader, kind: DefinitionKind, ref: string): { id: string; version: number } {
  const parsed = parseReference(ref);
  const stored = parsed ? reader.read(kind, parsed.id, parsed.version) : undefined;
  if (!parsed || !stored) {
    throw EngineError.terminal(
      `${kind === "workflows" ? "workflow" : "definition"}.not_found`,
      `"${ref}" (${kind}) is not registered`,
    );
  }
  return { id: parsed.id, version: stored.version };
}

function load<T>(
  reader: DefinitionReader,
  kind: DefinitionKind,
  ref: string,
  schema: { parse(value: unknown): T },
): { id: string; version: number; definition: T } {
  const { id, version } = pin(reader, kind, ref);
  const stored = reader.read(kind, id, version);
  if (!stored) {
    throw EngineError.terminal("definition.not_found", `"${ref}" (${kind}) is not registered`);
  }
  return { id, version, definition: schema.parse(stored.definition) };
}
