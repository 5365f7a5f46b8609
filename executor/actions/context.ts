import { evalCel } from "../../lib/expr/cel.ts";
import { setIn } from "../../lib/expr/mapping.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `context`: computes values with CEL over the action input (the variable
 * `input`) and returns them as an object, each at its dotted `path`.
 */
export const contextAction: ActionHandler<"context"> = {
  async run(action, input) {
    let output: JsonObject = {};
    for (const update of action.implementation.updates) {
      output = setIn(output, update.path.split("."), evalCel(update.expr, { input }) as Json);
    }
    return output;
  },
};
