import type { ActionKind } from "../../schemas/actions.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import type { TaskContext, TaskPayload, TaskSuspension } from "../../schemas/payload.ts";
import type { ResolvedAction } from "../../schemas/resolved.ts";
import type { StepRunVariables } from "../../lib/expr/run-scope.ts";

/** What a handler may use besides its input: nothing global. */
export interface ActionContext {
  /** Aborted when the action's timeout passes; handlers pass it to every I/O call. */
  signal: AbortSignal;
  /** The Worker's environment, for `$env:` secrets and bindings. */
  env: Env;
  payload: TaskPayload;
  /** The step's `run` variable (lib/expr/run-scope.ts): absent only outside a task's step loop. */
  run?: StepRunVariables;
  fetch: typeof fetch;
  /**
   * Says what this call did, for its attempt's record in the journal
   * (`call`: e.g. an http call's method, URL and status, a model's tokens).
   * Fields add up over the call; values are scrubbed of secrets before they
   * are recorded. Never a credential.
   */
  note?: (detail: JsonObject) => void;
}

/** A resolved action of kind `K`. */
export type ResolvedActionOf<K extends ActionKind> = Extract<ResolvedAction, { kind: K }>;

/** What a step waits for while its task is suspended: a gate's answer, a child run, or a time. */
export type ActionWait = TaskSuspension["wait"];

/** One action kind. Errors are thrown as `EngineError` with a dotted code and `retryable`. */
export interface ActionHandler<K extends ActionKind> {
  run(action: ResolvedActionOf<K>, input: Json, context: ActionContext): Promise<Json>;
  /**
   * Set for a kind the task runner suspends at instead of running (`human`,
   * `workflow`, `sleep`): what the step waits for, from its input. The
   * coordinator takes over and resumes the task with the outcome. `run` is
   * called only when this answers undefined: nothing to wait for.
   */
  suspend?(action: ResolvedActionOf<K>, input: Json, context: TaskContext): ActionWait | undefined;
}

/** The registry's type: exactly one handler per kind, so a new kind breaks the build until handled. */
export type ActionRegistry = { [K in ActionKind]: ActionHandler<K> };
