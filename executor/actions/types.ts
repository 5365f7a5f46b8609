import type { Json } from "../../lib/expr/mapping.ts";
import type { ActionKind, ResolvedAction, TaskPayload } from "../../schemas/index.ts";

/** What a handler may use besides its input: nothing global. */
export interface ActionContext {
  /** Aborted when the action's timeout passes; handlers pass it to every I/O call. */
  signal: AbortSignal;
  /** The Worker's environment, for `$env:` secrets and bindings. */
  env: Env;
  payload: TaskPayload;
  fetch: typeof fetch;
}

/** One action kind. Errors are thrown as `EngineError` with a dotted code and `retryable`. */
export interface ActionHandler<K extends ActionKind> {
  run(action: Extract<ResolvedAction, { kind: K }>, input: Json, context: ActionContext): Promise<Json>;
}

/** The registry's type: exactly one handler per kind, so a new kind breaks the build until handled. */
export type ActionRegistry = { [K in ActionKind]: ActionHandler<K> };
