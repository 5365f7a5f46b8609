import { evictDurableObject, runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import {
  limitObject,
  limitObjectName,
  NOTICE_LEASE_MS,
  noticeRetryAt,
  type LimitGrantTarget,
} from "../../limits/index.ts";
import type { LimitKeeper } from "../../limits/keeper.ts";
import { unwrap } from "../../lib/result.ts";
import type { AcquireRequest, LimitConfig, LimitGrant } from "../../schemas/limits.ts";
import { uniqueId } from "./helpers.ts";

/**
 * The limit object (limits/keeper.ts) as a real Durable Object: grants and
 * the queue through its RPC methods, its alarm driven without waiting, grant
 * notifications to a recorder in place of the runs' coordinators, and its
 * state read back from SQLite by a fresh instance.
 */

const KEY = "k";

function stubOf(limitId: string) {
  return env.LIMITS.get(env.LIMITS.idFromName(limitObjectName(limitId, KEY)));
}

/** The object's calls, their Results unwrapped (`raw`: as they answer). */
function keeper(limitId: string) {
  const raw = limitObject(env, limitId, KEY);
  return {
    raw,
    acquire: async (request: AcquireRequest) => unwrap(await raw.acquire(request)),
    release: async (holderId: string, fields: { tokens?: number; retry_after_ms?: number } = {}) =>
      unwrap(await raw.release({ holder_id: holderId, ...fields })),
    withdraw: async (runId: string) => unwrap(await raw.withdraw({ run_id: runId })),
    renew: async (holderIds: string[], leaseMs: number) =>
      unwrap(await raw.renew({ holder_ids: holderIds, lease_ms: leaseMs })),
    status: async () => unwrap(await raw.status(limitId, KEY)),
  };
}

function inside<T>(limitId: string, fn: (instance: LimitKeeper, state: DurableObjectState) => T | Promise<T>) {
  return runInDurableObject(stubOf(limitId), fn);
}

function config(limitId: string, fields: Partial<LimitConfig> = { concurrency: 1 }): LimitConfig {
  return { id: limitId, version: 1, ...fields };
}

function ask(limit: LimitConfig, id: string, fields: { priority?: number; lease_ms?: number | null } = {}) {
  return {
    config: limit,
    key: KEY,
    holder: { id, run_id: `run-${id}`, priority: fields.priority ?? 5 },
    lease_ms: fields.lease_ms ?? null,
    queue: true,
  } satisfies AcquireRequest;
}

/** Sets the object's clock `offsetMs` ahead of the real one. */
function shiftClock(limitId: string, offsetMs: number) {
  return inside(limitId, (instance) => {
    instance.now = () => Date.now() + offsetMs;
  });
}

interface Seen {
  runId: string;
  grant: LimitGrant;
  /** The holders the object had stored when the call left it. */
  storedHolders: string[];
}

/** Replaces where grants are told with a recorder answering `accepted: true` (or what `answer` says). */
async function recordGrants(limitId: string, answer: (grant: LimitGrant) => Promise<unknown> = async () => accepted) {
  const seen: Seen[] = [];
  await inside(limitId, (instance, state) => {
    instance.target = (runId: string): LimitGrantTarget => ({
      async limitGranted(grant) {
        const rows = state.storage.sql.exec<{ id: string }>("SELECT id FROM holders ORDER BY id").toArray();
        seen.push({ runId, grant, storedHolders: rows.map((row) => row.id) });
        return answer(grant);
      },
    });
  });
  return seen;
}

const accepted = { ok: true, value: { accepted: true } };

function notifications(limitId: string) {
  return inside(limitId, (_instance, state) =>
    state.storage.sql
      .exec<{ holder_id: string; attempts: number; due_at: number }>("SELECT * FROM notifications")
      .toArray(),
  );
}

describe("grants and the queue", () => {
  it("grants up to the concurrency, queues by priority then age, and a release serves the head", async ({ expect }) => {
    const id = uniqueId("limit");
    const limit = config(id);
    const seen = await recordGrants(id);
    const object = keeper(id);
    expect(await object.acquire(ask(limit, "a"))).toEqual({ granted: true, lease_until: null });
    expect(await object.acquire(ask(limit, "low", { priority: 2 }))).toMatchObject({ granted: false, position: 1 });
    expect(await object.acquire(ask(limit, "high", { priority: 7 }))).toMatchObject({ granted: false, position: 1 });
    expect(await object.acquire(ask(limit, "high", { priority: 7 }))).toMatchObject({ granted: false, position: 1 });
    expect(await object.status()).toEqual({
      limit: id,
      key: KEY,
      in_use: 1,
      waiting: 2,
      window: { used: 0, resets_at: null },
      paused_until: null,
    });
    expect(await object.release("a")).toEqual({ released: true });
    expect(await object.release("a")).toEqual({ released: false });
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]).toEqual({
      runId: "run-high",
      grant: { limit: id, key: KEY, holder_id: "high", lease_until: null },
      storedHolders: ["high"],
    });
    await vi.waitUntil(async () => (await notifications(id)).length === 0);
    expect(await object.acquire(ask(limit, "high"))).toEqual({ granted: true, lease_until: null });
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 1 });
  });

  it("withdraw frees a run's slot and its place, and serves the next", async ({ expect }) => {
    const id = uniqueId("limit");
    const limit = config(id);
    const seen = await recordGrants(id);
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.acquire(ask(limit, "c"));
    expect(await object.withdraw("run-b")).toEqual({ released: 0, withdrawn: 1 });
    expect(await object.withdraw("run-a")).toEqual({ released: 1, withdrawn: 0 });
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]?.grant.holder_id).toBe("c");
  });

  it("answers a status of zeros for a limit never used", async ({ expect }) => {
    const id = uniqueId("unused");
    expect(await keeper(id).status()).toEqual({
      limit: id,
      key: KEY,
      in_use: 0,
      waiting: 0,
      window: { used: 0, resets_at: null },
      paused_until: null,
    });
  });

  it("answers a bad request with limit.invalid_request and the path of each problem", async ({ expect }) => {
    const id = uniqueId("bad");
    const raw = keeper(id).raw;
    const answer = await raw.acquire({ ...ask(config(id), "a"), lease_ms: -1 } as AcquireRequest);
    expect(answer).toMatchObject({ ok: false, error: { code: "limit.invalid_request" } });
    expect(answer.ok ? undefined : answer.error.message).toContain("lease_ms");
    const noBudget = await raw.acquire({ ...ask(config(id), "a"), config: { id, version: 1 } } as AcquireRequest);
    expect(noBudget).toMatchObject({ ok: false, error: { code: "limit.invalid_request" } });
    const release = await raw.release({ holder_id: "" });
    expect(release.ok ? [] : release.error.details?.map((detail) => detail.path)).toEqual(["holder_id"]);
    expect(await raw.status(id, "x".repeat(300))).toMatchObject({
      ok: false,
      error: { code: "limit.invalid_request" },
    });
  });
});

describe("the alarm", () => {
  it("reclaims a lapsed lease and grants the waiter", async ({ expect }) => {
    const id = uniqueId("lease");
    const limit = config(id);
    const seen = await recordGrants(id);
    const object = keeper(id);
    const first = await object.acquire(ask(limit, "a", { lease_ms: 60_000 }));
    await object.acquire(ask(limit, "b", { lease_ms: 60_000 }));
    const alarm = await inside(id, (_instance, state) => state.storage.getAlarm());
    expect(first.granted && alarm === first.lease_until).toBe(true);
    await shiftClock(id, 60_000);
    expect(await runDurableObjectAlarm(stubOf(id))).toBe(true);
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]?.grant.holder_id).toBe("b");
    expect(await object.renew(["a", "b"], 60_000)).toEqual({ held: ["b"] });
  });

  it("serves the queue when the rate window lets the next grant through", async ({ expect }) => {
    const id = uniqueId("rate");
    const limit = config(id, { rate: { limit: 1, period_ms: 10_000 } });
    const seen = await recordGrants(id);
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    const queued = await object.acquire(ask(limit, "b"));
    expect(queued.granted).toBe(false);
    const retryAt = queued.granted ? 0 : (queued.retry_at ?? 0);
    expect(await inside(id, (_instance, state) => state.storage.getAlarm())).toBe(retryAt);
    await shiftClock(id, retryAt - Date.now());
    await runDurableObjectAlarm(stubOf(id));
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]?.grant.holder_id).toBe("b");
  });

  it("a Retry-After pauses grants for everyone until it ends", async ({ expect }) => {
    const id = uniqueId("pause");
    const limit = config(id, { concurrency: 10 });
    const seen = await recordGrants(id);
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.release("a", { retry_after_ms: 5_000 });
    expect(await object.acquire(ask(limit, "b"))).toMatchObject({ granted: false, position: 1 });
    expect((await object.status()).paused_until).not.toBeNull();
    await shiftClock(id, 5_000);
    await runDurableObjectAlarm(stubOf(id));
    await vi.waitUntil(() => seen.length === 1);
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 0, paused_until: null });
  });
});

describe("grant notifications", () => {
  it("a failed notification is tried again by the alarm after a backoff", async ({ expect }) => {
    const id = uniqueId("retry");
    const limit = config(id);
    let calls = 0;
    const seen = await recordGrants(id, async () => {
      calls += 1;
      if (calls === 1) {
        throw new Error("the coordinator is unreachable");
      }
      return { ok: true, value: { accepted: true } };
    });
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    const before = Date.now();
    await object.release("a");
    const failed = await vi.waitUntil(async () => (await notifications(id)).find((row) => row.attempts === 1));
    expect(failed.due_at).toBeGreaterThanOrEqual(noticeRetryAt(1, before));
    expect(failed.due_at).toBeLessThan(before + NOTICE_LEASE_MS);
    expect(await inside(id, (_instance, state) => state.storage.getAlarm())).toBe(failed.due_at);
    await shiftClock(id, failed.due_at - Date.now());
    await runDurableObjectAlarm(stubOf(id));
    await vi.waitUntil(() => seen.length === 2);
    await vi.waitUntil(async () => (await notifications(id)).length === 0);
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 0 });
  });

  it("a retryable error Result is a failed notification, tried again", async ({ expect }) => {
    const id = uniqueId("error");
    const limit = config(id);
    await recordGrants(id, async () => ({
      ok: false,
      error: { code: "run.busy", message: "try later", retryable: true },
    }));
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.release("a");
    await vi.waitUntil(async () => (await notifications(id))[0]?.attempts === 1);
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 0 });
    await object.withdraw("run-b");
    expect(await notifications(id)).toEqual([]);
  });

  it("a terminal error Result (the run is gone) frees the slot and the next waiter is granted", async ({ expect }) => {
    const id = uniqueId("gone");
    const limit = config(id);
    const seen = await recordGrants(id, async (grant) =>
      grant.holder_id === "b"
        ? { ok: false, error: { code: "run.not_found", message: "no such run", retryable: false } }
        : accepted,
    );
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.acquire(ask(limit, "c"));
    await object.release("a");
    await vi.waitUntil(() => seen.length === 2);
    expect(seen.map((entry) => entry.grant.holder_id)).toEqual(["b", "c"]);
    await vi.waitUntil(async () => (await notifications(id)).length === 0);
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 0 });
  });

  it("accepted: false frees the slot at once and the next waiter is granted", async ({ expect }) => {
    const id = uniqueId("declined");
    const limit = config(id);
    const seen = await recordGrants(id, async (grant) => ({
      ok: true,
      value: { accepted: grant.holder_id !== "b" },
    }));
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.acquire(ask(limit, "c"));
    await object.release("a");
    await vi.waitUntil(() => seen.length === 2);
    expect(seen.map((entry) => [entry.grant.holder_id, entry.storedHolders])).toEqual([
      ["b", ["b"]],
      ["c", ["c"]],
    ]);
    await vi.waitUntil(async () => (await notifications(id)).length === 0);
    expect(await object.status()).toMatchObject({ in_use: 1, waiting: 0 });
  });
});

describe("through the runs' coordinators", () => {
  it("a run that does not wait for the grant answers accepted: false, and each slot goes to the next", async ({
    expect,
  }) => {
    const id = uniqueId("real");
    const limit = config(id);
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.acquire(ask(limit, "c"));
    await object.release("a");
    // run-b and run-c have no run: their coordinators say no, and the slot is free again.
    await vi.waitUntil(async () => (await object.status()).waiting === 0 && (await notifications(id)).length === 0);
    expect(await object.status()).toMatchObject({ in_use: 0, waiting: 0 });
  });
});

describe("storage", () => {
  it("a new instance picks up the holders, the queue, the windows and the pause from SQLite", async ({ expect }) => {
    const id = uniqueId("evicted");
    const limit = config(id, { concurrency: 1, tokens: { limit: 1_000, period_ms: 60_000 } });
    const granted = await recordGrants(id);
    const object = keeper(id);
    await object.acquire(ask(limit, "a"));
    await object.acquire(ask(limit, "b"));
    await object.acquire(ask(limit, "c", { priority: 9 }));
    await object.release("a", { tokens: 400 });
    await vi.waitUntil(() => granted.length === 1);
    expect(granted[0]?.grant.holder_id).toBe("c");
    await object.release("another", { retry_after_ms: 60_000 });
    const before = await object.status();
    expect(before).toMatchObject({ in_use: 1, waiting: 1, window: { used: 400 } });
    expect(before.paused_until).not.toBeNull();
    await evictDurableObject(stubOf(id));
    expect(await object.status()).toEqual(before);
    // The release of a is remembered too: sent again, its tokens are not counted twice.
    expect(await object.release("a", { tokens: 400 })).toEqual({ released: false });
    expect((await object.status()).window.used).toBe(400);
    const seen = await recordGrants(id);
    expect(await object.release("c")).toEqual({ released: true });
    expect(await object.status()).toMatchObject({ in_use: 0, waiting: 1 });
    await shiftClock(id, 60_000);
    await runDurableObjectAlarm(stubOf(id));
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]?.grant.holder_id).toBe("b");
  });
});

describe("throughput", () => {
  it("one object grants and releases two hundred holders one after another, leaving nothing held", async ({
    expect,
  }) => {
    const id = uniqueId("busy");
    const limit = config(id, { concurrency: 1, rate: { limit: 100_000, period_ms: 60_000 } });
    const object = keeper(id);
    const startedAt = performance.now();
    for (let index = 0; index < 200; index += 1) {
      expect((await object.acquire(ask(limit, `h${index}`, { lease_ms: 30_000 }))).granted).toBe(true);
      await object.release(`h${index}`);
    }
    const elapsedMs = performance.now() - startedAt;
    expect(await object.status()).toMatchObject({ in_use: 0, waiting: 0 });
    expect((await object.status()).window.used).toBe(200);
    console.log(JSON.stringify({ one_caller_pairs: 200, pairs_per_s: Math.round((200 / elapsedMs) * 1000) }));
  });

  it("sixty-four callers acquiring without queueing: each call is answered and nothing is left held", async ({
    expect,
  }) => {
    const id = uniqueId("parallel");
    const limit = config(id, { concurrency: 32, rate: { limit: 100_000, period_ms: 60_000 } });
    const object = keeper(id);
    let granted = 0;
    const startedAt = performance.now();
    await Promise.all(
      Array.from({ length: 64 }, async (_, caller) => {
        for (let index = 0; index < 10; index += 1) {
          const holder = ask(limit, `p${caller}-${index}`, { lease_ms: 30_000 });
          const answer = await object.acquire({ ...holder, queue: false });
          granted += answer.granted ? 1 : 0;
          await object.release(holder.holder.id);
        }
      }),
    );
    const elapsedMs = performance.now() - startedAt;
    const status = await object.status();
    expect(status).toMatchObject({ in_use: 0, waiting: 0 });
    expect(status.window.used).toBe(granted);
    console.log(
      JSON.stringify({ callers: 64, pairs: 640, granted, pairs_per_s: Math.round((640 / elapsedMs) * 1000) }),
    );
  });

  it("sixteen callers at once: every holder is granted in turn and the slot is never held twice", async ({
    expect,
  }) => {
    const id = uniqueId("contended");
    const limit = config(id, { concurrency: 4 });
    const seen = await recordGrants(id);
    const object = keeper(id);
    let maxInUse = 0;
    await Promise.all(
      Array.from({ length: 16 }, async (_, caller) => {
        for (let index = 0; index < 10; index += 1) {
          const holder = `c${caller}-${index}`;
          const answer = await object.acquire(ask(limit, holder));
          if (!answer.granted) {
            await vi.waitUntil(() => seen.some((entry) => entry.grant.holder_id === holder), { timeout: 20_000 });
          }
          maxInUse = Math.max(maxInUse, (await object.status()).in_use);
          await object.release(holder);
        }
      }),
    );
    expect(maxInUse).toBeLessThanOrEqual(4);
    expect(seen.length).toBeGreaterThan(0);
    expect(await object.status()).toMatchObject({ in_use: 0, waiting: 0 });
  });
});
