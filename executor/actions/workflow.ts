import { chooseWorkflow } from "../../lib/workflow-choice.ts";
import { parseReference } from "../../schemas/common.ts";
import { handledByTaskRunner } from "./not-implemented.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `workflow`: the task suspends at the step while the coordinator runs the
 * child workflow (pinned when the run started, or chosen now from the task
 * context among the allowed ones) on the step's input; the child's output,
 * or its failure, resumes the step.
 */
export const workflowAction: ActionHandler<"workflow"> = {
  ...handledByTaskRunner("workflow"),
  suspend(action, input, context) {
    const on_failure = action.implementation.on_failure ?? "propagate";
    const workflow = action.implementation.workflow;
    if (typeof workflow === "string") {
      return { kind: "child", workflow, input, on_failure };
    }
    // Chosen now, from the task context, among the allowed workflows the run pinned when it started.
    const pinned = workflow.allowed.flatMap((ref) => {
      const parsed = parseReference(ref);
      return parsed?.version === undefined ? [] : [{ id: parsed.id, version: parsed.version }];
    });
    const chosen = chooseWorkflow(workflow, pinned, context);
    return {
      kind: "child",
      workflow: chosen.workflow,
      input,
      on_failure,
      chosen: { from: workflow.from, value: chosen.value },
    };
  },
};
