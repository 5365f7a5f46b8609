import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import type { TrellisApi } from "../../src/rpc.ts";
import { api, journal, registerWorkflow, start, uniqueId, verified, waitForRun } from "./helpers.ts";

/** A workflow whose one step waits for an event, with the step input `{ order_id }` from the run's input. */
const waiter = (id: string, implementation: Record<string, unknown>) => ({
  id,
  nodes: {
    only: {
      task: {
        steps: [
          {
            ref: "reply",
            action: { kind: "event", implementation },
            input_mapping: { order_id: { path: "$.input.order_id", optional: true } },
            output_mapping: { "output.got": "$" },
          },
        ],
      },
      output_mapping: { "output.got": "$.got" },
    },
  },
});

const waiting = (runId: string) =>
  waitForRun(runId, (run) => run.waiting_for?.some((wait: { kind: string }) => wait.kind === "event"));

describe("event steps", () => {
  it("take a signal sent before the wait began, and show what they wait for meanwhile", async ({ expect }) => {
    const id = uniqueId("signal-first");
    await registerWorkflow({
      id,
      nodes: {
        nap: { task: { steps: [{ ref: "nap", action: { kind: "sleep", implementation: { duration_ms: 300 } } }] } },
        ...Object.fromEntries(
          Object.entries(waiter(id, { name: "approved" }).nodes).map(([node, body]) => [
            node,
            { ...body, depends_on: ["nap"] },
          ]),
        ),
      },
    });
    const runId = await start(id);
    const sent = await api("POST", `/v1/runs/${runId}/signals`, { name: "approved", data: { by: "ops" }, id: "s-1" });
    expect(sent.status).toBe(202);
    expect(sent.json).toEqual({ events: [{ event_id: "s-1", duplicate: false }] });
    const again = await api("POST", `/v1/runs/${runId}/signals`, { name: "approved", data: { by: "ops" }, id: "s-1" });
    expect(again.json).toEqual({ events: [{ event_id: "s-1", duplicate: true }] });
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output.got).toMatchObject({ event_id: "s-1", name: "approved", data: { by: "ops" }, timed_out: false });
    const entries = await journal(runId);
    expect(entries.filter((entry) => entry.kind === "signal.received")).toHaveLength(1);
    expect(entries.find((entry) => entry.kind === "event.matched")?.body).toMatchObject({
      event_id: "s-1",
      source: "signal",
      data_sha256: expect.stringMatching(/^[0-9a-f]{64}$/),
    });
    expect(await verified(runId)).toBe(true);
  });

  it("take only an event their CEL match holds for, among others of the same name", async ({ expect }) => {
    const id = uniqueId("match");
    const name = uniqueId("order.paid");
    await registerWorkflow(waiter(id, { name, match: "event.data.order_id == input.order_id" }));
    const runId = await start(id, { input: { order_id: "B" } });
    const view = await waiting(runId);
    expect(view.waiting_for[0]).toMatchObject({ kind: "event", names: [name], node: "only", step: "reply" });
    const sent = await api("POST", "/v1/events", {
      events: [
        { name, data: { order_id: "A" } },
        { name: uniqueId("other"), data: { order_id: "B" } },
        { name, data: { order_id: "B", amount: 7 }, id: "paid-B" },
      ],
    });
    expect(sent.status).toBe(202);
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    expect(run.output.got).toMatchObject({ event_id: "paid-B", data: { order_id: "B", amount: 7 } });
  });

  it("find an event sent before the wait within lookback_ms, and not one older than that", async ({ expect }) => {
    const id = uniqueId("lookback");
    const name = uniqueId("report.ready");
    await registerWorkflow(
      waiter(id, { name, lookback_ms: 60_000, timeout_ms: 1_500, on_timeout: { default: "none" } }),
    );
    await api("POST", "/v1/events", { name, data: { url: "r1" }, id: uniqueId("early") });
    const run = await waitForRun(await start(id), undefined, 10_000);
    expect(run.output.got).toMatchObject({ data: { url: "r1" }, timed_out: false });
    const blind = uniqueId("blind");
    await registerWorkflow(waiter(blind, { name, timeout_ms: 500, on_timeout: { default: "none" } }));
    const missed = await waitForRun(await start(blind), undefined, 10_000);
    expect(missed.output.got).toEqual({ event_id: null, name: null, data: "none", received_at: null, timed_out: true });
  });

  it("time out as a failure, or with the default, journaled either way", async ({ expect }) => {
    const failing = uniqueId("timeout-fail");
    await registerWorkflow(waiter(failing, { name: uniqueId("never"), timeout_ms: 300 }));
    const failed = await waitForRun(await start(failing), undefined, 10_000);
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("event.timeout");
    const kinds = (await journal(failed.run_id)).map((entry) => entry.kind);
    expect(kinds).toEqual(expect.arrayContaining(["event.waiting", "event.timeout"]));
  });

  it("resume every run waiting on one name from one POST /v1/events", async ({ expect }) => {
    const id = uniqueId("fan-in");
    const name = uniqueId("go");
    await registerWorkflow(waiter(id, { name }));
    const runs = await Promise.all(Array.from({ length: 50 }, () => start(id)));
    await Promise.all(runs.map(waiting));
    // Registered at the hub: each run's wait has been answered (its registration holds).
    const sent = await api("POST", "/v1/events", { name, data: { n: 1 } });
    expect(sent.status).toBe(202);
    const ended = await Promise.all(runs.map((runId) => waitForRun(runId, undefined, 30_000)));
    expect(ended.map((run) => run.status)).toEqual(runs.map(() => "completed"));
    expect(new Set(ended.map((run) => run.output.got.event_id))).toEqual(new Set([sent.json.events[0].event_id]));
  });

  it("end when the run is cancelled, and refuse signals to a run that ended", async ({ expect }) => {
    const id = uniqueId("cancel-wait");
    await registerWorkflow(waiter(id, { name: uniqueId("late") }));
    const runId = await start(id);
    await waiting(runId);
    expect((await api("POST", `/v1/runs/${runId}/cancel`, {})).status).toBe(200);
    const run = await waitForRun(runId);
    expect(run.status).toBe("cancelled");
    expect((await journal(runId)).map((entry) => entry.kind)).toContain("event.cancelled");
    const late = await api("POST", `/v1/runs/${runId}/signals`, { name: "late" });
    expect(late.status).toBe(409);
    expect(late.json.error.code).toBe("run.terminal");
  });

  it("decline, in the run, an event the hub let through, and go on waiting for one the match takes", async ({
    expect,
  }) => {
    const id = uniqueId("declines");
    const name = uniqueId("doc.ready");
    await registerWorkflow({
      id,
      nodes: {
        only: {
          task: {
            steps: [
              {
                ref: "reply",
                action: { kind: "event", implementation: { name, match: "event.data.tag == input.tag" } },
                // Over the hubs' 16 KB: they keep the wait without its input and cannot filter.
                input_mapping: { tag: "$.input.tag", padding: "$.input.padding" },
              },
            ],
          },
        },
      },
    });
    const runId = await start(id, { input: { tag: "mine", padding: "p".repeat(20_000) } });
    await waiting(runId);
    // Whether each reaches the wait with its registration or after it, the run decides.
    await api("POST", "/v1/events", { name, data: { tag: "theirs" }, id: "e-theirs" });
    await api("POST", "/v1/events", { name, data: { tag: "mine" }, id: "e-mine" });
    const run = await waitForRun(runId, undefined, 10_000);
    expect(run.status).toBe("completed");
    const entries = await journal(runId);
    expect(entries.filter((entry) => entry.kind === "event.declined").map((entry) => entry.body.event_id)).toEqual([
      "e-theirs",
    ]);
    expect(entries.find((entry) => entry.kind === "event.matched")?.body.event_id).toBe("e-mine");
  });

  it("keep at most 100 signals and 262,144 characters of their data for a run with no wait to take them", async ({
    expect,
  }) => {
    const id = uniqueId("full");
    await registerWorkflow({
      id,
      nodes: {
        hold: { task: { steps: [{ ref: "nap", action: { kind: "sleep", implementation: { duration_ms: 60_000 } } }] } },
      },
    });
    const runId = await start(id);
    const hundred = Array.from({ length: 100 }, (_, n) => ({ name: "later", data: n }));
    expect((await api("POST", `/v1/runs/${runId}/signals`, { events: hundred })).status).toBe(202);
    const more = await api("POST", `/v1/runs/${runId}/signals`, { name: "later" });
    expect(more.status).toBe(409);
    expect(more.json.error.code).toBe("run.signals_full");
    const other = await start(id);
    // Under the blob threshold (64 KiB), so kept inline: a larger value is kept as its reference.
    const big = "x".repeat(60_000);
    const five = await api("POST", `/v1/runs/${other}/signals`, {
      events: [1, 2, 3, 4, 5].map(() => ({ name: "later", data: big })),
    });
    expect(five.status).toBe(409);
    expect((await api("POST", `/v1/runs/${other}/signals`, { name: "later", data: big })).status).toBe(202);
    await Promise.all([runId, other].map((run) => api("POST", `/v1/runs/${run}/cancel`, {})));
  });

  it("take signals over Workers RPC too, with errors as data", async ({ expect }) => {
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const id = uniqueId("rpc-signal");
    await registerWorkflow(waiter(id, { name: "go" }));
    const runId = await start(id);
    expect(await rpc.signalRun(runId, { name: "go", id: "g1", data: 5 })).toEqual({
      ok: true,
      value: { events: [{ event_id: "g1", duplicate: false }] },
    });
    expect((await waitForRun(runId)).output.got).toMatchObject({ event_id: "g1", data: 5 });
    expect(await rpc.signalRun(runId, { name: "go" })).toMatchObject({ ok: false, error: { code: "run.terminal" } });
    expect(await rpc.signalRun("run_nope", { name: "go" })).toMatchObject({ ok: false });
  });

  it("are refused at registration with a match that does not compile, and bad signals get a 400", async ({
    expect,
  }) => {
    const bad = await api("POST", "/v1/definitions", {
      workflows: [waiter(uniqueId("bad"), { name: "x", match: "event.data ==" })],
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.json)).toContain("implementation.match");
    const long = await api("POST", "/v1/definitions", {
      workflows: [waiter(uniqueId("long"), { name: "n".repeat(257) })],
    });
    expect(long.status).toBe(400);
    const id = uniqueId("bad-signal");
    await registerWorkflow(waiter(id, { name: "x" }));
    const runId = await start(id);
    const unknown = await api("POST", `/v1/runs/${runId}/signals`, { name: "x", dat: 1 });
    expect(unknown.status).toBe(400);
    expect(unknown.json.error.details).toContainEqual(expect.objectContaining({ path: "dat" }));
    await api("POST", `/v1/runs/${runId}/cancel`, {});
  });
});
