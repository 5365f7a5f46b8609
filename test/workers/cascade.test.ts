import { runInDurableObject } from "cloudflare:test";
import { describe, it, vi } from "vitest";
import { MAX_CLEANUP_CALLS_PER_EVENT } from "../../coordinator/cleanup.ts";
import { oneStepWorkflow, api, uniqueId, waitForRun, journal, verified } from "./helpers.ts";
import { stubOf } from "./durable-helpers.ts";

/**
 * The cancel cascade in real Durable Objects, without a restart: every child
 * is cancelled, the cancels respect the per-event budget, and the parent
 * keeps no alarm once they all confirmed. (recovery.test.ts covers the same
 * cascade interrupted by a restart.)
 */

describe("the cancel cascade", () => {
  it("cancels all 12 children of a cancelled parent, at most MAX_CLEANUP_CALLS_PER_EVENT cancels per event, and leaves the parent no alarm", async ({
    expect,
  }) => {
    const child = uniqueId("gated");
    const parent = uniqueId("twelve");
    const items = Array.from({ length: 12 }, (_, index) => index);
    const registered = await api("POST", "/v1/definitions", {
      workflows: [
        oneStepWorkflow(child, "ask", {
          ref: "ask",
          action: {
            kind: "human",
            implementation: { prompt_template: "go on?", input_schema: { type: "object" } },
          },
        }),
        {
          id: parent,
          nodes: {
            each: {
              foreach: { items: "$.input.items" },
              task: {
                steps: [
                  {
                    ref: "sub",
                    action: { kind: "workflow", implementation: { workflow: child, on_failure: "propagate" } },
                  },
                ],
              },
            },
          },
        },
      ],
    });
    expect(registered.status).toBe(201);
    const runId: string = (await api("POST", `/v1/workflows/${parent}/runs`, { input: { items } })).json.run_id;
    const children = await vi.waitUntil(
      async () => {
        const ids = (await journal(runId))
          .filter((entry) => entry.kind === "child.started")
          .map((entry) => String(entry.body.child_run_id));
        return ids.length === items.length ? ids : undefined;
      },
      { timeout: 15_000 },
    );

    expect((await api("POST", `/v1/runs/${runId}/cancel`)).json.status).toBe("cancelled");
    for (const childRunId of children) {
      expect((await waitForRun(childRunId)).status).toBe("cancelled");
    }
    const stats = (
      await (stubOf(runId) as unknown as { getStats(): Promise<{ maxCleanupCallsPerEvent: number }> }).getStats()
    ).maxCleanupCallsPerEvent;
    // Twelve cancels went out over two wakes (10, then 2): never all twelve from one event.
    expect(stats).toBe(MAX_CLEANUP_CALLS_PER_EVENT);
    await vi.waitUntil(
      async () => (await runInDurableObject(stubOf(runId), (_instance, state) => state.storage.getAlarm())) === null,
      { timeout: 10_000 },
    );

    const requested = (await journal(runId))
      .filter((entry) => entry.kind === "child.cancel_requested")
      .map((entry) => entry.body.child_run_id);
    expect(new Set(requested)).toEqual(new Set(children));
    expect(await verified(runId)).toBe(true);
    for (const childRunId of children) {
      expect(await verified(childRunId)).toBe(true);
    }
  });
});
