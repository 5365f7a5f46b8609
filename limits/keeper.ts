import { DurableObject } from "cloudflare:workers";
import { z } from "zod";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { toResult, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import {
  AcquireRequest,
  LimitGrantAnswer,
  LimitKey,
  ReleaseRequest,
  RenewRequest,
  WithdrawRequest,
  type AcquireAnswer,
  type LimitGrant,
  type LimitStatus,
} from "../schemas/limits.ts";
import {
  acquire,
  leaseNotices,
  nextAlarmAt,
  noticesDue,
  release,
  renew,
  settle,
  settleNotice,
  toStatus,
  withdraw,
  type Decision,
  type GrantNotice,
  type LimitState,
  type NoticeOutcome,
} from "./decide.ts";
import { LimitStore, type LimitIdentity } from "./store.ts";

/**
 * The most grant notifications (calls to coordinators) one event of the
 * object sends; the platform caps the calls one event has in flight at 32.
 * More are sent by the alarm, set for when they are due.
 */
export const MAX_NOTICES_PER_ROUND = 24;

const INVALID = "limit.invalid_request";
const BAD_ANSWER = "limit.bad_grant_answer";
const LimitId = z.string().min(1);

/** Where a grant is told: the run's coordinator (`limitGranted`), answered as {@link LimitGrantAnswer}. */
export interface LimitGrantTarget {
  limitGranted(grant: LimitGrant): Promise<unknown>;
}

/**
 * One Durable Object per (limit id, key) (limits/route.ts): it grants slots,
 * keeps the `rate` and `tokens` sliding windows, queues the holders it cannot
 * grant yet (highest priority, then oldest), reclaims lapsed leases from its
 * alarm, and tells a queued holder's run when it is granted. The decisions
 * are limits/decide.ts; this class loads the state once, applies each call in
 * memory, writes what changed in one transaction, keeps the alarm and sends
 * the notifications (after the grant is stored, off the caller's path).
 *
 * Every method answers a Result: a bad request is `limit.invalid_request`
 * with the path of each problem, never a throw across RPC.
 */
export class LimitKeeper extends DurableObject<Env> {
  /** The object's clock (ms since the epoch). Tests set it to move windows, leases and pauses along. */
  now: () => number = Date.now;
  /** The coordinator of a run, as grants reach it. Tests replace it. */
  target: (runId: string) => LimitGrantTarget;
  private readonly store: LimitStore;
  private state: LimitState;
  private identity: LimitIdentity | null;
  private identityStored: boolean;
  /** The alarm as last set (null: none known). */
  private armed: number | null = null;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.store = new LimitStore(ctx.storage.sql);
    const loaded = this.store.load();
    this.state = loaded.state;
    this.identity = loaded.identity;
    this.identityStored = loaded.identity !== null;
    this.target = (runId) => env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as LimitGrantTarget;
    void ctx.blockConcurrencyWhile(async () => {
      this.armed = await ctx.storage.getAlarm();
    });
  }

  /** Grants a slot, or queues the holder (`queue: true`), or answers no (see limits/decide.ts `acquire`). */
  async acquire(request: unknown): Promise<Result<AcquireAnswer>> {
    return toResult(() => {
      const parsed = parseOrThrow(AcquireRequest, request, INVALID, "the acquire request");
      if (this.identity === null) {
        this.identity = { limit: parsed.config.id, key: parsed.key };
      }
      return this.apply((state, now) => acquire(state, parsed, now));
    });
  }

  /** Frees a holder's slot (idempotent), counts its tokens, and pauses grants on `retry_after_ms`. */
  async release(request: unknown): Promise<Result<{ released: boolean }>> {
    return toResult(() => {
      const parsed = parseOrThrow(ReleaseRequest, request, INVALID, "the release request");
      return this.apply((state, now) => release(state, parsed, now));
    });
  }

  /** Extends the leases of holders that still hold; answers which do. */
  async renew(request: unknown): Promise<Result<{ held: string[] }>> {
    return toResult(() => {
      const parsed = parseOrThrow(RenewRequest, request, INVALID, "the renew request");
      return this.apply((state, now) => renew(state, parsed, now));
    });
  }

  /** Gives up a run's slots and places here (all, or only `holder_ids`). */
  async withdraw(request: unknown): Promise<Result<{ released: number; withdrawn: number }>> {
    return toResult(() => {
      const parsed = parseOrThrow(WithdrawRequest, request, INVALID, "the withdraw request");
      return this.apply((state, now) => withdraw(state, parsed, now));
    });
  }

  /**
   * `GET /v1/limits/{id}/status?key=`: the object's limit and key as its first
   * acquire stored them, or those asked for (an object never used answers zeros).
   */
  async status(limitId: unknown, key: unknown): Promise<Result<LimitStatus>> {
    return toResult(() => {
      const limit = parseOrThrow(LimitId, limitId, INVALID, "the limit id");
      const parsedKey = parseOrThrow(LimitKey, key, INVALID, "the key");
      return this.apply((state, now) => {
        const settled = settle(state, now);
        const identity = this.identity ?? { limit, key: parsedKey };
        return { state: settled, answer: toStatus(settled, identity.limit, identity.key, now) };
      });
    });
  }

  /** Reclaims lapsed leases, serves the queue, and sends the notifications due. */
  override async alarm(): Promise<void> {
    this.armed = null;
    const now = this.now();
    this.commit(settle(this.state, now));
    await this.sendRound();
    await this.arm(this.now());
  }

  /** Applies one decision: stored in one transaction, the alarm moved, due notifications sent after. */
  private async apply<T>(decide: (state: LimitState, now: number) => Decision<T>): Promise<T> {
    const now = this.now();
    const { state, answer } = decide(this.state, now);
    this.commit(state);
    await this.arm(now);
    if (noticesDue(this.state, now, 1).length > 0) {
      this.ctx.waitUntil(this.sendRound());
    }
    return answer;
  }

  private commit(next: LimitState): void {
    const identity = this.identity ?? { limit: "", key: "" };
    const storeIdentity = !this.identityStored && this.identity !== null;
    if (next === this.state && !storeIdentity) {
      return;
    }
    const before = this.state;
    this.ctx.storage.transactionSync(() => {
      if (storeIdentity) {
        this.store.saveIdentity(before, identity);
      }
      this.store.save(before, next, identity);
    });
    this.state = next;
    this.identityStored ||= storeIdentity;
  }

  /** Sets the alarm for the next wake, when that is not the one already set. */
  private async arm(now: number): Promise<void> {
    const next = nextAlarmAt(this.state, now);
    if (next !== null && next !== this.armed) {
      await this.ctx.storage.setAlarm(next);
      this.armed = next;
    }
  }

  /**
   * Sends one round of due notifications. They are leased first (stored as
   * due again later, with the alarm behind them), so a round cut off is sent
   * again and two rounds never send the same one; the answers are applied
   * together. A failure is logged, never thrown: the alarm tries again.
   */
  private async sendRound(): Promise<void> {
    try {
      const now = this.now();
      const due = noticesDue(this.state, now, MAX_NOTICES_PER_ROUND);
      if (due.length === 0) {
        return;
      }
      this.commit(
        leaseNotices(
          this.state,
          due.map((notice) => notice.holder_id),
          now,
        ),
      );
      await this.arm(now);
      const outcomes = await Promise.allSettled(due.map((notice) => this.send(notice)));
      const answeredAt = this.now();
      let state = this.state;
      outcomes.forEach((outcome, index) => {
        const notice = due[index];
        if (notice !== undefined) {
          state = settleNotice(state, notice.holder_id, toOutcome(notice, outcome), answeredAt);
        }
      });
      this.commit(state);
      await this.arm(answeredAt);
    } catch (error) {
      console.error(JSON.stringify({ msg: "limit grant round failed", error: ensureEngineError(error).message }));
    }
  }

  private async send(notice: GrantNotice): Promise<boolean> {
    const identity = this.identity ?? { limit: "", key: "" };
    const grant: LimitGrant = {
      limit: identity.limit,
      key: identity.key,
      holder_id: notice.holder_id,
      lease_until: notice.lease_until,
    };
    return toGrantAnswer(await this.target(notice.run_id).limitGranted(grant)).accepted;
  }
}

/**
 * A run that took the grant, or said no to it. A terminal error from its
 * coordinator (`run.not_found`, a run that cannot take grants) is a no as
 * well: trying again would hold the slot for nothing. Anything else that
 * failed (unreachable, overloaded, a retryable error) is tried again.
 */
function toOutcome(notice: GrantNotice, outcome: PromiseSettledResult<boolean>): NoticeOutcome {
  if (outcome.status === "fulfilled") {
    return outcome.value ? "accepted" : "declined";
  }
  if (outcome.reason instanceof EngineError && !outcome.reason.retryable) {
    console.error(
      JSON.stringify({
        msg: "limit grant refused",
        holder_id: notice.holder_id,
        run_id: notice.run_id,
        code: outcome.reason.code,
      }),
    );
    return "declined";
  }
  console.error(
    JSON.stringify({
      msg: "limit grant notification failed",
      holder_id: notice.holder_id,
      run_id: notice.run_id,
      attempts: notice.attempts + 1,
      error: ensureEngineError(outcome.reason).message,
    }),
  );
  return "failed";
}

/**
 * A coordinator's answer to a grant: `{ accepted }`, or that inside an ok
 * Result. An error Result, or anything else, is a failed notification, tried again.
 */
function toGrantAnswer(answer: unknown): LimitGrantAnswer {
  const plain = LimitGrantAnswer.safeParse(answer);
  if (plain.success) {
    return plain.data;
  }
  const result = answer as Partial<Result<unknown>> | null;
  if (typeof result === "object" && result !== null && result.ok === true) {
    return toGrantAnswer(result.value);
  }
  if (typeof result === "object" && result !== null && result.ok === false && result.error !== undefined) {
    throw EngineError.fromData(result.error);
  }
  throw EngineError.retryable(BAD_ANSWER, `the coordinator answered ${JSON.stringify(answer) ?? "nothing"}`);
}
