import { type NodeRunVariables, withRunVariables } from "../lib/expr/run-scope.ts";
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
