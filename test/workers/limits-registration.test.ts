import { runInDurableObject } from "cloudflare:test";
import { describe, it } from "vitest";
import { RunStore } from "../../coordinator/storage.ts";
import type { RunSnapshot } from "../../schemas/resolved.ts";
import { stubOf } from "./durable-helpers.ts";
import { api, httpTarget, llmServer, register, start, uniqueId, waitForRun } from "./helpers.ts";

/** A model on the local LLM server, with `extra` fields (its limits). */
const model = (extra: Record<string, unknown> = {}) => ({
  provider: "openai-compatible",
  model_id: "test-model",
  base_url: `${llmServer()}/v1`,
  ...extra,
});

const prompt = { messages: [{ role: "user", template: "Summarize {{text}}" }] };

/** An inline http action with `extra` fields (its limits, its undo). */
const httpAction = (extra: Record<string, unknown> = {}) => ({
  kind: "http",
  implementation: { method: "GET", url_template: `${httpTarget()}/json` },
  ...extra,
});

/** A one-node workflow running one inline task of `steps`. */
const workflow = (id: string, steps: unknown[], extra: Record<string, unknown> = {}) => ({
  id,
  nodes: { main: { task: { steps } } },
  ...extra,
});

/** The details of a registration's 400 `definition.invalid`; fails when it registered. */
async function refused(bundle: Record<string, unknown>): Promise<{ path: string; code: string; message: string }[]> {
  const response = await api("POST", "/v1/definitions", bundle);
  if (response.status !== 400 || response.json.error.code !== "definition.invalid") {
    throw new Error(`expected 400 definition.invalid, got ${response.status}: ${JSON.stringify(response.json)}`);
  }
  return response.json.error.details;
}

/** The `{ path, code }` of each detail, sorted by path. */
const problems = (details: { path: string; code: string }[]) =>
  details.map(({ path, code }) => ({ path, code })).sort((a, b) => (a.path < b.path ? -1 : 1));

/** The snapshot a run's coordinator keeps, read from its storage. */
function frozenSnapshot(runId: string): Promise<RunSnapshot | undefined> {
  return runInDurableObject(stubOf(runId), (_instance, state) => new RunStore(state.storage.sql).load()?.snapshot);
}

describe("the limits kind", () => {
  it("registers like every kind: listed at GET /v1/limits, served at GET /v1/limits/{id} and by version", async ({
    expect,
  }) => {
    const id = uniqueId("lim");
    const created = await api("POST", "/v1/definitions", { limits: [{ id, concurrency: 2 }] });
    expect(created.status).toBe(201);
    expect(created.json.created).toEqual([{ kind: "limits", id, version: 1, existing: false }]);
    await register({ limits: [{ id, concurrency: 3, rate: { limit: 10, period_ms: 60_000 } }] });

    const latest = await api("GET", `/v1/limits/${id}`);
    expect(latest.status).toBe(200);
    expect(latest.json).toMatchObject({ kind: "limits", id, version: 2, definition: { concurrency: 3 } });
    expect((await api("GET", `/v1/limits/${id}/versions/1`)).json.definition).toEqual({ id, concurrency: 2 });
    const listed = await api("GET", "/v1/limits?limit=100");
    expect(listed.status).toBe(200);
    expect(listed.json.definitions.map((d: { id: string }) => d.id)).toContain(id);
  });

  it("refuses a limit with no budget, and a window out of range, with their paths", async ({ expect }) => {
    const details = await refused({
      limits: [
        { id: uniqueId("none") },
        { id: uniqueId("zero"), rate: { limit: 0, period_ms: 1000 } },
        { id: uniqueId("long"), tokens: { limit: 1000, period_ms: 86_400_001 } },
      ],
    });
    expect(details.map((detail) => detail.path).sort()).toEqual([
      "limits.0",
      "limits.1.rate.limit",
      "limits.2.tokens.period_ms",
    ]);
    expect(details[0]?.message).toMatch(/at least one of concurrency, rate, tokens/);
  });

  it("refuses more than 4 limits at one place, and one limit named twice", async ({ expect }) => {
    const uses = ["a", "b", "c", "d", "e"].map((name) => ({ limit: `${name}-lim` }));
    const details = await refused({
      workflows: [
        workflow(uniqueId("wf"), [{ ref: "s", action: httpAction() }], { limits: uses }),
        workflow(uniqueId("wf"), [{ ref: "s", action: httpAction({ limits: [{ limit: "x" }, { limit: "x@1" }] }) }]),
      ],
    });
    expect(problems(details)).toEqual(
      expect.arrayContaining([
        { path: "workflows.0.limits", code: "schema.too_big" },
        { path: "workflows.1.nodes.main.task.steps.0.action.limits.1.limit", code: "schema.custom" },
      ]),
    );
  });
});

describe("registration of limit uses", () => {
  it("refuses a limit that is neither registered nor in the bundle, wherever it is named, with each path", async ({
    expect,
  }) => {
    const missing = [{ limit: uniqueId("nope") }];
    const undoAction = httpAction({ limits: missing });
    const details = await refused({
      workflows: [
        workflow(
          uniqueId("wf"),
          [
            { ref: "inline", action: httpAction({ limits: missing, undo: { action: undoAction } }) },
            {
              ref: "agent",
              action: {
                kind: "llm",
                implementation: {
                  prompt,
                  model: model({ limits: missing }),
                  tools: [{ name: "fetch", action: httpAction({ limits: missing }) }],
                },
              },
            },
          ],
          { limits: missing },
        ),
      ],
      actions: [{ id: uniqueId("act"), ...httpAction({ limits: missing }) }],
      models: [{ id: uniqueId("model"), ...model({ limits: missing }) }],
    });
    const step = "workflows.0.nodes.main.task.steps";
    expect(problems(details)).toEqual(
      problems(
        [
          "actions.0.limits.0.limit",
          "models.0.limits.0.limit",
          "workflows.0.limits.0.limit",
          `${step}.0.action.limits.0.limit`,
          `${step}.0.action.undo.action.limits.0.limit`,
          `${step}.1.action.implementation.model.limits.0.limit`,
          `${step}.1.action.implementation.tools.0.action.limits.0.limit`,
        ].map((path) => ({ path, code: "definition.unknown_reference" })),
      ),
    );
    expect(details[0]?.message).toMatch(/no limit "nope-[0-9a-f]+" is registered or in this bundle/);
  });

  it("accepts a limit registered before (latest or pinned) or in the same bundle", async ({ expect }) => {
    const [stored, fresh] = [uniqueId("stored"), uniqueId("fresh")];
    await register({ limits: [{ id: stored, concurrency: 1 }] });
    const response = await api("POST", "/v1/definitions", {
      limits: [{ id: fresh, rate: { limit: 5, period_ms: 1000 } }],
      workflows: [
        workflow(uniqueId("wf"), [{ ref: "s", action: httpAction({ limits: [{ limit: `${stored}@1` }] }) }], {
          limits: [{ limit: stored }, { limit: fresh }],
        }),
      ],
    });
    expect(response.status).toBe(201);
    expect((await api("POST", "/v1/definitions", { limits: [{ id: stored, concurrency: 1 }] })).json.created).toEqual([
      { kind: "limits", id: stored, version: 1, existing: true },
    ]);
  });

  it("refuses a key that is not CEL, or that reads anything but input, with its path", async ({ expect }) => {
    const limit = uniqueId("lim");
    const details = await refused({
      limits: [{ id: limit, concurrency: 1 }],
      workflows: [
        workflow(uniqueId("wf"), [{ ref: "s", action: httpAction({ limits: [{ limit, key: "state.tenant" }] }) }], {
          limits: [{ limit, key: "input.tenant +" }],
        }),
      ],
      models: [{ id: uniqueId("model"), ...model({ limits: [{ limit, key: "item.tenant" }] }) }],
    });
    expect(problems(details)).toEqual(
      problems([
        { path: "models.0.limits.0.key", code: "definition.invalid_cel" },
        { path: "workflows.0.limits.0.key", code: "definition.invalid_cel" },
        { path: "workflows.0.nodes.main.task.steps.0.action.limits.0.key", code: "definition.invalid_cel" },
      ]),
    );
    expect(details.find((detail) => detail.path.endsWith("action.limits.0.key"))?.message).toMatch(
      /reads the variable "state".*the variables here are input/,
    );
  });

  it("refuses a tokens limit on a workflow or an action that is not llm, naming the path; an llm action or a model may have one", async ({
    expect,
  }) => {
    const tokens = uniqueId("tokens");
    const plain = uniqueId("plain");
    const uses = [{ limit: tokens }];
    const details = await refused({
      limits: [
        { id: tokens, tokens: { limit: 10_000, period_ms: 60_000 } },
        { id: plain, concurrency: 2 },
      ],
      workflows: [
        workflow(
          uniqueId("wf"),
          [
            { ref: "http", action: httpAction({ limits: [{ limit: plain }, { limit: tokens }] }) },
            {
              ref: "llm",
              action: { kind: "llm", limits: uses, implementation: { prompt, model: model({ limits: uses }) } },
            },
          ],
          { limits: uses },
        ),
      ],
      actions: [{ id: uniqueId("act"), ...httpAction({ limits: uses }) }],
    });
    expect(problems(details)).toEqual(
      problems([
        { path: "actions.0.limits.0.limit", code: "definition.invalid_limit" },
        { path: "workflows.0.limits.0.limit", code: "definition.invalid_limit" },
        { path: "workflows.0.nodes.main.task.steps.0.action.limits.1.limit", code: "definition.invalid_limit" },
      ]),
    );
    expect(details[0]?.message).toMatch(/tokens/);
    expect(details[0]?.message).toMatch(/llm/);
  });

  it("judges a pinned reference by the version it pins", async ({ expect }) => {
    const id = uniqueId("lim");
    await register({ limits: [{ id, concurrency: 1 }] });
    await register({ limits: [{ id, tokens: { limit: 100, period_ms: 1000 } }] });
    const pinned = await api("POST", "/v1/definitions", {
      workflows: [workflow(uniqueId("wf"), [{ ref: "s", action: httpAction() }], { limits: [{ limit: `${id}@1` }] })],
    });
    expect(pinned.status).toBe(201);
    const details = await refused({
      workflows: [workflow(uniqueId("wf"), [{ ref: "s", action: httpAction() }], { limits: [{ limit: id }] })],
    });
    expect(problems(details)).toEqual([{ path: "workflows.0.limits.0.limit", code: "definition.invalid_limit" }]);
  });
});

describe("a run's limits", () => {
  /** A bundle whose workflow waits at a gate, then calls an http action and an llm action, each under `limit`. */
  const gatedBundle = (wf: string, limit: string, workflowLimits: boolean) => ({
    workflows: [
      workflow(
        wf,
        [
          {
            ref: "ask",
            action: {
              kind: "human",
              implementation: { prompt_template: "Go?", input_schema: { type: "object" } },
            },
          },
          { ref: "fetch", action: httpAction({ limits: [{ limit, key: "input.tenant" }] }) },
          {
            ref: "sum",
            action: { kind: "llm", implementation: { prompt, model: model({ limits: [{ limit }] }) } },
            input_mapping: { text: "$.state.fetch.body" },
          },
        ],
        workflowLimits ? { limits: [{ limit, key: "input.tenant" }] } : {},
      ),
    ],
  });

  it("are frozen into its snapshot at start: the workflow's, an action's and a model's", async ({ expect }) => {
    const [wf, limit] = [uniqueId("wf"), uniqueId("lim")];
    await register({ limits: [{ id: limit, concurrency: 4 }], ...gatedBundle(wf, limit, true) });
    // Approval mode: the run is created (and its snapshot stored) but waits, drafting, to be approved.
    const runId = await start(wf, { input: { tenant: "acme" }, mode: "approval" });
    const snapshot = await frozenSnapshot(runId);
    const config = { id: limit, version: 1, concurrency: 4 };
    expect(snapshot?.limits).toEqual([{ limit: config, key: "input.tenant" }]);
    const steps = snapshot?.tasks.main?.steps ?? [];
    expect(steps[1]?.action.limits).toEqual([{ limit: config, key: "input.tenant" }]);
    const llm = steps[2]?.action;
    expect(llm?.kind === "llm" ? llm.implementation.model.limits : undefined).toEqual([{ limit: config }]);
    await api("POST", `/v1/runs/${runId}/cancel`);
  });

  it("keep the version a run started with: a later version of the limit changes only later runs", async ({
    expect,
  }) => {
    const [wf, limit] = [uniqueId("wf"), uniqueId("lim")];
    await register({ limits: [{ id: limit, concurrency: 4 }], ...gatedBundle(wf, limit, false) });
    const runId = await start(wf, { input: { tenant: "acme" } });
    await waitForRun(runId, (run) => run.status === "waiting");

    await register({ limits: [{ id: limit, concurrency: 1, rate: { limit: 2, period_ms: 1000 } }] });
    const running = await frozenSnapshot(runId);
    expect(running?.tasks.main?.steps[1]?.action.limits?.[0]?.limit).toEqual({ id: limit, version: 1, concurrency: 4 });
    const later = await frozenSnapshot(await start(wf, { input: { tenant: "acme" }, mode: "approval" }));
    expect(later?.tasks.main?.steps[1]?.action.limits?.[0]?.limit).toEqual({
      id: limit,
      version: 2,
      concurrency: 1,
      rate: { limit: 2, period_ms: 1000 },
    });
    await api("POST", `/v1/runs/${runId}/cancel`);
  });
});
