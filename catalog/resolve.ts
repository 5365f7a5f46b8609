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
  type Undo,
} from "../schemas/actions.ts";
import { parseReference } from "../schemas/common.ts";
import { Task, Workflow, type DefinitionKind, type InlineTask } from "../schemas/definitions.ts";
import type { ResolvedAction, ResolvedUndo, ResolvedTask, RunSnapshot } from "../schemas/resolved.ts";

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
  const { undo, ...rest } = definition;
  const resolved = resolveKind(reader, { id, version, definition: rest });
  return undo === undefined ? resolved : { ...resolved, undo: resolveUndo(reader, undo, `${id}/undo`) };
}

/** An action's `undo` with its action resolved (a referenced action's own `undo` is not followed). */
function resolveUndo(reader: DefinitionReader, undo: Undo, inlineId: string): ResolvedUndo {
  const { id, version, definition } =
    typeof undo.action === "string"
      ? load(reader, "actions", undo.action, Action)
      : { id: undo.action.id ?? inlineId, version: 0, definition: undo.action };
  const { undo: _ignored, ...action } = definition as InlineUndoAction & { undo?: unknown };
  // A compensation runs each undo as one call, after the run ended: nothing in it may wait.
  if (ACTION_TRAITS[action.kind].suspends || action.risk === "high") {
    throw EngineError.terminal(
      "definition.invalid_undo",
      `the undo action ${id}@${version} is a ${action.risk === "high" ? "high-risk" : action.kind} action: an undo runs as one call, with nothing to wait for`,
    );
  }
  return {
    ...undo,
    action: resolveKind(reader, { id, version, definition: action }) as ResolvedUndo["action"],
  };
}

/** The kinds that refer to other definitions get them pinned or frozen in; the rest are as written. */
function resolveKind(
  reader: DefinitionReader,
  { id, version, definition }: { id: string; version: number; definition: InlineUndoAction },
): ResolvedAction {
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

/**
 * An `llm` implementation with its prompt and models frozen in (the executor
 * never looks them up); inline ones get ids under the action's.
 */
function resolveLlm(
  reader: DefinitionReader,
  implementation: Extract<InlineUndoAction, { kind: "llm" }>["implementation"],
  id: string,
): Extract<ResolvedAction, { kind: "llm" }>["implementation"] {
  const { prompt, model, fallback_models: fallbacks, ...rest } = implementation;
  const resolveModel = (ref: string | InlineModel, inlineId: string) =>
    typeof ref === "string"
      ? loadResolved(reader, "models", ref, Model)
      : { ...ref, id: ref.id ?? inlineId, version: 0 };
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
