import { type NodeRunVariables, withRunVariables } from "../lib/expr/run-scope.ts";
import type { Draft } from "./draft.ts";

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
