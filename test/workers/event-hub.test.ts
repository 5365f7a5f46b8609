import { runDurableObjectAlarm, runInDurableObject } from "cloudflare:test";
import { MAX_BODY_BYTES } from "../../lib/json-limits.ts";
import { env, exports } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import {
  DELIVERY_LEASE_MS,
  EVENT_RETENTION_MS,
  hubName,
  MAX_DELIVERIES_PER_ROUND,
  MAX_LOOKBACK_CHARS,
  MAX_LOOKBACK_EVENTS,
  MAX_WAIT_INPUT_BYTES,
  planRound,
  registerWait,
  retryAt,
  sendEvents,
  shardOf,
  unregisterWait,
  waitHub,
  WAIT_GRACE_MS,
  type DeliveryTarget,
  type EventHub,
  type EventHubApi,
  type PendingDelivery,
} from "../../events/index.ts";
import type { EventDelivery, WaitRegistration } from "../../schemas/events.ts";
import { unwrap } from "../../lib/result.ts";
import type { TrellisApi } from "../../src/rpc.ts";
import { api, uniqueId } from "./helpers.ts";

/**
 * The event hubs (events/): one Durable Object per event name that keeps the
 * name's events for lookback and deduplication, the waits registered for it,
 * and delivers each accepted event to the waits it matches, in bounded rounds.
 */

function hubStub(name: string) {
  return env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name));
}

/** The hub's methods, their Results unwrapped (`raw`: as they answer). */
function hub(name: string) {
  const raw = hubStub(name) as unknown as EventHubApi;
  return {
    raw,
    accept: async (events: Parameters<EventHubApi["accept"]>[0]) => unwrap(await raw.accept(events)),
    register: async (registration: WaitRegistration) => unwrap(await raw.register(registration)),
    unregister: async (waitKey: string) => unwrap(await raw.unregister(waitKey)),
  };
}

/** Runs `fn` inside the live hub instance (its clock, its delivery target, its SQL). */
function insideHub<T>(name: string, fn: (instance: EventHub, state: DurableObjectState) => T | Promise<T>) {
  return runInDurableObject(hubStub(name), fn);
}

/** Sets the hub's clock `offsetMs` ahead of the real one. */
function shiftClock(name: string, offsetMs: number) {
  return insideHub(name, (instance) => {
    instance.now = () => Date.now() + offsetMs;
  });
}

/** Replaces where the hub delivers with a recorder that answers `consumed` (or what `answer` says). */
async function recordDeliveries(
  name: string,
  answer: (delivery: EventDelivery) => Promise<unknown> = async () => ({ outcome: "consumed" }),
) {
  const seen: { runId: string; delivery: EventDelivery }[] = [];
  let inFlight = 0;
  const stats = { maxInFlight: 0 };
  await insideHub(name, (instance) => {
    instance.target = (runId: string): DeliveryTarget => ({
      async deliverEvent(delivery) {
        inFlight += 1;
        stats.maxInFlight = Math.max(stats.maxInFlight, inFlight);
        try {
          await new Promise((resolve) => setTimeout(resolve, 5));
          seen.push({ runId, delivery });
          return await answer(delivery);
        } finally {
          inFlight -= 1;
        }
      },
    });
  });
  return { seen, stats };
}

function wait(overrides: Partial<WaitRegistration> & { wait_key: string; names: string[] }): WaitRegistration {
  return { run_id: `run_${"0".repeat(32)}`, since: Date.now(), expires_at: null, ...overrides };
}

function count(name: string, table: string): Promise<number> {
  return insideHub(name, (_instance, state) =>
    Number(state.storage.sql.exec<{ n: number }>(`SELECT COUNT(*) AS n FROM ${table}`).one().n),
  );
}

describe("accepting events", () => {
  it("stores each event once per id, and again once the first is past retention", async ({ expect }) => {
    const name = uniqueId("order.paid");
    const first = await hub(name).accept([
      { name, id: "a", data: { n: 1 } },
      { name, id: "a", data: { n: 2 } },
      { name, data: null },
    ]);
    expect(first.map((answer) => answer.duplicate)).toEqual([false, true, false]);
    expect(first[0]?.event_id).toBe("a");
    expect(first[2]?.event_id).toMatch(/^evt_[0-9a-f]{32}$/);
    expect(await hub(name).accept([{ name, id: "a" }])).toEqual([{ event_id: "a", duplicate: true }]);
    await shiftClock(name, EVENT_RETENTION_MS);
    expect(await hub(name).accept([{ name, id: "a" }])).toEqual([{ event_id: "a", duplicate: false }]);
    expect(await count(name, "events")).toBe(2);
  });

  it("gives up an event's blobs once the event is forgotten, and deletes those no run holds", async ({ expect }) => {
    const name = uniqueId("doc.uploaded");
    const sent = await api("POST", "/v1/events", { name, data: { text: `${uniqueId("t")}${"x".repeat(100_000)}` } });
    expect(sent.status).toBe(202);
    const eventId: string = sent.json.events[0].event_id;
    const held = await env.RUN_INDEX.prepare("SELECT digest FROM blob_holders WHERE run_id = ?")
      .bind(`event:${eventId}`)
      .all<{ digest: string }>();
    expect(held.results).toHaveLength(1);
    const digest = held.results[0]?.digest ?? "";
    const key = `sha256/${digest.slice("sha256:".length)}`;
    expect(await env.BLOBS.head(key)).not.toBeNull();

    // A day on, the hub's alarm prunes the event and gives up its holding: nobody else holds the blob.
    await shiftClock(name, EVENT_RETENTION_MS + 1);
    expect(await runDurableObjectAlarm(hubStub(name))).toBe(true);
    expect(await count(name, "events")).toBe(0);
    expect(await count(name, "blob_releases")).toBe(0);
    const after = await env.RUN_INDEX.prepare("SELECT 1 FROM blob_holders WHERE digest = ?").bind(digest).all();
    expect(after.results).toHaveLength(0);
    expect(await env.BLOBS.head(key)).toBeNull();
  });

  it("refuses a batch that is not events, naming the path of each problem", async ({ expect }) => {
    const name = uniqueId("bad");
    const refused = await hub(name).raw.accept([{ name, nope: 1 } as never]);
    expect(refused).toMatchObject({ ok: false, error: { code: "events.invalid_request" } });
    expect(!refused.ok && refused.error.details?.map((detail) => detail.path)).toEqual(["0"]);
  });
});

describe("registering a wait", () => {
  it("answers the retained events since `since` that match, oldest first, and not earlier or other ones", async ({
    expect,
  }) => {
    const name = uniqueId("shipment");
    await hub(name).accept([{ name, id: "before", data: { order: 1 } }]);
    await shiftClock(name, 1_000);
    const since = Date.now() + 500;
    await hub(name).accept([
      { name, id: "other-order", data: { order: 2 } },
      { name, id: "first", data: { order: 1 } },
      { name, id: "second", data: { order: 1, late: true } },
    ]);
    const answer = await hub(name).register(
      wait({ wait_key: "w1", names: [name], since, match: "event.data.order == input.order", input: { order: 1 } }),
    );
    expect(answer.events.map((event) => event.event_id)).toEqual(["first", "second"]);
    expect(answer.events[0]).toMatchObject({ name, data: { order: 1 } });
    expect(answer.events[0]?.received_at).toBeGreaterThanOrEqual(since);
    // The same key again: nothing changes, the same answer.
    const again = await hub(name).register(wait({ wait_key: "w1", names: [name], since: 0 }));
    expect(again.events.map((event) => event.event_id)).toEqual(["first", "second"]);
    expect(await count(name, "waits")).toBe(1);
  });

  it("answers at most the first MAX_LOOKBACK_EVENTS events", async ({ expect }) => {
    const name = uniqueId("tick");
    await hub(name).accept(Array.from({ length: 15 }, (_, i) => ({ name, id: `e${i}` })));
    const answer = await hub(name).register(wait({ wait_key: "w", names: [name], since: 0 }));
    expect(answer.events.map((event) => event.event_id)).toEqual(
      Array.from({ length: MAX_LOOKBACK_EVENTS }, (_, i) => `e${i}`),
    );
  });

  it("answers no more once the events' data passed MAX_LOOKBACK_CHARS, per hub and over a wait's names", async ({
    expect,
  }) => {
    const [a, b] = [uniqueId("big"), uniqueId("bigger")];
    const big = "x".repeat(400_000);
    for (const name of [a, b]) {
      for (const n of [1, 2, 3, 4]) {
        await hub(name).accept([{ name, id: `${name}-${n}`, data: big }]);
      }
    }
    const one = await hub(a).register(wait({ wait_key: "w", names: [a], since: 0 }));
    expect(one.events.map((event) => event.event_id)).toEqual([`${a}-1`, `${a}-2`, `${a}-3`]);
    const both = await registerWait(env, wait({ wait_key: "w2", names: [a, b], since: 0 }));
    // Each event's data is 400,002 characters of JSON: the third passes the cap, over both names.
    expect(both.map((event) => event.event_id)).toEqual([`${a}-1`, `${a}-2`, `${a}-3`]);
    expect(3 * 400_002).toBeGreaterThan(MAX_LOOKBACK_CHARS);
  });

  it("refuses a match that does not compile, and a malformed wait with its paths", async ({ expect }) => {
    const name = uniqueId("refused");
    const badMatch = await hub(name).raw.register(wait({ wait_key: "w", names: [name], match: "event.data ==" }));
    expect(badMatch).toMatchObject({ ok: false, error: { code: "event.invalid_match" } });
    expect(!badMatch.ok && badMatch.error.message).toMatch(/CEL syntax error/);
    const malformed = await hub(name).raw.register({ wait_key: "w", names: [] } as never);
    expect(malformed).toMatchObject({ ok: false, error: { code: "event.invalid_wait" } });
    expect(!malformed.ok && malformed.error.details?.map((detail) => detail.path)).toEqual([
      "run_id",
      "names",
      "since",
      "expires_at",
    ]);
    expect(await count(name, "waits")).toBe(0);
  });
});

describe("delivering to waiting runs", () => {
  it("offers each accepted event to the live waits it matches, and forgets a wait on its run's answer", async ({
    expect,
  }) => {
    const name = uniqueId("approved");
    const { seen } = await recordDeliveries(name);
    await hub(name).register(
      wait({ wait_key: "yes", run_id: "run_a", names: [name], match: "event.data.to == input.to", input: { to: 1 } }),
    );
    await hub(name).register(
      wait({ wait_key: "no", run_id: "run_b", names: [name], match: "event.data.to == input.to", input: { to: 2 } }),
    );
    await hub(name).register(wait({ wait_key: "any", run_id: "run_d", names: [name, "other"] }));
    const [accepted] = await hub(name).accept([{ name, data: { to: 1 } }]);
    await vi.waitUntil(() => seen.length === 2);
    expect(seen.map((call) => [call.runId, call.delivery.wait_key]).sort()).toEqual([
      ["run_a", "yes"],
      ["run_d", "any"],
    ]);
    expect(seen[0]?.delivery.event).toMatchObject({ event_id: accepted?.event_id, name, data: { to: 1 } });
    await vi.waitUntil(async () => (await count(name, "deliveries")) === 0);
    expect(await count(name, "waits")).toBe(1); // "no" still waits
  });

  it("offers an event to every wait registered before it, whatever the clocks say; its run decides", async ({
    expect,
  }) => {
    const name = uniqueId("skew");
    const { seen } = await recordDeliveries(name);
    // A run whose clock is ahead of the hub's (since in the hub's future), and one whose wait has timed out by
    // the hub's clock but whose run may not have seen it yet: both registered before the event, both offered it.
    await hub(name).register(wait({ wait_key: "ahead", run_id: "run_a", names: [name], since: Date.now() + 60_000 }));
    await hub(name).register(wait({ wait_key: "expiring", run_id: "run_b", names: [name], expires_at: Date.now() }));
    await hub(name).accept([{ name }]);
    await vi.waitUntil(() => seen.length === 2);
    expect(seen.map((call) => call.delivery.wait_key).sort()).toEqual(["ahead", "expiring"]);
  });

  it("takes a coordinator's answer inside a Result, and retries an error Result", async ({ expect }) => {
    const name = uniqueId("results");
    const { seen } = await recordDeliveries(name, async (delivery) =>
      delivery.wait_key === "ok"
        ? { ok: true, value: { outcome: "consumed" } }
        : { ok: false, error: { code: "run.busy", message: "later", retryable: true } },
    );
    await hub(name).register(wait({ wait_key: "ok", run_id: "run_a", names: [name] }));
    await hub(name).register(wait({ wait_key: "error", run_id: "run_b", names: [name] }));
    await hub(name).accept([{ name }]);
    await vi.waitUntil(() => seen.length === 2);
    await vi.waitUntil(async () => (await count(name, "waits")) === 1);
    const left = await insideHub(name, (_instance, state) =>
      state.storage.sql
        .exec<{ wait_key: string; attempts: number }>("SELECT wait_key, attempts FROM deliveries")
        .toArray(),
    );
    expect(left).toEqual([{ wait_key: "error", attempts: 1 }]);
  });

  it("treats a match that fails on an event, and a wait whose input was too large to keep, as candidates", async ({
    expect,
  }) => {
    const name = uniqueId("loose");
    const { seen } = await recordDeliveries(name);
    await hub(name).register(wait({ wait_key: "fails", run_id: "run_a", names: [name], match: "event.data.x > 1" }));
    const big = { blob: "x".repeat(MAX_WAIT_INPUT_BYTES) };
    await hub(name).register(
      wait({ wait_key: "big", run_id: "run_b", names: [name], match: "input.blob == 'y'", input: big }),
    );
    await hub(name).register(
      wait({ wait_key: "small", run_id: "run_c", names: [name], match: "input.blob == 'y'", input: { blob: "x" } }),
    );
    await hub(name).accept([{ name, data: "not an object" }]);
    await vi.waitUntil(() => seen.length === 2);
    expect(seen.map((call) => call.delivery.wait_key).sort()).toEqual(["big", "fails"]);
  });

  it("sends one event to many waits in rounds of at most MAX_DELIVERIES_PER_ROUND calls", async ({ expect }) => {
    const name = uniqueId("broadcast");
    const { seen, stats } = await recordDeliveries(name);
    const waits = 3 * MAX_DELIVERIES_PER_ROUND + 5;
    for (let i = 0; i < waits; i += 1) {
      await hub(name).register(wait({ wait_key: `w${i}`, run_id: `run_${i}`, names: [name] }));
    }
    await hub(name).accept([{ name, id: "go" }]);
    await vi.waitUntil(() => seen.length === waits, { timeout: 10_000 });
    expect(stats.maxInFlight).toBeLessThanOrEqual(MAX_DELIVERIES_PER_ROUND);
    expect(new Set(seen.map((call) => call.delivery.wait_key)).size).toBe(waits);
    await vi.waitUntil(async () => (await count(name, "waits")) === 0);
  });

  it("keeps a delivery that failed and sends it again after its backoff", async ({ expect }) => {
    const name = uniqueId("flaky");
    let failures = 1;
    const { seen } = await recordDeliveries(name, async () => {
      if (failures > 0) {
        failures -= 1;
        throw new Error("coordinator overloaded");
      }
      return { outcome: "not_waiting" };
    });
    await hub(name).register(wait({ wait_key: "w", run_id: "run_a", names: [name] }));
    await hub(name).accept([{ name }]);
    await vi.waitUntil(() => seen.length === 1);
    const row = await vi.waitUntil(() =>
      insideHub(
        name,
        (_instance, state) =>
          state.storage.sql.exec<{ attempts: number; due_at: number }>("SELECT * FROM deliveries").toArray()[0],
      ).then((found) => (found?.attempts === 1 ? found : undefined)),
    );
    expect(row.due_at).toBeGreaterThan(Date.now());
    expect(await count(name, "waits")).toBe(1);
    await shiftClock(name, retryAt(1, 0) + 1);
    expect(await runDurableObjectAlarm(hubStub(name))).toBe(true);
    await vi.waitUntil(() => seen.length === 2);
    await vi.waitUntil(async () => (await count(name, "waits")) === 0);
  });

  it("resends a round whose answers were lost once its lease ends", async ({ expect }) => {
    const name = uniqueId("lost");
    const { seen } = await recordDeliveries(name);
    await hub(name).register(wait({ wait_key: "w", run_id: "run_a", names: [name] }));
    // A round that leased the delivery and set the alarm for the lease's end, then died before any answer.
    await insideHub(name, async (_instance, state) => {
      await state.storage.setAlarm(Date.now() + DELIVERY_LEASE_MS);
      state.storage.sql.exec(
        "INSERT INTO events (event_id, name, data, received_at) VALUES ('e', ?, 'null', ?)",
        name,
        Date.now(),
      );
      state.storage.sql.exec("INSERT INTO deliveries VALUES ('w', 1, ?, 0)", Date.now() + DELIVERY_LEASE_MS);
    });
    expect(await runDurableObjectAlarm(hubStub(name))).toBe(true);
    expect(seen).toEqual([]);
    await shiftClock(name, DELIVERY_LEASE_MS);
    await runDurableObjectAlarm(hubStub(name));
    await vi.waitUntil(() => seen.length === 1);
    expect(seen[0]?.delivery).toMatchObject({ wait_key: "w", event: { event_id: "e" } });
  });
});

describe("unregistering and pruning", () => {
  it("an accept at a hub without waits sets only the alarm of its events' retention", async ({ expect }) => {
    const name = uniqueId("quiet");
    const before = Date.now();
    await hub(name).accept([{ name }]);
    const alarm = await insideHub(name, (_instance, state) => state.storage.getAlarm());
    expect(alarm).toBeGreaterThanOrEqual(before + EVENT_RETENTION_MS);
    expect(alarm).toBeLessThanOrEqual(Date.now() + EVENT_RETENTION_MS);
  });

  it("an unregistered wait gets nothing", async ({ expect }) => {
    const name = uniqueId("cancelled");
    const { seen } = await recordDeliveries(name);
    await hub(name).register(wait({ wait_key: "w", run_id: "run_a", names: [name] }));
    await hub(name).unregister("w");
    await hub(name).accept([{ name }]);
    expect(await count(name, "deliveries")).toBe(0);
    expect(seen).toEqual([]);
  });

  it("the alarm deletes events past retention and waits past expiry and grace", async ({ expect }) => {
    const name = uniqueId("old");
    const now = Date.now();
    await hub(name).accept([{ name, id: "old" }]);
    await hub(name).register(wait({ wait_key: "ends", names: [name], expires_at: now + 1_000 }));
    await hub(name).register(wait({ wait_key: "forever", names: [name] }));
    await shiftClock(name, 1_000 + WAIT_GRACE_MS);
    await runDurableObjectAlarm(hubStub(name));
    expect(await count(name, "waits")).toBe(1);
    expect(await count(name, "events")).toBe(1);
    await shiftClock(name, EVENT_RETENTION_MS);
    await runDurableObjectAlarm(hubStub(name));
    expect(await count(name, "events")).toBe(0);
    expect((await hub(name).register(wait({ wait_key: "late", names: [name], since: 0 }))).events).toEqual([]);
  });
});

describe("planning a delivery round", () => {
  const delivery = (wait_key: string, seq: number, due_at = 0, attempts = 0): PendingDelivery => ({
    wait_key,
    run_id: `run_${wait_key}`,
    seq,
    due_at,
    attempts,
  });

  it("sends each wait only its oldest event, oldest events first", ({ expect }) => {
    const plan = planRound([delivery("a", 3), delivery("b", 2), delivery("a", 1)], 10);
    expect(plan.send.map((d) => [d.wait_key, d.seq])).toEqual([
      ["a", 1],
      ["b", 2],
    ]);
    expect(plan.next).toBe(10 + DELIVERY_LEASE_MS);
  });

  it("sends at most maxCalls and says more is due now", ({ expect }) => {
    const pending = Array.from({ length: 5 }, (_, i) => delivery(`w${i}`, i));
    const plan = planRound(pending, 0, 3);
    expect(plan.send.map((d) => d.wait_key)).toEqual(["w0", "w1", "w2"]);
    expect(plan.next).toBe("now");
  });

  it("holds back a wait whose oldest delivery is not due, and names when the next one is", ({ expect }) => {
    const plan = planRound([delivery("a", 1, 500), delivery("a", 2, 0), delivery("b", 3, 700)], 100);
    expect(plan.send).toEqual([]);
    expect(plan.next).toBe(500);
    expect(planRound([], 0)).toEqual({ send: [], next: null });
  });

  it("backs off retries, doubling up to a cap", ({ expect }) => {
    expect([1, 2, 3].map((attempts) => retryAt(attempts, 0))).toEqual([1_000, 2_000, 4_000]);
    expect(retryAt(50, 0)).toBe(300_000);
  });
});

describe("POST /v1/events", () => {
  it("accepts one event or a batch of 100 and answers 202 with each id in order", async ({ expect }) => {
    const name = uniqueId("api");
    const one = await api("POST", "/v1/events", { name, data: { ok: true }, id: "x1" });
    expect(one.status).toBe(202);
    expect(one.json).toEqual({ events: [{ event_id: "x1", duplicate: false }] });
    const events = Array.from({ length: 100 }, (_, i) => ({ name: i % 2 === 0 ? name : `${name}-b`, id: `x${i}` }));
    const batch = await api("POST", "/v1/events", { events });
    expect(batch.status).toBe(202);
    expect(batch.json.events).toHaveLength(100);
    expect(batch.json.events.map((answer: { event_id: string }) => answer.event_id)).toEqual(events.map((e) => e.id));
    // x1 of `name` was sent before; x1 of the other name was not (ids are per name).
    expect(batch.json.events[1]).toEqual({ event_id: "x1", duplicate: false });
    const again = await api("POST", "/v1/events", {
      events: [
        { name, id: "x1" },
        { name, id: "x0" },
      ],
    });
    expect(again.json.events).toEqual([
      { event_id: "x1", duplicate: true },
      { event_id: "x0", duplicate: true },
    ]);
  });

  it("refuses bad bodies with a dotted code and the path of each problem", async ({ expect }) => {
    const cases: [unknown, number, string, string[]][] = [
      [{ name: "a", nmae: "b" }, 400, "events.invalid_request", ["nmae"]],
      [
        { events: [{ name: "a" }, { name: "b", dat: 1, idd: "x" }] },
        400,
        "events.invalid_request",
        ["events.1.dat", "events.1.idd"],
      ],
      [{ events: [{ name: "a" }, { name: "x".repeat(257) }] }, 400, "events.invalid_request", ["events.1.name"]],
      [{ events: [] }, 400, "events.invalid_request", ["events"]],
      [{ events: Array.from({ length: 101 }, () => ({ name: "a" })) }, 400, "events.invalid_request", ["events"]],
      [{ data: 1 }, 400, "events.invalid_request", ["name"]],
      [{ events: Array.from({ length: 25 }, (_, i) => ({ name: `n${i}` })) }, 400, "events.too_many_names", ["events"]],
    ];
    for (const [body, status, code, paths] of cases) {
      const response = await api("POST", "/v1/events", body);
      expect(response.status, JSON.stringify(body).slice(0, 60)).toBe(status);
      expect(response.json.error.code).toBe(code);
      expect(response.json.error.details.map((detail: { path: string }) => detail.path)).toEqual(paths);
    }
    const huge = await api("POST", "/v1/events", { name: "a", data: "x".repeat(MAX_BODY_BYTES) });
    expect(huge.status).toBe(413);
    expect(huge.json.error.code).toBe("request.too_large");
  });

  it("is sendEvents over Workers RPC, with errors as data", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const name = uniqueId("rpc");
    expect(await rpc.sendEvents({ name, id: "r1" })).toEqual({
      ok: true,
      value: { events: [{ event_id: "r1", duplicate: false }] },
    });
    const refused = await rpc.sendEvents({ name, extra: 1 });
    expect(refused).toMatchObject({ ok: false, error: { code: "events.invalid_request" } });
  });
});

describe("routing waits and events to hubs", () => {
  it("names shard 0 after the event and spreads runs over the shards", ({ expect }) => {
    expect(hubName("order.paid", 0)).toBe("order.paid");
    expect(hubName("order.paid", 3)).toBe("order.paid#3");
    const shards = new Set(Array.from({ length: 200 }, (_, i) => shardOf(`run_${i}`, 4)));
    expect([...shards].sort()).toEqual([0, 1, 2, 3]);
    expect(shardOf("run_x", 1)).toBe(0);
  });

  it("with shards, gives each event to every shard of its name and a wait to its run's shard", async ({ expect }) => {
    const name = uniqueId("sharded");
    const sharded: Env = { ...env, EVENT_HUB_SHARDS: "3" };
    expect(await sendEvents(sharded, { name, id: "s1", data: { n: 1 } })).toEqual({
      events: [{ event_id: "s1", duplicate: false }],
    });
    for (const shard of [0, 1, 2]) {
      expect(await count(hubName(name, shard), "events"), `shard ${shard}`).toBe(1);
    }
    // A duplicate only when every shard had it: one that lost it (an accept that failed there) takes it again.
    await insideHub(hubName(name, 2), (_instance, state) => state.storage.sql.exec("DELETE FROM events"));
    expect((await sendEvents(sharded, { name, id: "s1" })).events[0]?.duplicate).toBe(false);
    expect((await sendEvents(sharded, { name, id: "s1" })).events[0]?.duplicate).toBe(true);
    const runId = "run_0123456789abcdef0123456789abcdef";
    const registered = unwrap(
      await waitHub(sharded, name, runId).register(wait({ wait_key: "w", run_id: runId, names: [name], since: 0 })),
    );
    expect(registered.events.map((event) => event.event_id)).toEqual(["s1"]);
    expect(await count(hubName(name, shardOf(runId, 3)), "waits")).toBe(1);
  });

  it("registers a wait of several names at each name's hub and merges their lookback, oldest first", async ({
    expect,
  }) => {
    const [a, b] = [uniqueId("first"), uniqueId("second")];
    await shiftClock(b, -1_000); // b's events are a second older than a's
    await sendEvents(env, { name: b, id: "b1" });
    await sendEvents(env, {
      events: [
        { name: a, id: "a1" },
        { name: b, id: "b2" },
      ],
    });
    const registration = wait({ wait_key: "both", names: [a, b, a], since: 0 });
    const events = await registerWait(env, registration);
    expect(events.map((event) => event.event_id)).toEqual(["b1", "b2", "a1"]);
    expect([await count(a, "waits"), await count(b, "waits")]).toEqual([1, 1]);
    await unregisterWait(env, registration);
    expect([await count(a, "waits"), await count(b, "waits")]).toEqual([0, 0]);
  });

  it("refuses a shard count out of range as the operator's misconfiguration", async ({ expect }) => {
    await expect(sendEvents({ ...env, EVENT_HUB_SHARDS: "0" }, { name: "x" })).rejects.toMatchObject({
      code: "events.misconfigured",
    });
  });
});
