import type { Result } from "../lib/result.ts";
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
  /** What `GET /v1/limits/{id}/status?key=` answers: the object is told its limit id and key (its name holds both). */
  status(limitId: string, key: string): Promise<Result<LimitStatus>>;
}

/**
 * The object's name: the limit id and the key, which no id contains a `/` of.
 * Each (limit, key) is one object: one key's traffic never queues behind another's.
 */
export function limitObjectName(limitId: string, key: string): string {
  return `${limitId}/${key}`;
}

/** The limit id and key of an object's name (an id never contains `/`). */
export function splitLimitObjectName(name: string): { limit: string; key: string } {
  const slash = name.indexOf("/");
  return { limit: name.slice(0, slash), key: name.slice(slash + 1) };
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
