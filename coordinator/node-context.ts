import { applyOutputMapping, type Writable } from "../lib/expr/mapping.ts";
import { type NodeRunVariables, withRunVariables } from "../lib/expr/run-scope.ts";
import type { Json, Node as NodeDefinition } from "../schemas/index.ts";
import type { Draft } from "./draft.ts";

/** What a node's expressions read: the run context, and the `run` variable of the node and item. */

export function contextDocument(draft: Draft): Record<string, unknown> {
  const { input, state, output } = draft.record.context;
  return { input, state, output };
}

/**
 * Runs `work` with `run` bound for a node's expressions (`when`, mappings,
 * `repeat.until`; lib/expr/run-scope.ts): `item` is the foreach index or null,
 * `iteration` the `repeat` iteration they belong to.
 */
export function inNodeScope<T>(
  draft: Draft,
  at: { node: string; item: number | null; iteration: number },
  work: () => T,
): T {
  const { run_id, workflow } = draft.record;
  const run: NodeRunVariables = {
    id: run_id,
    workflow: { id: workflow.id, version: workflow.version },
    node: at.node,
    item: at.item,
    iteration: Math.max(1, at.iteration),
  };
  return withRunVariables(run, work);
}

/**
 * Writes a node's task output into the run context: by its output mapping, or
 * at `state.<node id>`. A foreach node's output is the array of its item
 * outputs in item order (null for skipped items), and each mapping target
 * receives the array of what its source selects from each item.
 */
export function writeNodeOutput(draft: Draft, nodeId: string, definition: NodeDefinition, output: Json): void {
  const context = draft.record.context;
  const target: Writable = { state: context.state, output: context.output };
  const iteration = draft.node(nodeId).iterations;
  let next: Writable;
  if (!definition.output_mapping) {
    next = { ...target, state: { ...target.state, [nodeId]: output } };
  } else if (definition.foreach && Array.isArray(output)) {
    next = target;
    for (const [path, source] of Object.entries(definition.output_mapping)) {
      const values = output.map((itemOutput, item) =>
        inNodeScope(
          draft,
          { node: nodeId, item, iteration },
          () => applyOutputMapping({ "state.v": source }, itemOutput, { state: {}, output: {} }).state.v ?? null,
        ),
      );
      next = applyOutputMapping({ [path]: values }, null, next);
    }
  } else {
    const mapping = definition.output_mapping;
    next = inNodeScope(draft, { node: nodeId, item: null, iteration }, () =>
      applyOutputMapping(mapping, output, target),
    );
  }
  draft.record.context = { ...context, state: next.state, output: next.output };
}
