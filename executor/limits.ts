import { EngineError, type ErrorData } from "../lib/errors.ts";
import type { Result } from "../lib/result.ts";
import { limitKeyOf } from "../limits/key.ts";
import { limitLeaseMs, limitObject, type LimitKeeperApi } from "../limits/route.ts";
import type { AgentState } from "../schemas/agent.ts";
import type { Json } from "../schemas/common.ts";
import {
  DEFAULT_PRIORITY,
  MAX_LIMIT_PERIOD_MS,
  type AcquireAnswer,
  type LimitConfig,
  type LimitHolder,
  type ResolvedLimitUse,
} from "../schemas/limits.ts";
import type { TaskPayload, TaskSuspension } from "../schemas/payload.ts";
import type { ResolvedAction } from "../schemas/resolved.ts";
import { FIRST_LLM_CALL } from "./actions/llm.ts";
import type { LlmChainState } from "./actions/types.ts";
import type { Clock } from "./invoke.ts";

/**
 * Limits around a step's calls (docs/architecture.md, "Limits"). A call of
 * an action that names `limits`, or of a model that does, holds a slot of
 * each before it is made and gives it back after: acquired in order with
 * `queue: false` (granted now or not at all), its leases renewed every third
 * of a lease while the call runs, released in a `finally` with the tokens the
 * call reported and, when the peer answered 429, its `Retry-After`. A limit
 * without room ends the step with a `limit` wait (the coordinator queues the
 * holder and resumes the step `granted`), or, in a task that cannot wait (a
 * tool call's, an undo's), fails the call with `limit.no_room`, retryably.
 * A step without limits never reaches this module's objects.
 */

/** How the executor reaches the object of (limit, key): `limitObject` in production, a fake in tests. */
export type LimitPort = (limitId: string, key: string) => LimitKeeperApi;

/** The port over the Worker's `LIMITS` namespace. */
export function limitPortOf(env: Env): LimitPort {
  return (limitId, key) => limitObject(env, limitId, key);
}

/** Where a call stands for its limits: the step it belongs to, set by the step loop. */
export interface CallPlace {
  /** The step's ref. */
  step: string;
  /** An agent step's turn (1-based): the step's calls are numbered within it. */
  turn?: number;
  /** On a `granted` resume: the holder the limit object served; the step's first call holds every limit of its call as it. */
  granted?: string;
}

/** What a step waiting for a limit tells the coordinator. */
export type LimitWait = Extract<TaskSuspension["wait"], { kind: "limit" }>;

/**
 * A limit had no room for a call. `suspends`: the step waits (the step loop
 * ends it with `wait`); otherwise it is a retryable failure of the call, with
 * the time the limit expects room as its `retryAfterMs` when it knows one.
 */
export class LimitNoRoom extends EngineError {
  constructor(
    readonly wait: LimitWait,
    /** The model (its index in `[model, ...fallback_models]`) whose limit refused; null for the action's. */
    readonly model: number | null,
    readonly retryAt: number | null,
    private readonly now: number,
    readonly suspends = false,
    meta?: Record<string, unknown>,
  ) {
    const key = wait.key === "" ? "" : ` for key ${JSON.stringify(wait.key)}`;
    const when = retryAt === null ? "" : `; it expects room at ${new Date(retryAt).toISOString()}`;
    super("limit.no_room", `limit ${wait.limit.id} has no room${key}${when}`, {
      retryable: true,
      ...(retryAt === null ? {} : { retryAfterMs: Math.max(0, retryAt - now) }),
      ...(meta === undefined ? {} : { meta }),
    });
  }

  /**
   * The same refusal, as the step's wait: with what the dispatch's earlier
   * calls spent (`meta`, an llm's `_meta`), and an agent step's loop, so the
   * turn it makes once served goes on with it.
   */
  suspending(how: { agent?: AgentState; spent?: LlmChainState["spent"] } = {}): LimitNoRoom {
    const wait = how.agent === undefined ? this.wait : { ...this.wait, agent: how.agent };
    const spent = how.spent;
    const meta =
      spent === undefined || spent.input + spent.output + spent.cost_usd === 0
        ? this.meta
        : { tokens: { input: spent.input, output: spent.output }, cost_usd: spent.cost_usd };
    return new LimitNoRoom(wait, this.model, this.retryAt, this.now, true, meta);
  }
}

/**
 * The holder id of a call: deterministic per call, so a dispatch sent again
 * (the same attempt, after a lost one) holds the slots its first sending did,
 * never two. A step's call `n` (1-based, counting retries, fallbacks and
 * repairs; `<turn>.<n>` in an agent step) is
 * `step:<run>/<node>/<item|->/<iteration>/<retry_attempt>/<step_ref>/<n>`; on
 * a `granted` resume the first call is the holder the object served. A task of
 * one call (a tool call's, an undo's: {@link isOneCallTask}) is
 * `call:<token>/<n>`: parallel calls of one tool differ only by their dispatch.
 */
export function holderIdOf(payload: TaskPayload, place: CallPlace, call: number): string {
  if (call === 1 && place.granted !== undefined) {
    return place.granted;
  }
  const n = place.turn === undefined ? `${call}` : `${place.turn}.${call}`;
  if (isOneCallTask(payload)) {
    return `call:${payload.token_id}/${n}`;
  }
  const item = payload.item_index ?? "-";
  const { workflow_run_id: run, node_id: node, iteration, retry_attempt: attempt } = payload;
  return `step:${run}/${node}/${item}/${iteration}/${attempt}/${place.step}/${n}`;
}

/**
 * A task the coordinator made to run one call for a step (an agent's tool
 * call, an undo; `one_call` on its payload): its result settles the call, so
 * it cannot wait for a limit.
 */
export function isOneCallTask(payload: Pick<TaskPayload, "one_call">): boolean {
  return payload.one_call === true;
}

/** A limit as a call holds it: the definition the run resolved, the key for this step's input. */
interface KeyedLimit {
  limit: LimitConfig;
  key: string;
  /** Whose it is: a model's (its index) or the action's (null). */
  model: number | null;
}

/** What the limits of one action invocation need from outside. */
export interface LimitDeps {
  port: LimitPort;
  payload: TaskPayload;
  place: CallPlace;
  clock: Clock;
  env: Pick<Env, "LIMIT_LEASE_MS">;
}

/**
 * The limits an invocation of `action` must hold, each keyed for `input`
 * (a key that cannot be computed fails the step now, not retryable); null
 * when neither the action nor any of its models names one.
 */
export function callLimitsOf(action: ResolvedAction, input: Json, deps: () => LimitDeps): CallLimits | null {
  const models =
    action.kind === "llm" ? [action.implementation.model, ...(action.implementation.fallback_models ?? [])] : [];
  if (action.limits === undefined && models.every((model) => model.limits === undefined)) {
    return null;
  }
  const keyed = (uses: readonly ResolvedLimitUse[] | undefined, model: number | null): KeyedLimit[] =>
    (uses ?? []).map((use) => ({ limit: use.limit, key: limitKeyOf(use.key, input), model }));
  return new CallLimits(
    keyed(action.limits, null),
    models.map((model, index) => keyed(model.limits, index)),
    deps(),
  );
}

/** The limits of one action invocation, across its calls. */
export class CallLimits {
  /** The first model's refusal in the current pass over the models (none had room yet). */
  private primary: LimitNoRoom | undefined;
  private readonly leaseMs: number;
  /** Whether a limit without room suspends the step (not in a one-call task). */
  private readonly suspends: boolean;

  constructor(
    private readonly actionLimits: readonly KeyedLimit[],
    private readonly modelLimits: readonly (readonly KeyedLimit[])[],
    private readonly deps: LimitDeps,
  ) {
    this.leaseMs = limitLeaseMs(deps.env);
    this.suspends = !isOneCallTask(deps.payload);
  }

  /**
   * Makes call `call` (of model `model`, for an llm action) holding its
   * limits: acquired before `run`, renewed while it runs, released after it
   * with `tokens()` (what it reported) and, if it was throttled, the pause.
   *
   * @throws LimitNoRoom when a limit has no room (nothing is held then);
   * EngineError `limit.unavailable` (retryable) when an object cannot be asked.
   */
  async hold<T>(call: number, model: number, run: () => Promise<T>, tokens: () => number): Promise<T> {
    const holderId = holderIdOf(this.deps.payload, this.deps.place, call);
    const held = await this.acquireAll(this.usesOf(model), holderId);
    this.primary = undefined;
    const objects = held.map((use) => () => this.deps.port(use.limit.id, use.key));
    const renewing = renewWhileHeld(objects, holderId, this.leaseMs, this.deps.clock);
    let failure: unknown;
    try {
      return await run();
    } catch (thrown) {
      failure = thrown;
      throw thrown;
    } finally {
      await renewing.stop();
      await releaseAll(objects, holderId, { tokens: tokens(), pauseMs: pauseOf(failure) });
    }
  }

  /**
   * What follows a refusal. A model's limit without room counts as that
   * model being unavailable: the next fallback is tried at once. When no
   * model is left, or the action's own limit refused, the step waits: for the
   * first model's limit if it refused in this pass (the call a `granted`
   * resume makes first is the first model's), else for the action's. A step
   * that cannot wait, or a pass whose first model had room (it failed
   * otherwise), goes on by the retry policy, from the first model.
   *
   * @throws LimitNoRoom (`suspends`) when the step is to wait.
   */
  afterRefusal(
    refusal: LimitNoRoom,
    carried: LlmChainState | undefined,
  ): { state: LlmChainState; now?: "fallback" } | undefined {
    if (refusal.model === null) {
      if (this.suspends) {
        throw refusal.suspending(spentOf(carried));
      }
      return carried === undefined ? undefined : { state: carried };
    }
    const state = carried ?? FIRST_LLM_CALL;
    if (refusal.model === 0) {
      this.primary = refusal;
    }
    if (refusal.model + 1 < this.modelLimits.length) {
      return { state: { ...state, model: refusal.model + 1 }, now: "fallback" };
    }
    const primary = this.primary;
    this.primary = undefined;
    if (primary !== undefined && this.suspends) {
      throw primary.suspending(spentOf(carried));
    }
    return { state: { ...state, model: 0 } };
  }

  /** The limits of a call of model `model`: the action's, then the model's; one (limit, key) once. */
  private usesOf(model: number): KeyedLimit[] {
    const uses: KeyedLimit[] = [];
    for (const use of [...this.actionLimits, ...(this.modelLimits[model] ?? [])]) {
      if (!uses.some((seen) => seen.limit.id === use.limit.id && seen.key === use.key)) {
        uses.push(use);
      }
    }
    return uses;
  }

  /** Acquires each limit in order; on a refusal gives back what it took (on a `granted` resume's first call, every one). */
  private async acquireAll(uses: readonly KeyedLimit[], holderId: string): Promise<KeyedLimit[]> {
    const { port, payload, clock, place } = this.deps;
    const holder: LimitHolder = {
      id: holderId,
      run_id: payload.workflow_run_id,
      priority: payload.priority ?? DEFAULT_PRIORITY,
    };
    const held: KeyedLimit[] = [];
    for (const use of uses) {
      const request = { config: use.limit, key: use.key, holder, lease_ms: this.leaseMs, queue: false };
      const answer = await ask(() => port(use.limit.id, use.key).acquire(request));
      if (answer.ok && answer.value.granted) {
        held.push(use);
        continue;
      }
      const back = holderId === place.granted ? uses : held;
      await releaseAll(
        back.map((each) => () => port(each.limit.id, each.key)),
        holderId,
        {},
      );
      if (!answer.ok) {
        throw unavailable(use, answer.error);
      }
      const wait: LimitWait = { kind: "limit", limit: use.limit, key: use.key, holder_id: holderId };
      throw new LimitNoRoom(wait, use.model, retryAtOf(answer.value), clock.now());
    }
    return held;
  }
}

function spentOf(carried: LlmChainState | undefined): { spent?: LlmChainState["spent"] } {
  return carried === undefined ? {} : { spent: carried.spent };
}

function retryAtOf(answer: AcquireAnswer): number | null {
  return answer.granted ? null : answer.retry_at;
}

/** A limit object, reached when called (reaching it may throw too: no binding). */
type Reach = () => LimitKeeperApi;

/** A call to a limit object, its failure to answer (or to be reached) as an error Result. */
async function ask<T>(call: () => Promise<Result<T>>): Promise<Result<T>> {
  try {
    return await call();
  } catch (thrown) {
    const message = thrown instanceof Error ? thrown.message : String(thrown);
    return { ok: false, error: { code: "limit.unreachable", message, retryable: true } };
  }
}

/** The call is not made without its slot: the object could not be asked, or answered an error. */
function unavailable(use: KeyedLimit, error: ErrorData): EngineError {
  return EngineError.retryable(
    "limit.unavailable",
    `limit ${use.limit.id} could not be asked for a slot (${error.code}: ${error.message})`,
  );
}

/** The pause a throttled call asks of its limits: the peer's `Retry-After`, at most a day. */
function pauseOf(failure: unknown): number | undefined {
  if (!(failure instanceof EngineError) || !failure.throttled || failure.retryAfterMs === undefined) {
    return undefined;
  }
  return Math.min(Math.round(failure.retryAfterMs), MAX_LIMIT_PERIOD_MS);
}

/**
 * Gives back a call's slots. A release that fails is left to the lease,
 * which lapses unrenewed: the call's outcome stands either way.
 */
async function releaseAll(
  objects: readonly Reach[],
  holderId: string,
  spent: { tokens?: number; pauseMs?: number | undefined },
): Promise<void> {
  const request = {
    holder_id: holderId,
    ...(spent.tokens === undefined || spent.tokens <= 0 ? {} : { tokens: spent.tokens }),
    ...(spent.pauseMs === undefined ? {} : { retry_after_ms: spent.pauseMs }),
  };
  await Promise.all(objects.map((object) => ask(() => object().release(request))));
}

/**
 * Renews the call's leases every third of a lease until `stop`, which
 * clears the timer and waits for a renewal in flight, so none outlives the
 * call (or lands after its release).
 */
function renewWhileHeld(
  objects: readonly Reach[],
  holderId: string,
  leaseMs: number,
  clock: Clock,
): { stop(): Promise<void> } {
  if (objects.length === 0) {
    return { stop: async () => {} };
  }
  const stopped = new AbortController();
  const every = Math.max(1, Math.floor(leaseMs / 3));
  const loop = (async () => {
    while (!stopped.signal.aborted) {
      try {
        await clock.sleep(every, stopped.signal);
      } catch {
        return;
      }
      const request = { holder_ids: [holderId], lease_ms: leaseMs };
      await Promise.all(objects.map((object) => ask(() => object().renew(request))));
    }
  })();
  return {
    stop: async () => {
      stopped.abort();
      await loop;
    },
  };
}
