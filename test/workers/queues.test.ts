import { createExecutionContext, createMessageBatch, getQueueResult } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it, vi } from "vitest";
import type { DeadLetter, EventTriggers } from "../../schemas/events.ts";
import { consumeEvents } from "../../src/queue.ts";
import { DEAD_LETTER_PREFIX } from "../worker.ts";
import { register, start, uniqueId, waitForRun } from "./helpers.ts";

/** A one-step workflow; `extra` adds its triggers. */
const workflow = (id: string, step: Record<string, unknown>, extra: Record<string, unknown> = {}) => ({
  id,
  nodes: { only: { task: { steps: [step] }, output_mapping: { "output.got": "$.got" } } },
  ...extra,
});
const contextStep = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
const waitStep = (name: string) => ({
  ref: "reply",
  action: { kind: "event", implementation: { name } },
  output_mapping: { "output.got": "$" },
});

async function startedBy(name: string, eventId: string): Promise<EventTriggers> {
  const hub = env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name));
  let found: EventTriggers | undefined;
  await vi.waitUntil(
    async () => {
      const answer = await hub.triggersOf(name, eventId);
      found = answer.ok ? answer.value : undefined;
      return found !== undefined && found.matched && found.starts.every((one) => one.status !== "pending");
    },
    { timeout: 15_000, interval: 50 },
  );
  return found as EventTriggers;
}

/** The dead letters the test consumer of the dead-letter queue kept (test/worker.ts), once `until` holds of them. */
async function deadLetters(until: (letters: DeadLetter[]) => boolean): Promise<DeadLetter[]> {
  let letters: DeadLetter[] = [];
  await vi.waitUntil(
    async () => {
      const listed = await env.ARTIFACTS?.list({ prefix: DEAD_LETTER_PREFIX });
      letters = await Promise.all(
        (listed?.objects ?? []).map(async (object) => (await env.ARTIFACTS?.get(object.key))?.json<DeadLetter>()),
      ).then((all) => all.filter((letter): letter is DeadLetter => letter !== undefined));
      return until(letters);
    },
    { timeout: 15_000, interval: 100 },
  );
  return letters;
}

describe("the events queue", () => {
  it("turns a message into an event that resumes a waiting run and starts a triggered run", async ({ expect }) => {
    const name = uniqueId("queued.order");
    const [waiter, started] = [uniqueId("waiter"), uniqueId("on-queue")];
    await register({
      workflows: [
        workflow(waiter, waitStep(name)),
        workflow(started, contextStep, { triggers: [{ event: name, input: { order: "$.data.order" } }] }),
      ],
    });
    const runId = await start(waiter);
    await waitForRun(runId, (run) => run.waiting_for?.some((wait: { kind: string }) => wait.kind === "event"));
    await env.EVENTS_QUEUE?.send({ name, data: { order: 42 }, id: "q-1" });
    const resumed = await waitForRun(runId, undefined, 15_000);
    expect(resumed.status).toBe("completed");
    expect(resumed.output.got).toMatchObject({ event_id: "q-1", name, data: { order: 42 } });
    const { starts } = await startedBy(name, "q-1");
    expect(starts).toEqual([expect.objectContaining({ workflow: started, status: "started" })]);
    expect((await waitForRun(String(starts[0]?.run_id))).input).toEqual({ order: 42 });
  });

  it("sends a message that is not an event to the dead-letter queue with its reason and body", async ({ expect }) => {
    const marker = uniqueId("poison");
    await env.EVENTS_QUEUE?.send(`{ "name": "${marker}", oops`, { contentType: "text" });
    await env.EVENTS_QUEUE?.send({ name: "", data: marker });
    const letters = await deadLetters(
      (all) => all.filter((letter) => JSON.stringify(letter.body).includes(marker)).length >= 2,
    );
    const ours = letters.filter((letter) => JSON.stringify(letter.body).includes(marker));
    expect(ours).toHaveLength(2);
    expect(ours).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          reason: { code: "queue.invalid_message", message: "the message is text that is not JSON" },
          body: `{ "name": "${marker}", oops`,
        }),
        expect.objectContaining({
          reason: expect.objectContaining({ code: "events.invalid_request", message: expect.stringContaining("name") }),
          body: { name: "", data: marker },
        }),
      ]),
    );
  });

  it("acks each event and each poison message of a batch, and retries one the hubs cannot take", async ({ expect }) => {
    const name = uniqueId("batched");
    const batch = createMessageBatch("trellis-events", [
      { id: "m-ok", timestamp: Date.now(), attempts: 1, body: { name, data: { n: 1 }, id: "ok-1" } },
      { id: "m-bad", timestamp: Date.now(), attempts: 1, body: { name, data: 1, extra: true } },
      { id: "m-deep", timestamp: Date.now(), attempts: 1, body: { name, data: nested(200) } },
    ]);
    const ctx = createExecutionContext();
    await consumeEvents(batch, env);
    const result = await getQueueResult(batch, ctx);
    expect([...result.explicitAcks].sort()).toEqual(["m-bad", "m-deep", "m-ok"]);
    expect(result.retryMessages).toEqual([]);
    const letters = await deadLetters((all) => ["m-bad", "m-deep"].every((id) => all.some((l) => l.message_id === id)));
    expect(letters.find((letter) => letter.message_id === "m-bad")?.reason.message).toContain("extra");
    expect(letters.find((letter) => letter.message_id === "m-deep")?.reason.code).toMatch(/^request\./);
    const hub = env.EVENT_HUB.get(env.EVENT_HUB.idFromName(name));
    expect(await hub.triggersOf(name, "ok-1")).toEqual({ ok: true, value: { matched: true, starts: [] } });

    const unreachable = createMessageBatch("trellis-events", [
      { id: "m-later", timestamp: Date.now(), attempts: 1, body: { name, data: {}, id: "later" } },
    ]);
    const hubs = {
      idFromName: (hub: string) => env.EVENT_HUB.idFromName(hub),
      get: () => ({ accept: () => Promise.reject(new Error("Network connection lost.")) }),
    };
    await consumeEvents(unreachable, { ...env, EVENT_HUB: hubs } as unknown as Env);
    const retried = await getQueueResult(unreachable, createExecutionContext());
    expect(retried.explicitAcks).toEqual([]);
    expect(retried.retryMessages).toEqual([{ msgId: "m-later" }]);
  });
});

/** A value nested `depth` arrays deep: past the body limits. */
function nested(depth: number): unknown {
  let value: unknown = 0;
  for (let i = 0; i < depth; i += 1) {
    value = [value];
  }
  return value;
}
