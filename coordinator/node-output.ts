import { applyOutputMapping, selectOutput, setTargetPath, type Writable } from "../lib/expr/mapping.ts";
import type { InvocationRecord, Json, Node as NodeDefinition } from "../schemas/index.ts";

/** Runs `work` with the `run` variable of a foreach item (or of the node, for null). */
export type InItemScope = <T>(item: number | null, work: () => T) => T;

/**
 * Where a node's task output goes in the run context (docs/definitions.md,
 * "Node" and "foreach"): by its output mapping, or at `state.<node id>`. A
 * foreach node's output is the array of its item outputs in item order, and
 * each mapping target receives the array of what its source gives for each
 * item. An item (or a repeat iteration) that was skipped has no output to map:
 * its place is `null`. A bare `$` path that selects nothing from an output
 * that exists fails with `mapping.unresolved` (naming the item in a foreach);
 * one marked optional gives its default, or `null` in a foreach's array and no
 * write otherwise. `inScope` runs each evaluation with the `run` variable of
 * its item (null outside a foreach; coordinator/node-context.ts).
 */
export function writeNodeOutput(
  nodeId: string,
  definition: NodeDefinition,
  invocations: readonly InvocationRecord[],
  target: Writable,
  inScope: InItemScope = (_item, work) => work(),
): Writable {
  const outputs = invocations.map((invocation) => invocation.output ?? null);
  const mapping = definition.output_mapping;
  if (mapping === undefined) {
    return setTargetPath(target, `state.${nodeId}`, definition.foreach ? outputs : (outputs[0] ?? null));
  }
  if (!definition.foreach) {
    const only = invocations[0];
    return only === undefined || only.status === "skipped"
      ? Object.keys(mapping).reduce((next, path) => setTargetPath(next, path, null), target)
      : inScope(null, () => applyOutputMapping(mapping, only.output ?? null, target));
  }
  let next = target;
  for (const [path, source] of Object.entries(mapping)) {
    const values = invocations.map((invocation, index): Json => {
      if (invocation.status === "skipped") {
        return null;
      }
      const selected = inScope(index, () => selectOutput(path, source, invocation.output ?? null, index));
      return selected.found ? selected.value : null;
    });
    next = setTargetPath(next, path, values);
  }
  return next;
}
