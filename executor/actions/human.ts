import { renderTemplate } from "../../lib/expr/template.ts";
import { handledByTaskRunner } from "./not-implemented.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `human`: the task suspends at the step on an input gate whose prompt is
 * rendered over the step's input; the answer (or the timeout's default)
 * becomes the step's output when the coordinator resumes the task.
 */
export const humanAction: ActionHandler<"human"> = {
  ...handledByTaskRunner("human"),
  suspend(action, input) {
    const implementation = action.implementation;
    return {
      kind: "gate",
      gate_kind: "input",
      prompt: renderTemplate(implementation.prompt_template, input),
      input_schema: implementation.input_schema,
      ...(implementation.timeout_ms === undefined ? {} : { timeout_ms: implementation.timeout_ms }),
      ...(implementation.on_timeout === undefined ? {} : { on_timeout: implementation.on_timeout }),
      ...(implementation.approvers === undefined ? {} : { approvers: implementation.approvers }),
    };
  },
};
