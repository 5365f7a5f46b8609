import type { Result } from "../lib/result.ts";
import { limitObjectName } from "./names.ts";
import {
  DEFAULT_LIMIT_LEASE_MS,
  type AcquireAnswer,
  type AcquireRequest,
  type LimitStatus,
  type ReleaseRequest,
  type RenewRequest,
  type WithdrawRequest,
} from "../schemas/limits.ts";

/**
 * A limit object's calls (limits/keeper.ts). Each answers a Result: errors
 * cross RPC as data with their code. Requests are parsed by the object.
 */
export interface LimitKeeperApi {
  acquire(request: AcquireRequest): Promise<Result<AcquireAnswer>>;
  release(request: ReleaseRequest): Promise<Result<{ released: boolean }>>;
  renew(request: RenewRequest): Promise<Result<{ held: string[] }>>;
  withdraw(request: WithdrawRequest): Promise<Result<{ released: number; withdrawn: number }>>;
  /** The limit and key are those of the object's name: an object never acquired answers zeros for them. */
  status(limitId: string, key: string): Promise<Result<LimitStatus>>;
}

/** How long a step's slot stays held without a renewal: `LIMIT_LEASE_MS`, or 30 s. */
export function limitLeaseMs(env: Pick<Env, "LIMIT_LEASE_MS">): number {
  const configured = Number(env.LIMIT_LEASE_MS);
  return Number.isInteger(configured) && configured > 0 ? configured : DEFAULT_LIMIT_LEASE_MS;
}

/** The object of (limit, key). */
export function limitObject(env: Env, limitId: string, key: string): LimitKeeperApi {
  return env.LIMITS.get(env.LIMITS.idFromName(limitObjectName(limitId, key))) as unknown as LimitKeeperApi;
}
