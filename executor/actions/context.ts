import { evalCel } from "../../lib/expr/cel.ts";
import { setIn, type Json, type JsonRecord } from "../../lib/expr/mapping.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `context`: computes values with CEL over the action input (the variable
 * `input`) and returns them as an object, each at its dotted `path`.
 */
export const contextAction: ActionHandler<"context"> = {
  async run(action, input) {
    let output: JsonRecord = {};
    for (const update of action.implementation.updates) {
      output = setIn(output, update.path.split("."), evalCel(update.expr, { input }) as Json);
    }
    return output;
  },
};
