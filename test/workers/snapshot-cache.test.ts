import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import type { Catalog } from "../../catalog/index.ts";
import { ISOLATE_SNAPSHOTS, resolveSnapshot } from "../../catalog/snapshots.ts";
import { unwrap } from "../../lib/result.ts";
import { catalogStub, hold } from "./durable-helpers.ts";
import { api, uniqueId, waitForRun } from "./helpers.ts";

// The stub's generated RPC types are too deep for tsc over the snapshot's JSON types (as in src/service.ts).
const catalogApi = () => catalogStub() as unknown as Pick<Catalog, "resolveRun">;

/** A step that writes `value` (a CEL expression) to `v`; its task's output is `{ v }`. */
const step = (value: string) => ({
  ref: "s",
  action: { kind: "context", implementation: { updates: [{ path: "v", expr: value }] } },
  output_mapping: { "output.v": "$.v" },
});

/** A one-node workflow whose node runs `task` (an id, or an inline task) into `output.v`. */
const workflow = (id: string, task: unknown) => ({
  id,
  nodes: { main: { task, output_mapping: { "output.v": "$.v" } } },
});

async function register(bundle: Record<string, unknown>): Promise<void> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 201) {
    throw new Error(`registration failed: ${JSON.stringify(response.json)}`);
  }
}

/** Starts a run and waits for it: its workflow version and output. */
async function run(id: string, body: Record<string, unknown> = {}): Promise<{ version: number; output: unknown }> {
  const start = await api("POST", `/v1/workflows/${id}/runs`, body);
  if (start.status !== 201) {
    throw new Error(`start failed: ${start.status} ${JSON.stringify(start.json)}`);
  }
  const done = await waitForRun(start.json.run_id);
  return { version: done.workflow.version, output: done.output };
}

describe("run starts through the snapshot caches", () => {
  it("a start that pins a fully pinned workflow runs while the catalog object cannot answer", async ({ expect }) => {
    const id = uniqueId("pinned");
    await register({ workflows: [workflow(id, { steps: [step("41 + 1")] })] });
    const first = await run(id, { version: 1 });

    // Every event to the catalog object now waits: a start that needed it would never return.
    const catalog = hold(catalogStub());
    expect(await run(id, { version: 1 })).toEqual(first);
    expect(first).toEqual({ version: 1, output: { v: 42 } });
    // The shared layer alone (the Cache API) serves it too, as for another isolate of this deployment.
    expect([...ISOLATE_SNAPSHOTS.keys()].some((key) => key.endsWith(`/${id}/1`))).toBe(true);
    ISOLATE_SNAPSHOTS.clear();
    expect(await run(id, { version: 1 })).toEqual(first);
    catalog.release();
  });

  it("serves the snapshot the catalog resolves, unchanged", async ({ expect }) => {
    const id = uniqueId("same");
    const task = uniqueId("task");
    // A pinned reference must name a stored version: the task first.
    await register({ tasks: [{ id: task, steps: [step("'t1'")] }] });
    await register({ workflows: [workflow(id, `${task}@1`)] });
    const direct = unwrap(await catalogApi().resolveRun(id, 1));
    expect(direct.floating).toEqual([]);
    const resolved = await resolveSnapshot(env, id, 1);
    const fromIsolate = await resolveSnapshot(env, id, 1);
    ISOLATE_SNAPSHOTS.clear();
    const fromShared = await resolveSnapshot(env, id, 1);
    for (const snapshot of [resolved, fromIsolate, fromShared]) {
      expect(snapshot).toEqual(direct.snapshot);
    }
    // The preview's plan is computed from the snapshot: the same whichever layer served it.
    const plans = await Promise.all(
      [1, 2].map(async () => (await api("POST", `/v1/workflows/${id}/runs`, { version: 1, mode: "preview" })).json),
    );
    expect(plans[0]).toEqual(plans[1]);
  });

  it("a pinned workflow whose task is referenced as latest runs the task registered since (read-your-writes)", async ({
    expect,
  }) => {
    const id = uniqueId("floating");
    const task = uniqueId("task");
    await register({ tasks: [{ id: task, steps: [step("'t1'")] }], workflows: [workflow(id, task)] });
    expect(unwrap(await catalogApi().resolveRun(id, 1)).floating).toEqual([{ kind: "tasks", id: task, version: 1 }]);
    expect(await run(id, { version: 1 })).toEqual({ version: 1, output: { v: "t1" } });
    expect(await run(id, { version: 1 })).toEqual({ version: 1, output: { v: "t1" } });

    await register({ tasks: [{ id: task, steps: [step("'t2'")] }] });
    expect(await run(id, { version: 1 })).toEqual({ version: 1, output: { v: "t2" } });
  });

  it("a start that names no version runs the version registered just before it", async ({ expect }) => {
    const id = uniqueId("latest");
    await register({ workflows: [workflow(id, { steps: [step("1")] })] });
    expect(await run(id)).toEqual({ version: 1, output: { v: 1 } });
    expect(await run(id)).toEqual({ version: 1, output: { v: 1 } });

    await register({ workflows: [workflow(id, { steps: [step("2")] })] });
    expect(await run(id)).toEqual({ version: 2, output: { v: 2 } });
    // Pinning the old version still runs it, from cache or not.
    expect(await run(id, { version: 1 })).toEqual({ version: 1, output: { v: 1 } });
  });

  it("does not cache a failed resolution: a workflow registered after a 404 starts", async ({ expect }) => {
    const id = uniqueId("later");
    for (const body of [{}, { version: 1 }]) {
      const missing = await api("POST", `/v1/workflows/${id}/runs`, body);
      expect(missing.status).toBe(404);
      expect(missing.json.error.code).toBe("workflow.not_found");
    }
    await register({ workflows: [workflow(id, { steps: [step("3")] })] });
    expect(await run(id, { version: 1 })).toEqual({ version: 1, output: { v: 3 } });
    expect(await run(id)).toEqual({ version: 1, output: { v: 3 } });
  });

  it("a pinned child workflow starts from the cache while the catalog object cannot answer", async ({ expect }) => {
    const child = uniqueId("child");
    const parent = uniqueId("parent");
    await register({ workflows: [workflow(child, { steps: [step("7")] })] });
    await register({
      workflows: [{ id: parent, nodes: { sub: { workflow: `${child}@1`, output_mapping: { "output.v": "$.v" } } } }],
    });
    const first = await run(parent, { version: 1 });
    expect(first).toEqual({ version: 1, output: { v: 7 } });
    const catalog = hold(catalogStub());
    expect(await run(parent, { version: 1 })).toEqual(first);
    catalog.release();
  });
});
