import { exports } from "cloudflare:workers";
import { describe, it } from "vitest";
import type { TrellisApi } from "../../src/rpc.ts";
import { api, httpTarget, journal, register, start, uniqueId, waitForRun } from "./helpers.ts";

/** A workflow of one step that writes `v`: it completes at once. */
const quick = (id: string) => ({
  id,
  nodes: {
    main: {
      task: {
        steps: [{ ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } }],
      },
    },
  },
});

describe("a run's priority", () => {
  it("is what its start said, 0 to 9, and 5 when it said none", async ({ expect }) => {
    const id = uniqueId("prio");
    await register({ workflows: [quick(id)] });
    for (const [body, priority] of [
      [{}, 5],
      [{ priority: 9 }, 9],
      [{ priority: 0 }, 0],
      [{ priority: 5 }, 5],
    ] as const) {
      const run = await waitForRun(await start(id, { input: {}, ...body }));
      expect(run.status).toBe("completed");
      expect(run.priority, JSON.stringify(body)).toBe(priority);
      // The signed record of its start says a priority that is not the default.
      const created = (await journal(run.run_id)).find((entry) => entry.kind === "run.created");
      expect(created?.body.priority).toBe(priority === 5 ? undefined : priority);
    }
  });

  it("refuses a priority that is not an integer from 0 to 9 with 400 and its path", async ({ expect }) => {
    const id = uniqueId("prio");
    await register({ workflows: [quick(id)] });
    for (const priority of [10, -1, 2.5, "high", null]) {
      const response = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, priority });
      expect(response.status, String(priority)).toBe(400);
      expect(response.json.error.code).toBe("run.invalid_request");
      expect(response.json.error.details.map((detail: { path: string }) => detail.path)).toEqual(["priority"]);
    }
  });

  it("is part of an idempotent start: the same key with another priority is a conflict", async ({ expect }) => {
    const id = uniqueId("prio");
    await register({ workflows: [quick(id)] });
    const key = uniqueId("key");
    const first = await api("POST", `/v1/workflows/${id}/runs`, { idempotency_key: key, priority: 7 });
    expect(first.status).toBe(201);
    const again = await api("POST", `/v1/workflows/${id}/runs`, { idempotency_key: key, priority: 7 });
    expect(again.status).toBe(200);
    expect(again.json.run_id).toBe(first.json.run_id);
    const other = await api("POST", `/v1/workflows/${id}/runs`, { idempotency_key: key, priority: 2 });
    expect(other.status).toBe(409);
    // A start that says 5 is the same request as one that says nothing.
    const plain = uniqueId("key");
    const unsaid = await api("POST", `/v1/workflows/${id}/runs`, { idempotency_key: plain });
    const said = await api("POST", `/v1/workflows/${id}/runs`, { idempotency_key: plain, priority: 5 });
    expect([unsaid.status, said.status]).toEqual([201, 200]);
  });

  it("is taken by a start over Workers RPC and by a plan", async ({ expect }) => {
    const id = uniqueId("prio");
    const action = uniqueId("get");
    await register({
      workflows: [quick(id)],
      actions: [{ id: action, kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/json` } }],
    });
    const rpc = exports.TrellisApi as unknown as TrellisApi;
    const started = await rpc.startRun(id, { input: {}, priority: 8 });
    const runId = started.ok ? (started.value.run_id ?? "") : "";
    expect((await waitForRun(runId)).priority).toBe(8);
    const refused = await rpc.startRun(id, { input: {}, priority: 12 });
    expect(refused.ok ? null : refused.error.details?.map((detail) => detail.path)).toEqual(["priority"]);

    const plan = await api("POST", "/v1/plans", { plan: { steps: [{ tool: action }] }, tools: [action], priority: 1 });
    expect(plan.status).toBe(201);
    expect((await waitForRun(plan.json.run_id)).priority).toBe(1);
    const bad = await api("POST", "/v1/plans", { plan: { steps: [{ tool: action }] }, tools: [action], priority: 11 });
    expect(bad.status).toBe(400);
    expect(bad.json.error.details.map((detail: { path: string }) => detail.path)).toEqual(["priority"]);
  });

  it("is inherited by its child runs: a sub-workflow node's and a workflow step's", async ({ expect }) => {
    const [parent, child] = [uniqueId("parent"), uniqueId("child")];
    await register({
      workflows: [
        quick(child),
        {
          id: parent,
          nodes: {
            node: { workflow: child },
            step: {
              task: { steps: [{ ref: "w", action: { kind: "workflow", implementation: { workflow: child } } }] },
            },
          },
        },
      ],
    });
    for (const priority of [2, 5]) {
      const run = await waitForRun(await start(parent, { input: {}, priority }));
      expect(run.status).toBe("completed");
      expect(run.children).toHaveLength(2);
      for (const { run_id } of run.children as { run_id: string }[]) {
        expect((await waitForRun(run_id)).priority).toBe(priority);
      }
    }
  });
});
