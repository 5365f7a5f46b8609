import { EngineError } from "../../lib/errors.ts";
import { checkPlan, PLAN_WORKFLOW_ID } from "../../plans/index.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import { handledByTaskRunner } from "./not-implemented.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `plan`: the step's input is an agent plan in either notation
 * (docs/plans.md), such as an `llm` step's structured output. What the plan
 * alone decides is checked now, so a bad plan fails the step before any child
 * exists: its notation and graph (`plan.invalid`, each problem at its path),
 * the allowlist (`plan.tool_not_allowed`), the pre-approved steps. Then the
 * task suspends while the coordinator checks the allowlist's grants against
 * the run's own, resolves the plan and runs it as a child run; the child's
 * `{ results }` resume the step.
 */
export const planAction: ActionHandler<"plan"> = {
  ...handledByTaskRunner("plan"),
  suspend(action, input) {
    const given = planOf(input);
    const { tools, approved_steps, mode } = action.implementation;
    checkPlan({ given, tools, input: {}, approvedSteps: approved_steps ?? [] });
    return {
      kind: "child",
      workflow: PLAN_WORKFLOW_ID,
      input: {},
      on_failure: "propagate",
      plan: {
        given,
        tools: [...tools],
        ...(approved_steps === undefined ? {} : { approved_steps: [...approved_steps] }),
        ...(mode === undefined ? {} : { mode }),
      },
    };
  },
};

/** The plan the input is: an object (either notation's shape is checked by `checkPlan`). */
function planOf(input: Json): JsonObject {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    const what = input === null ? "null" : Array.isArray(input) ? "an array" : typeof input;
    throw EngineError.terminal("plan.invalid", `a plan step's input must be a plan (an object); it is ${what}`, [
      { path: "plan", message: "must be an object" },
    ]);
  }
  return input;
}
