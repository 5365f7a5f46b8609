import type { ModelMessage } from "ai";
import type { ActionKind } from "../../schemas/actions.ts";
import type { AgentTurn } from "../../schemas/agent.ts";
import type { Json, JsonObject, JsonSchema } from "../../schemas/common.ts";
import type { TaskContext, TaskPayload, TaskSuspension } from "../../schemas/payload.ts";
import type { ResolvedAction } from "../../schemas/resolved.ts";
import type { StepRunVariables } from "../../lib/expr/run-scope.ts";
import type { LimitPort } from "../limits.ts";

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
  /** How the executor reaches limit objects (executor/limits.ts); absent: over `env.LIMITS`. Tests pass a fake. */
  limits?: LimitPort;
  /**
   * Says what this call did, for its attempt's record in the journal
   * (`call`: e.g. an http call's method, URL and status, a model's tokens).
   * Fields add up over the call; values are scrubbed of secrets before they
   * are recorded. Never a credential.
   */
  note?: (detail: JsonObject) => void;
  /**
   * The calls of one invocation that follow each other (an llm's fallback
   * models and repairs): set by `invokeAction`, which records each call as
   * its own attempt. Absent elsewhere: the handler then makes one call.
   */
  chain?: CallChain;
  /** Set for a turn of an `llm` step with tools (executor/agent.ts): the loop so far and the tools offered. */
  agent?: AgentTurnContext;
}

/** What a turn of an agent loop gives the model beyond its prompt, and hears back. */
export interface AgentTurnContext {
  /** The conversation after the prompt: each earlier turn's tool calls and their results. */
  messages: ModelMessage[];
  /** The tools the model may call, each with the JSON Schema of its input. */
  tools: ReadonlyArray<{ name: string; description?: string; input_schema: JsonSchema }>;
  /** Whether the model may ask for several tools in one turn. */
  parallel: boolean;
  /** Told of each model call that answered (a repair's too): the turn's record. */
  answered(turn: AgentTurn): void;
}

/** What one call of an `llm` invocation leaves for the next. */
export interface LlmChainState {
  /** The model to call: its index in `[model, ...fallback_models]`. */
  model: number;
  /** Repairs asked so far. */
  repairs: number;
  /** Messages after the prompt's: each rejected answer and the repair request that followed it. */
  messages: Array<{ role: "assistant" | "user"; content: string }>;
  /** Tokens and cost of this invocation's answered calls so far. */
  spent: { input: number; output: number; cost_usd: number };
}

/** Why a call follows the one before at once, outside the retry policy. */
export type FollowReason = "fallback" | "repair";

/**
 * The link between the calls of one invocation. A handler says, before it
 * fails, what the next call gets: `follow(state)` for a call the retry policy
 * may make later; `follow(state, "fallback")` for one made at once if this
 * call fails with a retryable error (a timeout included); `follow(state,
 * "repair")` for one made at once whatever the error. The last `follow` wins.
 */
export interface CallChain {
  /** What the previous call left for this one; undefined on the first call. */
  readonly state: LlmChainState | undefined;
  follow(state: LlmChainState, now?: FollowReason): void;
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
