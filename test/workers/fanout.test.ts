import { env } from "cloudflare:workers";
import { z } from "zod";
import { describe, it } from "vitest";
import { JOURNAL_PAGE } from "../../coordinator/index.ts";
import { MAX_FOREACH_ITEMS } from "../../coordinator/nodes.ts";
import { MAX_PURE_TASKS_PER_EVENT } from "../../coordinator/pure-tasks.ts";
import { verifyJournal } from "../../lib/journal/index.ts";
import { JournalEntry } from "../../schemas/journal.ts";
import { api, uniqueId, httpTarget, runWorkflow, httpStep } from "./helpers.ts";

interface Stats {
  maxDispatchesPerEvent: number;
  maxTasksPerCall: number;
  dispatches: number;
  pureTasks: number;
  maxPureTasksPerEvent: number;
}

async function statsOf(runId: string): Promise<Stats> {
  const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as { getStats(): Promise<Stats> };
  return stub.getStats();
}

/** Runs `workflow` alone to its end; a wide fan-out may take a while. */
const run = (workflow: Record<string, unknown>, input: unknown, timeoutMs = 60_000): Promise<any> =>
  runWorkflow(workflow, input, {}, timeoutMs);

const square = {
  steps: [
    {
      ref: "sq",
      action: { kind: "context", implementation: { updates: [{ path: "sq", expr: "input.n * input.n" }] } },
      output_mapping: { "output.sq": "$.sq" },
      input_mapping: { n: "$.input.n" },
    },
  ],
};

describe("foreach", () => {
  it(`fails the node with node.foreach_too_large, dispatching nothing, when items pass ${MAX_FOREACH_ITEMS}`, async ({
    expect,
  }) => {
    const result = await run(
      {
        id: uniqueId("huge"),
        nodes: { each: { foreach: { items: "$.input.items" }, input_mapping: { n: "$.item" }, task: square } },
      },
      { items: Array.from({ length: MAX_FOREACH_ITEMS + 1 }, (_, i) => i) },
    );
    expect(result.status).toBe("failed");
    expect(result.error).toMatchObject({ code: "node.foreach_too_large", node: "each" });
    expect((await statsOf(result.run_id)).dispatches).toBe(0);
  });

  it("fans out one invocation per item with item and index, collecting outputs in item order", async ({ expect }) => {
    const items = [5, 3, 9, 1, 7];
    const result = await run(
      {
        id: uniqueId("map"),
        nodes: {
          each: {
            foreach: { items: "$.input.items", max_parallel: 2 },
            input_mapping: { n: "$.item", position: "$.index" },
            task: {
              steps: [
                {
                  ref: "sq",
                  action: {
                    kind: "context",
                    implementation: {
                      updates: [
                        { path: "sq", expr: "input.n * input.n" },
                        { path: "at", expr: "input.position" },
                      ],
                    },
                  },
                  output_mapping: { "output.sq": "$.sq", "output.at": "$.at" },
                },
              ],
            },
            output_mapping: { "output.squares": "$.sq", "output.positions": "$.at" },
          },
        },
      },
      { items },
    );
    expect(result.status).toBe("completed");
    expect(result.output).toEqual({ squares: items.map((n) => n * n), positions: [0, 1, 2, 3, 4] });
    expect(result.nodes.each.items).toEqual({
      total: 5,
      pending: 0,
      running: 0,
      completed: 5,
      failed: 0,
      skipped: 0,
      cancelled: 0,
    });
  });

  it("completes a foreach over an empty array at once, and lets its dependents run", async ({ expect }) => {
    const result = await run(
      {
        id: uniqueId("empty"),
        nodes: {
          each: { foreach: { items: "$.input.items" }, task: square },
          after: { depends_on: ["each"], task: square, input_mapping: { n: 3 } },
        },
      },
      { items: [] },
    );
    expect(result.status).toBe("completed");
    expect(result.nodes.each.status).toBe("completed");
    expect(result.nodes.each.attempts).toBe(0);
    expect(result.nodes.after.status).toBe("completed");
  });

  it("evaluates when per item, skipping items whose condition is false", async ({ expect }) => {
    const result = await run(
      {
        id: uniqueId("when"),
        nodes: {
          each: {
            foreach: { items: "$.input.items" },
            when: "item % 2 == 1",
            input_mapping: { n: "$.item" },
            task: square,
            output_mapping: { "output.sq": "$.sq" },
          },
        },
      },
      { items: [1, 2, 3, 4] },
    );
    expect(result.status).toBe("completed");
    expect(result.output.sq).toEqual([1, null, 9, null]);
  });

  it("respects foreach max_parallel: never more items in flight than allowed", async ({ expect }) => {
    const key = uniqueId("par");
    const items = Array.from({ length: 6 }, (_, i) => i);
    const result = await run(
      {
        id: uniqueId("bounded"),
        nodes: {
          each: {
            foreach: { items: "$.input.items", max_parallel: 2 },
            input_mapping: { i: "$.item" },
            task: {
              steps: [httpStep("wait", `${httpTarget()}/slow/${key}?ms=100`)],
            },
          },
        },
      },
      { items },
    );
    expect(result.status).toBe("completed");
    const entries = (await api("GET", `/v1/runs/${result.run_id}/journal`)).json.entries as {
      kind: string;
      body: { node?: string };
    }[];
    let inFlight = 0;
    let peak = 0;
    for (const entry of entries) {
      inFlight += entry.kind === "task.dispatched" ? 1 : entry.kind === "task.completed" ? -1 : 0;
      peak = Math.max(peak, inFlight);
    }
    expect(peak).toBe(2);
  });

  it("repeats a node until its condition holds", async ({ expect }) => {
    const result = await run(
      {
        id: uniqueId("repeat"),
        nodes: {
          grow: {
            repeat: { until: "state.grow.n >= 5", max_iterations: 10 },
            input_mapping: { n: { expr: "has(state.grow) ? state.grow.n : 0" } },
            task: {
              steps: [
                {
                  ref: "inc",
                  action: { kind: "context", implementation: { updates: [{ path: "n", expr: "input.n + 2" }] } },
                  output_mapping: { "output.n": "$.n" },
                },
              ],
            },
          },
        },
      },
      {},
    );
    expect(result.status).toBe("completed");
    const entries = (await api("GET", `/v1/runs/${result.run_id}/journal`)).json.entries as { kind: string }[];
    expect(entries.filter((entry) => entry.kind === "node.repeat")).toHaveLength(2);
    expect(result.nodes.grow.attempts).toBe(3);
  });
});

describe("scale", () => {
  it("runs a 1,200-item foreach of pure tasks in the coordinator, at most 1,000 an event, the rest through the executor, outputs in item order", async ({
    expect,
  }) => {
    const items = Array.from({ length: 1200 }, (_, i) => i);
    const result = await run(
      {
        id: uniqueId("k1"),
        max_parallel: 200,
        nodes: {
          each: {
            foreach: { items: "$.input.items" },
            input_mapping: { n: "$.item" },
            task: square,
            output_mapping: { "output.sq": "$.sq" },
          },
        },
      },
      { items },
      120_000,
    );
    expect(result.status).toBe("completed");
    expect(result.output.sq).toEqual(items.map((n) => n * n));
    const stats = await statsOf(result.run_id);
    expect(stats.pureTasks + stats.dispatches).toBe(1200);
    expect(stats.maxPureTasksPerEvent).toBe(MAX_PURE_TASKS_PER_EVENT);
    // The dispatches left once an event has run its 1,000 go to the executor, within its bounds.
    expect(stats.dispatches).toBeGreaterThan(0);
    expect(stats.maxDispatchesPerEvent).toBeLessThanOrEqual(20);
    expect(stats.maxTasksPerCall).toBeLessThanOrEqual(6);
    // Over 2,000 entries: the API reads them from the coordinator in pages and returns them all.
    const entries = z.array(JournalEntry).parse((await api("GET", `/v1/runs/${result.run_id}/journal`)).json.entries);
    expect(entries.length).toBeGreaterThan(2 * JOURNAL_PAGE);
    expect(entries.map((entry) => entry.seq)).toEqual(entries.map((_, index) => index + 1));
    expect(entries.filter((entry) => entry.kind === "task.dispatched")).toHaveLength(1200);
    expect(entries.filter((entry) => entry.kind === "task.completed")).toHaveLength(1200);
    expect(entries.at(-1)?.kind).toBe("attest");
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect(await verifyJournal(entries, jwks, { requireAttestation: true })).toMatchObject({ ok: true });
  }, 180_000);

  it("completes a 300-item foreach of http tasks (waves sent before they are signed) within the same bounds, and its journal verifies", async ({
    expect,
  }) => {
    const key = uniqueId("wide-http");
    const items = Array.from({ length: 300 }, (_, i) => i);
    const task = {
      steps: [
        httpStep("call", `${httpTarget()}/json?n={{n}}&key=${key}`, { output_mapping: { "output.n": "$.body.n" } }),
      ],
    };
    const result = await run(
      {
        id: uniqueId("k3"),
        max_parallel: 300,
        nodes: {
          each: {
            foreach: { items: "$.input.items" },
            input_mapping: { n: "$.item" },
            task,
            output_mapping: { "output.n": "$.n" },
          },
        },
      },
      { items },
      120_000,
    );
    expect(result.status).toBe("completed");
    expect(result.output.n).toEqual(items);
    const stats = await statsOf(result.run_id);
    expect(stats.dispatches).toBe(300);
    expect(stats.maxDispatchesPerEvent).toBeLessThanOrEqual(20);
    expect(stats.maxTasksPerCall).toBeLessThanOrEqual(6);
    expect(((await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number }).count).toBe(300);
    const entries = (await api("GET", `/v1/runs/${result.run_id}/journal`)).json.entries;
    const jwks = (await api("GET", "/v1/journal-keys", undefined, null)).json;
    expect(await verifyJournal(entries, jwks, { requireAttestation: true })).toMatchObject({ ok: true });
  }, 180_000);

  it("runs a 200-node chain of pure tasks in the coordinator, each node's result the next one's input", async ({
    expect,
  }) => {
    const nodes: Record<string, unknown> = {};
    for (let i = 0; i < 200; i += 1) {
      nodes[`n${i}`] = {
        ...(i > 0
          ? { depends_on: [`n${i - 1}`], input_mapping: { n: `$.state.n${i - 1}.sq` } }
          : { input_mapping: { n: 1 } }),
        task: {
          steps: [
            {
              ref: "inc",
              action: { kind: "context", implementation: { updates: [{ path: "sq", expr: "input.n + 1" }] } },
              output_mapping: { "output.sq": "$.sq" },
            },
          ],
        },
        ...(i === 199 ? { output_mapping: { "output.last": "$.sq" } } : {}),
      };
    }
    const result = await run({ id: uniqueId("chain"), nodes }, {}, 120_000);
    expect(result.status).toBe("completed");
    expect(result.output.last).toBe(201);
    const entries = (await api("GET", `/v1/runs/${result.run_id}/journal`)).json.entries;
    expect(entries.at(-1).body.outcome).toBe("completed");
    expect(entries.filter((entry: { kind: string }) => entry.kind === "task.completed")).toHaveLength(200);
    const stats = await statsOf(result.run_id);
    expect(stats.pureTasks).toBe(200);
    expect(stats.dispatches).toBe(0);
  }, 180_000);

  it("completes a 60-node chain of http tasks, never over 20 executor calls per event nor 6 tasks per call", async ({
    expect,
  }) => {
    const key = uniqueId("chain-http");
    const nodes: Record<string, unknown> = {};
    for (let i = 0; i < 60; i += 1) {
      nodes[`n${i}`] = {
        ...(i > 0 ? { depends_on: [`n${i - 1}`] } : {}),
        task: { steps: [httpStep("call", `${httpTarget()}/json?n=${i}&key=${key}`)] },
      };
    }
    const result = await run({ id: uniqueId("chain-http"), nodes }, {}, 120_000);
    expect(result.status).toBe("completed");
    expect(((await (await fetch(`${httpTarget()}/hits/${key}`)).json()) as { count: number }).count).toBe(60);
    const stats = await statsOf(result.run_id);
    expect(stats.dispatches).toBe(60);
    // Each node leaves with its predecessor's result, inside the event whose call returned
    // it: one event carries the chain until its 20 calls are spent, never more.
    expect(stats.maxDispatchesPerEvent).toBe(20);
    expect(stats.maxTasksPerCall).toBe(1);
  }, 180_000);
});
