import type { Chosen } from "../lib/workflow-choice.ts";
import type { Node as NodeDefinition } from "../schemas/definitions.ts";
import type { TaskSuspension } from "../schemas/payload.ts";
import type { InvocationRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * Choices of child workflows made at run time, on the journal
 * (`workflow.chosen`; docs/definitions.md, "Choosing work at run time"): a
 * node's are made by the coordinator when it starts (nodes.ts), a step's by
 * the executor, which reports it with the task's suspension.
 */

/** A task suspended at a `workflow` step that chose its child at run time: the choice, journaled. */
export function journalStepChoice(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  suspended: TaskSuspension,
): void {
  const wait = suspended.wait;
  if (wait.kind === "child" && wait.chosen !== undefined) {
    const { from, value } = wait.chosen;
    const item = draft.nodeDefinition(nodeId).foreach ? invocation.index : null;
    draft.journal("workflow.chosen", {
      node: nodeId,
      item,
      step: suspended.step_ref,
      from,
      value,
      workflow: wait.workflow,
    });
  }
}

/** One `workflow.chosen` entry per invocation whose child the node chose at run time. */
export function journalChoices(
  draft: Draft,
  nodeId: string,
  definition: NodeDefinition,
  chosen: readonly (Chosen | undefined)[],
): void {
  const from = typeof definition.workflow === "object" ? definition.workflow.from : "";
  chosen.forEach((choice, index) => {
    if (choice !== undefined) {
      const item = definition.foreach ? index : null;
      draft.journal("workflow.chosen", { node: nodeId, item, step: null, from, ...choice });
    }
  });
}
