import { EngineError } from "../../lib/errors.ts";
import type { ActionKind } from "../../schemas/actions.ts";
import type { ActionHandler } from "./types.ts";

/** A kind whose definitions are accepted but whose handler has not landed yet. */
export function notImplemented<K extends ActionKind>(kind: K): ActionHandler<K> {
  return {
    async run() {
      throw EngineError.terminal("action.not_implemented", `the "${kind}" action kind is not implemented yet`);
    },
  };
}

/**
 * `human` and `workflow` steps never reach a handler: the task runner
 * suspends the task there and the coordinator takes over. Reaching this is a bug.
 */
export function handledByTaskRunner<K extends ActionKind>(kind: K): ActionHandler<K> {
  return {
    async run() {
      throw EngineError.terminal(
        "executor.internal",
        `"${kind}" steps are suspended by the task runner, never run as actions`,
      );
    },
  };
}
