import { handledByTaskRunner } from "./not-implemented.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `workflow`: the task suspends at the step while the coordinator runs the
 * child workflow (pinned when the run started) on the step's input; the
 * child's output, or its failure, resumes the step.
 */
export const workflowAction: ActionHandler<"workflow"> = {
  ...handledByTaskRunner("workflow"),
  suspend(action, input) {
    return {
      kind: "child",
      workflow: action.implementation.workflow,
      input,
      on_failure: action.implementation.on_failure ?? "propagate",
    };
  },
};
