import { describe, it } from "vitest";
import {
  acquire,
  addUse,
  blockedUntil,
  emptyState,
  leaseNotices,
  nextAlarmAt,
  NOTICE_LEASE_MS,
  noticeRetryAt,
  noticesDue,
  reclaim,
  release,
  renew,
  settle,
  settleNotice,
  toStatus,
  WINDOW_BUCKETS,
  withdraw,
  type LimitState,
} from "../../limits/decide.ts";
import type { AcquireRequest, LimitConfig } from "../../schemas/limits.ts";

/**
 * The limit object's decisions (limits/decide.ts) as plain functions of a
 * state and a clock: grants, the queue's order, the sliding windows, leases,
 * pauses and grant notifications.
 */

const T0 = 1_000_000;

function config(fields: Partial<LimitConfig> = {}): LimitConfig {
  return { id: "api", version: 1, ...fields };
}

function ask(
  id: string,
  limit: LimitConfig,
  fields: { priority?: number; queue?: boolean; lease_ms?: number | null; run_id?: string } = {},
): AcquireRequest {
  return {
    config: limit,
    key: "k",
    holder: { id, run_id: fields.run_id ?? `run-${id}`, priority: fields.priority ?? 5 },
    lease_ms: fields.lease_ms === undefined ? null : fields.lease_ms,
    queue: fields.queue ?? true,
  };
}

/** Runs acquires in order at `now`, answering the last state and every answer. */
function acquireAll(state: LimitState, requests: AcquireRequest[], now: number) {
  const answers = [];
  for (const request of requests) {
    const decision = acquire(state, request, now);
    state = decision.state;
    answers.push(decision.answer);
  }
  return { state, answers };
}

const holderIds = (state: LimitState) => state.holders.map((slot) => slot.id);
const waiterIds = (state: LimitState) => state.waiters.map((waiter) => waiter.id);

describe("concurrency", () => {
  it("grants up to the concurrency and queues the rest with their position", ({ expect }) => {
    const limit = config({ concurrency: 2 });
    const { state, answers } = acquireAll(
      emptyState(),
      ["a", "b", "c", "d"].map((id) => ask(id, limit)),
      T0,
    );
    expect(answers).toEqual([
      { granted: true, lease_until: null },
      { granted: true, lease_until: null },
      { granted: false, position: 1, retry_at: null },
      { granted: false, position: 2, retry_at: null },
    ]);
    expect(holderIds(state)).toEqual(["a", "b"]);
    expect(waiterIds(state)).toEqual(["c", "d"]);
  });

  it("a release grants the head of the queue and leaves a notice for its run", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit, { lease_ms: 500 })], T0);
    const after = release(state, { holder_id: "a" }, T0 + 10);
    expect(after.answer).toEqual({ released: true });
    expect(holderIds(after.state)).toEqual(["b"]);
    expect(after.state.holders[0]?.lease_until).toBe(T0 + 510);
    expect(after.state.notices).toEqual([
      { holder_id: "b", run_id: "run-b", lease_until: T0 + 510, due_at: T0 + 10, attempts: 0 },
    ]);
  });

  it("a lowered concurrency keeps the slots held and grants nothing until under it", ({ expect }) => {
    const wide = config({ concurrency: 3 });
    let { state } = acquireAll(
      emptyState(),
      ["a", "b", "c"].map((id) => ask(id, wide)),
      T0,
    );
    const narrow = config({ version: 2, concurrency: 1 });
    const queued = acquire(state, ask("d", narrow), T0);
    expect(queued.answer).toEqual({ granted: false, position: 1, retry_at: null });
    state = queued.state;
    expect(holderIds(state)).toEqual(["a", "b", "c"]);
    state = release(state, { holder_id: "a" }, T0).state;
    state = release(state, { holder_id: "b" }, T0).state;
    expect(holderIds(state)).toEqual(["c"]);
    state = release(state, { holder_id: "c" }, T0).state;
    expect(holderIds(state)).toEqual(["d"]);
  });

  it("keeps the definition of the highest version seen", ({ expect }) => {
    let { state } = acquireAll(emptyState(), [ask("a", config({ version: 3, concurrency: 1 }))], T0);
    state = acquire(state, ask("b", config({ version: 2, concurrency: 5 })), T0).state;
    expect(state.config?.version).toBe(3);
    expect(waiterIds(state)).toEqual(["b"]);
  });
});

describe("idempotence", () => {
  it("a holder that holds is granted again, its lease renewed, holding one slot", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const first = acquire(emptyState(), ask("a", limit, { lease_ms: 100 }), T0);
    const again = acquire(first.state, ask("a", limit, { lease_ms: 100 }), T0 + 50);
    expect(again.answer).toEqual({ granted: true, lease_until: T0 + 150 });
    expect(again.state.holders).toHaveLength(1);
  });

  it("a waiter that asks again keeps its place", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const { state } = acquireAll(
      emptyState(),
      ["a", "b", "c"].map((id) => ask(id, limit)),
      T0,
    );
    const again = acquire(state, ask("b", limit), T0 + 5);
    expect(again.answer).toEqual({ granted: false, position: 1, retry_at: null });
    expect(waiterIds(again.state)).toEqual(["b", "c"]);
    expect(again.state.next_seq).toBe(state.next_seq);
  });

  it("a release of a slot not held changes nothing and answers released: false", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const { state } = acquireAll(emptyState(), [ask("a", limit)], T0);
    const first = release(state, { holder_id: "a" }, T0);
    const second = release(first.state, { holder_id: "a" }, T0);
    expect(second.answer).toEqual({ released: false });
    expect(second.state).toEqual(first.state);
  });

  it("a release sent twice counts its tokens once", ({ expect }) => {
    const limit = config({ tokens: { limit: 1_000, period_ms: 60_000 } });
    const { state } = acquireAll(emptyState(), [ask("a", limit)], T0);
    const first = release(state, { holder_id: "a", tokens: 300 }, T0);
    const second = release(first.state, { holder_id: "a", tokens: 300 }, T0 + 1);
    expect(toStatus(second.state, "api", "k", T0 + 1).window.used).toBe(300);
  });
});

describe("queue: false", () => {
  it("grants when no one waits and records nothing when it cannot", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const first = acquire(emptyState(), ask("a", limit, { queue: false }), T0);
    expect(first.answer).toEqual({ granted: true, lease_until: null });
    const second = acquire(first.state, ask("b", limit, { queue: false }), T0);
    expect(second.answer).toEqual({ granted: false, position: 0, retry_at: null });
    expect(second.state).toBe(first.state);
  });

  it("never goes ahead of a waiter, even with a higher priority: the waiter is served first", ({ expect }) => {
    const limit = config({ rate: { limit: 1, period_ms: 1_000 } });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit, { priority: 1 })], T0);
    expect(waiterIds(state)).toEqual(["b"]);
    const jump = acquire(state, ask("c", limit, { queue: false, priority: 9 }), T0 + 10);
    expect(jump.answer).toMatchObject({ granted: false, position: 0 });
    state = settle(jump.state, T0 + 1_000);
    expect(holderIds(state)).toEqual(["a", "b"]);
  });
});

describe("serving order", () => {
  it("serves the highest priority first, then the oldest", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    let { state, answers } = acquireAll(
      emptyState(),
      [
        ask("holder", limit),
        ask("low", limit, { priority: 1 }),
        ask("high-old", limit, { priority: 8 }),
        ask("mid", limit, { priority: 5 }),
        ask("high-new", limit, { priority: 8 }),
      ],
      T0,
    );
    expect(answers.slice(1).map((answer) => (answer.granted ? 0 : answer.position))).toEqual([1, 1, 2, 2]);
    const served: string[] = [];
    let current = "holder";
    for (let step = 0; step < 4; step += 1) {
      state = release(state, { holder_id: current }, T0 + step).state;
      current = holderIds(state)[0] ?? "";
      served.push(current);
    }
    expect(served).toEqual(["high-old", "high-new", "mid", "low"]);
  });

  it("the head that cannot be granted blocks the rest (no lower priority slips past)", ({ expect }) => {
    const limit = config({ concurrency: 2, tokens: { limit: 100, period_ms: 1_000 } });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit)], T0);
    state = acquireAll(state, [ask("head", limit, { priority: 9 }), ask("tail", limit, { priority: 1 })], T0).state;
    // a frees its slot after spending the window: the head could take the slot but not the window.
    state = release(state, { holder_id: "a", tokens: 100 }, T0 + 1).state;
    expect(holderIds(state)).toEqual(["b"]);
    expect(waiterIds(state)).toEqual(["head", "tail"]);
    expect(blockedUntil(state, T0 + 1)).toBe(T0 + 1_001);
    state = settle(state, T0 + 1_001);
    expect(holderIds(state)).toEqual(["b", "head"]);
    expect(waiterIds(state)).toEqual(["tail"]);
  });
});

describe("rate", () => {
  it("spaces grants by the sliding window and says when the next one fits", ({ expect }) => {
    const limit = config({ rate: { limit: 2, period_ms: 1_000 } });
    let { state, answers } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit)], T0);
    state = acquire(state, ask("late", limit), T0 + 400).state;
    ({ state, answers } = acquireAll(state, [ask("c", limit)], T0 + 400));
    expect(answers[0]).toEqual({ granted: false, position: 2, retry_at: T0 + 1_000 });
    expect(nextAlarmAt(state, T0 + 400)).toBe(T0 + 1_000);
    expect(holderIds(settle(state, T0 + 999))).toEqual(["a", "b"]);
    state = settle(state, T0 + 1_000);
    expect(holderIds(state)).toEqual(["a", "b", "late", "c"]);
    // Four grants in the log, but at T0 + 1000 only the two of that instant count.
    expect(toStatus(state, "api", "k", T0 + 1_000).window).toEqual({
      used: 2,
      resets_at: new Date(T0 + 2_000).toISOString(),
    });
  });

  it("counts a step served from the queue when its call acquires, holding one unit until then: calls stay spaced however late the step comes back", ({
    expect,
  }) => {
    const limit = config({ rate: { limit: 2, period_ms: 1_000 } });
    const step = (id: string, queue = true) => ask(id, limit, { lease_ms: 30_000, queue });
    let { state } = acquireAll(emptyState(), [step("a"), step("b"), step("c")], T0);
    expect(holderIds(state)).toEqual(["a", "b"]);
    state = settle(state, T0 + 1_000); // a and b leave the window: c is served, its use not counted yet
    expect(holderIds(state)).toEqual(["a", "b", "c"]);
    expect(toStatus(state, "api", "k", T0 + 1_000).window.used).toBe(0);
    // One unit is c's: one more call fits, not two.
    expect(acquire(state, step("d", false), T0 + 1_001).answer).toMatchObject({ granted: true });
    state = acquire(state, step("d", false), T0 + 1_001).state;
    expect(acquire(state, step("e", false), T0 + 1_002).answer).toMatchObject({ granted: false });
    // c's call comes back 600 ms after it was served: its use counts from then.
    state = acquire(state, step("c"), T0 + 1_600).state;
    expect(toStatus(state, "api", "k", T0 + 1_600).window.used).toBe(2);
    expect(acquire(state, step("e", false), T0 + 2_001).answer).toMatchObject({ granted: true }); // d left
    expect(acquire(state, step("e", false), T0 + 2_001).state.holders).toHaveLength(5);
    expect(blockedUntil(acquire(state, step("e", false), T0 + 2_001).state, T0 + 2_001)).toBe(T0 + 2_600);
  });

  it("releasing does not free room in the rate window", ({ expect }) => {
    const limit = config({ rate: { limit: 1, period_ms: 1_000 } });
    let { state } = acquireAll(emptyState(), [ask("a", limit)], T0);
    state = release(state, { holder_id: "a" }, T0 + 1).state;
    const again = acquire(state, ask("b", limit, { queue: false }), T0 + 2);
    expect(again.answer).toEqual({ granted: false, position: 0, retry_at: T0 + 1_000 });
  });
});

describe("tokens", () => {
  it("grants while the tokens reported in the period are under the limit", ({ expect }) => {
    const limit = config({ tokens: { limit: 1_000, period_ms: 60_000 } });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit)], T0);
    state = release(state, { holder_id: "a", tokens: 600 }, T0 + 10).state;
    expect(acquire(state, ask("c", limit), T0 + 20).answer).toMatchObject({ granted: true });
    state = release(state, { holder_id: "b", tokens: 500 }, T0 + 30_000).state;
    const blocked = acquire(state, ask("d", limit), T0 + 30_010);
    expect(blocked.answer).toEqual({ granted: false, position: 1, retry_at: T0 + 60_010 });
    expect(toStatus(blocked.state, "api", "k", T0 + 30_010)).toEqual({
      limit: "api",
      key: "k",
      in_use: 0,
      waiting: 1,
      window: { used: 1_100, resets_at: new Date(T0 + 90_000).toISOString() },
      paused_until: null,
    });
    expect(holderIds(settle(blocked.state, T0 + 60_010))).toEqual(["d"]);
  });

  it("shows the rate window beside the tokens window when the limit has both", ({ expect }) => {
    const limit = config({ rate: { limit: 5, period_ms: 1_000 }, tokens: { limit: 50, period_ms: 2_000 } });
    let { state } = acquireAll(emptyState(), [ask("a", limit)], T0);
    state = release(state, { holder_id: "a", tokens: 7 }, T0 + 100).state;
    const status = toStatus(state, "api", "k", T0 + 100);
    expect(status.window).toEqual({ used: 7, resets_at: new Date(T0 + 2_100).toISOString() });
    expect(status.rate_window).toEqual({ used: 1, resets_at: new Date(T0 + 1_000).toISOString() });
  });

  it("a limit with neither window answers used 0 and no reset", ({ expect }) => {
    const { state } = acquireAll(emptyState(), [ask("a", config({ concurrency: 1 }))], T0);
    expect(toStatus(state, "api", "k", T0)).toMatchObject({ in_use: 1, window: { used: 0, resets_at: null } });
    expect(toStatus(emptyState(), "api", "k", T0)).toEqual({
      limit: "api",
      key: "k",
      in_use: 0,
      waiting: 0,
      window: { used: 0, resets_at: null },
      paused_until: null,
    });
  });
});

describe("windows stay bounded", () => {
  it("drops entries older than the period", ({ expect }) => {
    const limit = config({ rate: { limit: 1_000, period_ms: 1_000 } });
    let state = emptyState();
    for (let index = 0; index < 10; index += 1) {
      state = acquire(state, ask(`h${index}`, limit), T0 + index * 100).state;
    }
    expect(state.rate).toHaveLength(10);
    state = acquire(state, ask("late", limit), T0 + 1_500).state;
    expect(state.rate.map((entry) => entry.at)).toEqual([600, 700, 800, 900, 1_500].map((at) => T0 + at));
  });

  it("uses close together share an entry: a busy window holds a few hundred entries, counting every use", ({
    expect,
  }) => {
    const period = 60_000;
    let entries: ReturnType<typeof addUse> = [];
    for (let index = 0; index < 20_000; index += 1) {
      entries = addUse(entries, T0 + index * 3, 1, period);
    }
    expect(entries.length).toBeLessThanOrEqual(WINDOW_BUCKETS + 1);
    expect(entries.reduce((sum, entry) => sum + entry.amount, 0)).toBe(20_000);
    // A shared entry takes the time of its newest use: no use leaves the window early.
    expect(entries.at(-1)?.at).toBe(T0 + 19_999 * 3);
  });

  it("a rate window never counts more grants than its limit", ({ expect }) => {
    const limit = config({ rate: { limit: 3, period_ms: 1_000 } });
    let state = emptyState();
    for (let index = 0; index < 20; index += 1) {
      state = acquire(state, ask(`h${index}`, limit, { queue: false }), T0 + index).state;
    }
    expect(state.rate.reduce((sum, entry) => sum + entry.amount, 0)).toBe(3);
  });
});

describe("leases", () => {
  it("a lapsed lease is reclaimed and its slot goes to the next waiter", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    let { state } = acquireAll(emptyState(), [ask("a", limit, { lease_ms: 1_000 }), ask("b", limit)], T0);
    expect(nextAlarmAt(state, T0)).toBe(T0 + 1_000);
    expect(holderIds(settle(state, T0 + 999))).toEqual(["a"]);
    state = settle(state, T0 + 1_000);
    expect(holderIds(state)).toEqual(["b"]);
    expect(state.notices.map((notice) => notice.holder_id)).toEqual(["b"]);
  });

  it("a grant whose run never heard of it goes back to the head of its priority when its lease lapses", ({
    expect,
  }) => {
    const limit = config({ concurrency: 1 });
    let { state } = acquireAll(
      emptyState(),
      [ask("a", limit), ask("b", limit, { lease_ms: 1_000 }), ask("c", limit), ask("urgent", limit, { priority: 9 })],
      T0,
    );
    expect(waiterIds(state)).toEqual(["urgent", "b", "c"]);
    state = settleNotice(release(state, { holder_id: "a" }, T0).state, "urgent", "accepted", T0);
    state = release(state, { holder_id: "urgent" }, T0 + 10).state;
    expect(holderIds(state)).toEqual(["b"]);
    state = settleNotice(state, "b", "failed", T0 + 20);
    state = acquire(state, ask("d", limit, { priority: 5 }), T0 + 30).state;
    // b's notice keeps failing past its lease (granted at T0 + 10 for 1 s): it waits again, ahead of c and d.
    state = withdraw(settle(state, T0 + 1_010), { run_id: "run-c" }, T0 + 1_010).state;
    expect(holderIds(state)).toEqual(["b"]);
    expect(state.holders[0]).toMatchObject({ granted_at: T0 + 1_010, lease_until: T0 + 2_010 });
    expect(state.notices.map((notice) => [notice.holder_id, notice.attempts])).toEqual([["b", 0]]);
    expect(waiterIds(state)).toEqual(["d"]);
  });

  it("a renewal extends the lease of a holder that holds and leaves out one that lapsed", ({ expect }) => {
    const limit = config({ concurrency: 2 });
    let { state } = acquireAll(
      emptyState(),
      [ask("a", limit, { lease_ms: 1_000 }), ask("b", limit, { lease_ms: 500 }), ask("run", limit)],
      T0,
    );
    const renewed = renew(state, { holder_ids: ["a", "b", "run"], lease_ms: 1_000 }, T0 + 600);
    expect(renewed.answer).toEqual({ held: ["a", "run"] });
    state = renewed.state;
    expect(state.holders.find((slot) => slot.id === "a")?.lease_until).toBe(T0 + 1_600);
    expect(state.holders.find((slot) => slot.id === "run")?.lease_until).toBeNull();
  });

  it("a run's slot (no lease) is never reclaimed", ({ expect }) => {
    const { state } = acquireAll(emptyState(), [ask("run:1", config({ concurrency: 1 }))], T0);
    expect(reclaim(state, T0 + 365 * 86_400_000)).toBe(state);
    expect(nextAlarmAt(state, T0)).toBeNull();
  });
});

describe("withdraw", () => {
  it("frees every slot and place of a run", ({ expect }) => {
    const limit = config({ concurrency: 2 });
    let { state } = acquireAll(
      emptyState(),
      [
        ask("x1", limit, { run_id: "x" }),
        ask("y1", limit, { run_id: "y" }),
        ask("x2", limit, { run_id: "x" }),
        ask("z1", limit, { run_id: "z" }),
      ],
      T0,
    );
    const out = withdraw(state, { run_id: "x" }, T0 + 1);
    expect(out.answer).toEqual({ released: 1, withdrawn: 1 });
    state = out.state;
    expect(holderIds(state)).toEqual(["y1", "z1"]);
    expect(waiterIds(state)).toEqual([]);
  });

  it("with holder ids, only those", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    const { state } = acquireAll(
      emptyState(),
      [ask("x1", limit, { run_id: "x" }), ask("x2", limit, { run_id: "x" }), ask("x3", limit, { run_id: "x" })],
      T0,
    );
    const out = withdraw(state, { run_id: "x", holder_ids: ["x3", "other"] }, T0 + 1);
    expect(out.answer).toEqual({ released: 0, withdrawn: 1 });
    expect(holderIds(out.state)).toEqual(["x1"]);
    expect(waiterIds(out.state)).toEqual(["x2"]);
  });

  it("drops the notice of a withdrawn grant", ({ expect }) => {
    const limit = config({ concurrency: 1 });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit)], T0);
    state = release(state, { holder_id: "a" }, T0).state;
    expect(state.notices).toHaveLength(1);
    state = withdraw(state, { run_id: "run-b" }, T0).state;
    expect(state.notices).toEqual([]);
    expect(state.holders).toEqual([]);
  });
});

describe("Retry-After", () => {
  it("pauses every grant until the time given, then serves the queue", ({ expect }) => {
    const limit = config({ concurrency: 5 });
    let { state } = acquireAll(emptyState(), [ask("a", limit)], T0);
    state = release(state, { holder_id: "a", retry_after_ms: 2_000 }, T0 + 100).state;
    const paused = acquire(state, ask("b", limit), T0 + 200);
    expect(paused.answer).toEqual({ granted: false, position: 1, retry_at: T0 + 2_100 });
    expect(toStatus(paused.state, "api", "k", T0 + 200).paused_until).toBe(new Date(T0 + 2_100).toISOString());
    expect(nextAlarmAt(paused.state, T0 + 200)).toBe(T0 + 2_100);
    state = settle(paused.state, T0 + 2_100);
    expect(holderIds(state)).toEqual(["b"]);
    expect(toStatus(state, "api", "k", T0 + 2_100).paused_until).toBeNull();
  });

  it("a shorter pause never shortens a longer one", ({ expect }) => {
    const limit = config({ concurrency: 5 });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit)], T0);
    state = release(state, { holder_id: "a", retry_after_ms: 5_000 }, T0).state;
    state = release(state, { holder_id: "b", retry_after_ms: 1_000 }, T0).state;
    expect(state.paused_until).toBe(T0 + 5_000);
  });
});

describe("grant notices", () => {
  function granted() {
    const limit = config({ concurrency: 1 });
    let { state } = acquireAll(emptyState(), [ask("a", limit), ask("b", limit), ask("c", limit)], T0);
    state = release(state, { holder_id: "a" }, T0).state;
    return state;
  }

  it("a notice being sent is not due again until its lease ends", ({ expect }) => {
    let state = granted();
    expect(noticesDue(state, T0, 24).map((notice) => notice.holder_id)).toEqual(["b"]);
    state = leaseNotices(state, ["b"], T0);
    expect(noticesDue(state, T0 + NOTICE_LEASE_MS - 1, 24)).toEqual([]);
    expect(noticesDue(state, T0 + NOTICE_LEASE_MS, 24)).toHaveLength(1);
  });

  it("accepted forgets the notice and keeps the slot", ({ expect }) => {
    const state = settleNotice(granted(), "b", "accepted", T0 + 1);
    expect(state.notices).toEqual([]);
    expect(holderIds(state)).toEqual(["b"]);
  });

  it("declined frees the slot at once and grants the next waiter", ({ expect }) => {
    const state = settleNotice(granted(), "b", "declined", T0 + 1);
    expect(holderIds(state)).toEqual(["c"]);
    expect(state.notices.map((notice) => notice.holder_id)).toEqual(["c"]);
  });

  it("failed is tried again with a growing backoff", ({ expect }) => {
    let state = settleNotice(granted(), "b", "failed", T0 + 1);
    expect(state.notices[0]).toMatchObject({ attempts: 1, due_at: noticeRetryAt(1, T0 + 1) });
    state = settleNotice(state, "b", "failed", T0 + 2);
    expect(state.notices[0]).toMatchObject({ attempts: 2, due_at: noticeRetryAt(2, T0 + 2) });
    expect(noticeRetryAt(2, 0)).toBeGreaterThan(noticeRetryAt(1, 0));
    expect(nextAlarmAt(state, T0 + 2)).toBe(noticeRetryAt(2, T0 + 2));
  });

  it("the holder's own acquire takes the grant: no notice is sent", ({ expect }) => {
    const state = granted();
    const again = acquire(state, ask("b", config({ concurrency: 1 })), T0 + 1);
    expect(again.answer).toEqual({ granted: true, lease_until: null });
    expect(again.state.notices).toEqual([]);
  });
});
