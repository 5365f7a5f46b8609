import { abortAllDurableObjects, runDurableObjectAlarm } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { LIVENESS_CHECK_MS } from "../../coordinator/decide.ts";
import { isJournalKind, parseJournalBody } from "../../schemas/journal-bodies.ts";
import { principalOf } from "../../src/auth.ts";
import {
  api,
  gateOpenOrSettled,
  hits,
  httpTarget,
  journal,
  register,
  start,
  stepsOf,
  TOKEN,
  uniqueId,
  verifyRun,
  waitForRun,
  untilHits,
  type Entry,
} from "./helpers.ts";
import { storedAlarm, stubOf } from "./durable-helpers.ts";

/**
 * Undo and compensation (docs/definitions.md, "Undo and compensation") end
 * to end: registered actions that declare their undos, runs through the real
 * coordinator and executor against the local HTTP target, every journal
 * verified offline.
 */

/** `make_item` "creates" `id` (the target echoes it back); its undo marks `<key>-<id>` on the target. */
function itemActions(prefix: string, undoUrl = `${httpTarget()}/mark/{{key}}-{{id}}`) {
  const make = uniqueId(`${prefix}-make`);
  const remove = uniqueId(`${prefix}-remove`);
  return {
    make,
    actions: [
      {
        id: remove,
        kind: "http",
        implementation: { method: "GET", url_template: undoUrl },
        execution: { retry_policy: { max_attempts: 1 } },
      },
      {
        id: make,
        kind: "http",
        implementation: { method: "GET", url_template: `${httpTarget()}/json?id={{id}}` },
        undo: {
          action: remove,
          input_mapping: { id: "$.output.body.id", key: "$.input.key" },
          retry: { max_attempts: 2, initial_delay_ms: 10 },
        },
      },
    ],
  };
}

/** A node whose task makes one item. */
const makeNode = (make: string, id: string, key: string, dependsOn: string[] = []) => ({
  task: { steps: [{ ref: "make", action: make, input_mapping: { id, key } }] },
  ...(dependsOn.length > 0 ? { depends_on: dependsOn } : {}),
});

/** A chain a → b → c of nodes that each make an item, then `extra` nodes after c. */
function chainWorkflow(id: string, make: string, key: string, extra: Record<string, unknown>, policy?: string) {
  return {
    id,
    ...(policy === undefined ? {} : { compensate: policy }),
    nodes: {
      a: makeNode(make, "a", key),
      b: makeNode(make, "b", key, ["a"]),
      c: makeNode(make, "c", key, ["b"]),
      ...extra,
    },
  };
}

/** A node after c whose task makes item d, then fails (the target answers 404). */
const failingNode = (make: string, key: string) => ({
  depends_on: ["c"],
  task: {
    steps: [
      { ref: "make", action: make, input_mapping: { id: "d", key } },
      {
        ref: "boom",
        action: { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } },
      },
    ],
  },
});

/** The `by` of what the test's API_TOKENS token causes. */
const envTokenBy = async () => ({
  token_id: `env:${(await principalOf(TOKEN, env.JOURNAL_SIGNING_KEY)).slice("token:".length)}`,
  name: "API_TOKENS",
});

const kinds = (entries: Entry[]) => entries.map((entry) => entry.kind);
const undoneNodes = (entries: Entry[], kind = "undo.completed") =>
  entries.filter((entry) => entry.kind === kind).map((entry) => entry.body.node);

/** Waits until the run's compensation has ended (its view says so). */
const compensated = (run: { compensation?: { status: string } }) =>
  run.compensation?.status === "completed" || run.compensation?.status === "failed";

/** The journal verifies offline, and every entry is a row of the schema table with a body that parses. */
async function expectVerified(
  runId: string,
  expect: (value: unknown) => { toMatchObject(v: unknown): void; toEqual(v: unknown): void },
) {
  expect(await verifyRun(runId)).toMatchObject({ ok: true, attested: true });
  const offTable = (await journal(runId)).filter(
    (entry) => !isJournalKind(entry.kind) || !parseJournalBody(entry.kind, entry.body).success,
  );
  expect(offTable).toEqual([]);
}

describe("undo and compensation", () => {
  it("runs the undos in reverse order of completion after a failure, and the run stays failed", async ({ expect }) => {
    const key = uniqueId("fail");
    const { make, actions } = itemActions("f");
    const workflow = chainWorkflow(uniqueId("saga"), make, key, { boom: failingNode(make, key) });
    await register({ actions, workflows: [workflow] });
    const runId = await start(workflow.id);
    const run = await waitForRun(runId, compensated);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "http.status", node: "boom" });
    expect(run.compensation).toMatchObject({ status: "completed", trigger: "on_failure" });
    expect(run.compensation.undos.map((undo: { node: string; status: string }) => [undo.node, undo.status])).toEqual([
      ["a", "completed"],
      ["b", "completed"],
      ["c", "completed"],
      ["boom", "completed"],
    ]);
    for (const id of ["a", "b", "c", "d"]) {
      expect(await hits(`${key}-${id}`)).toBe(1);
    }
    const entries = await journal(runId);
    // d was made by the task that failed: its undo was enqueued by the task.failed entry's step records.
    expect(undoneNodes(entries)).toEqual(["boom", "c", "b", "a"]);
    const completedA = entries.find((entry) => entry.kind === "task.completed" && entry.body.node === "a");
    expect(stepsOf(completedA)[0]?.undo).toMatchObject({ input: { id: "a", key } });
    // The run's attestation, then the compensation section, closed by a second attestation.
    const attests = entries.flatMap((entry, index) => (entry.kind === "attest" ? [index] : []));
    expect(attests).toHaveLength(2);
    expect(entries[(attests[0] ?? 0) + 1]?.kind).toBe("compensation.started");
    expect(entries[(attests[0] ?? 0) + 1]?.body).toEqual({ trigger: "on_failure", pending: [3, 2, 1, 0] });
    expect(kinds(entries).at(-2)).toBe("compensation.finished");
    expect(entries.at(-1)?.body).toMatchObject({
      outcome: "failed",
      compensation: { status: "completed", undone: 4, undos: 4 },
    });
    await expectVerified(runId, expect);
  });

  it("runs the undos after a cancel, in reverse order, and the run stays cancelled", async ({ expect }) => {
    const key = uniqueId("cancel");
    const { make, actions } = itemActions("c");
    const wait = {
      depends_on: ["c"],
      task: {
        steps: [
          {
            ref: "ask",
            action: {
              kind: "human",
              implementation: { prompt_template: "go on?", input_schema: { type: "object" } },
            },
          },
        ],
      },
    };
    const workflow = chainWorkflow(uniqueId("saga"), make, key, { wait }, "on_cancel");
    await register({ actions, workflows: [workflow] });
    const runId = await start(workflow.id);
    await waitForRun(runId, gateOpenOrSettled);
    expect((await api("POST", `/v1/runs/${runId}/cancel`, { reason: "changed my mind" })).status).toBe(200);
    const run = await waitForRun(runId, compensated);
    expect(run.status).toBe("cancelled");
    expect(run.compensation).toMatchObject({ status: "completed", trigger: "on_cancel" });
    const entries = await journal(runId);
    expect(undoneNodes(entries)).toEqual(["c", "b", "a"]);
    expect(entries.at(-1)?.body).toMatchObject({ outcome: "cancelled", compensation: { status: "completed" } });
    await expectVerified(runId, expect);
  });

  it("stops at an undo that fails for good, on record, and a redrive resumes from it", async ({ expect }) => {
    const key = uniqueId("stuck");
    // b's undo answers 404 once (not retryable), then 200: the first compensation stops at it.
    const { make, actions } = itemActions("s", `${httpTarget()}/flaky/{{key}}-{{id}}?fail={{fail}}&status=404`);
    const workflow = {
      id: uniqueId("saga"),
      nodes: {
        a: makeNode(make, "a", key),
        b: { ...makeNode(make, "b", key, ["a"]) },
        boom: failingNode(make, key),
      },
    };
    // Only b's undo fails: its key marks it (the other items' flaky keys pass with fail=0).
    workflow.nodes.boom.depends_on = ["b"];
    const actionsWithFail = actions.map((action) =>
      "undo" in action && action.undo
        ? {
            ...action,
            undo: {
              ...action.undo,
              input_mapping: { ...action.undo.input_mapping, fail: { expr: "output.body.id == 'b' ? 1 : 0" } },
            },
          }
        : action,
    );
    await register({ actions: actionsWithFail, workflows: [workflow] });
    const runId = await start(workflow.id);
    const run = await waitForRun(runId, compensated);
    expect(run.status).toBe("failed");
    expect(run.compensation.status).toBe("failed");
    expect(run.compensation.undos.map((undo: { node: string; status: string }) => [undo.node, undo.status])).toEqual([
      ["a", "enqueued"],
      ["b", "failed"],
      ["boom", "completed"],
    ]);
    let entries = await journal(runId);
    expect(undoneNodes(entries)).toEqual(["boom"]);
    expect(undoneNodes(entries, "undo.failed")).toEqual(["b"]);
    expect(entries.find((entry) => entry.kind === "undo.failed")?.body.error).toMatchObject({ code: "http.status" });
    expect(entries.at(-1)?.body).toMatchObject({ outcome: "failed", compensation: { status: "failed", undone: 1 } });
    expect(await hits(`${key}-a`)).toBe(0);
    await expectVerified(runId, expect);
    // A second compensation by hand is refused; a redrive resumes this one at b.
    expect((await api("POST", `/v1/runs/${runId}/compensate`)).json.error.code).toBe("run.terminal");
    expect((await api("POST", `/v1/runs/${runId}/redrive`)).status).toBe(200);
    const redriven = await waitForRun(runId, (view) => view.compensation?.status === "completed");
    expect(redriven.status).toBe("failed");
    entries = await journal(runId);
    expect(undoneNodes(entries)).toEqual(["boom", "b", "a"]);
    expect(entries.filter((entry) => entry.kind === "compensation.started").map((entry) => entry.body)).toEqual([
      { trigger: "on_failure", pending: [2, 1, 0] },
      // The redrive was asked for: who asked is its `by` (the API_TOKENS token's keyed digest).
      { trigger: "redrive", pending: [1, 0], by: await envTokenBy() },
    ]);
    await expectVerified(runId, expect);
    expect((await api("POST", `/v1/runs/${runId}/redrive`)).json.error.code).toBe("run.terminal");
  });

  it("a child run compensates itself, and its parent still holds its attestation", async ({ expect }) => {
    const key = uniqueId("child");
    const { make, actions } = itemActions("k");
    const child = chainWorkflow(uniqueId("saga"), make, key, { boom: failingNode(make, key) });
    const parent = { id: uniqueId("parent"), nodes: { sub: { workflow: child.id } } };
    await register({ actions, workflows: [child, parent] });
    const parentId = await start(parent.id);
    const parentRun = await waitForRun(parentId);
    expect(parentRun.status).toBe("failed");
    const childId = String(parentRun.children[0]?.run_id);
    const childRun = await waitForRun(childId, compensated);
    expect(childRun.compensation.status).toBe("completed");
    const finished = (await journal(parentId)).find((entry) => entry.kind === "child.finished");
    const attests = (await journal(childId)).filter((entry) => entry.kind === "attest");
    expect(finished?.body.attestation).not.toBeNull();
    expect(attests.map((entry) => ({ seq: entry.seq, hash: entry.hash }))).toContainEqual(finished?.body.attestation);
    await expectVerified(parentId, expect);
    await expectVerified(childId, expect);
  });

  it("records an undo whose mapping selects nothing with its error, and the compensation stops there", async ({
    expect,
  }) => {
    const key = uniqueId("unbuilt");
    const { make, actions } = itemActions("u");
    const broken = actions.map((action) =>
      "undo" in action && action.undo
        ? { ...action, undo: { ...action.undo, input_mapping: { id: "$.output.body.nothing", key: "$.input.key" } } }
        : action,
    );
    const workflow = { id: uniqueId("saga"), nodes: { a: makeNode(make, "a", key), boom: failingNode(make, key) } };
    workflow.nodes.boom.depends_on = ["a"];
    workflow.nodes.boom.task.steps.shift();
    await register({ actions: broken, workflows: [workflow] });
    const runId = await start(workflow.id);
    const run = await waitForRun(runId, compensated);
    expect(run.compensation.status).toBe("failed");
    const entries = await journal(runId);
    const made = entries.find((entry) => entry.kind === "task.completed" && entry.body.node === "a");
    expect(stepsOf(made)[0]?.undo).toMatchObject({ error: { code: "mapping.unresolved" } });
    expect(entries.find((entry) => entry.kind === "undo.failed")?.body).toMatchObject({
      token: null,
      error: { code: "mapping.unresolved", retryable: false },
    });
    expect(await hits(`${key}-a`)).toBe(0);
    await expectVerified(runId, expect);
  });

  it("compensates by hand a run whose policy is never, once", async ({ expect }) => {
    const key = uniqueId("manual");
    const { make, actions } = itemActions("m");
    const workflow = chainWorkflow(uniqueId("saga"), make, key, { boom: failingNode(make, key) }, "never");
    await register({ actions, workflows: [workflow] });
    const runId = await start(workflow.id);
    const failed = await waitForRun(runId);
    expect(failed.status).toBe("failed");
    expect(failed.compensation.status).toBe("none");
    // The view lists the controls the run accepts: a failed run with undos may be redriven or compensated.
    expect(failed.controls).toEqual(["redrive", "compensate"]);
    expect(kinds(await journal(runId)).at(-1)).toBe("attest");
    expect(await hits(`${key}-a`)).toBe(0);
    const started = await api("POST", `/v1/runs/${runId}/compensate`);
    expect(started.status).toBe(200);
    expect(started.json.compensation.trigger).toBe("manual");
    const run = await waitForRun(runId, compensated);
    expect(run.compensation.status).toBe("completed");
    // Compensated: neither a redrive (its compensation ran) nor another compensation is accepted.
    expect(run.controls).toEqual([]);
    expect(undoneNodes(await journal(runId))).toEqual(["boom", "c", "b", "a"]);
    await expectVerified(runId, expect);
    const again = await api("POST", `/v1/runs/${runId}/compensate`);
    expect(again.status).toBe(409);
    expect(again.json.error.message).toBe("the run's compensation has already completed");
  });

  it("refuses to compensate a run that completed, or one with nothing to undo", async ({ expect }) => {
    const key = uniqueId("done");
    const { make, actions } = itemActions("d");
    const workflow = chainWorkflow(uniqueId("saga"), make, key, {});
    await register({ actions, workflows: [workflow] });
    const runId = await start(workflow.id);
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.compensation.status).toBe("none");
    expect(run.controls).toEqual([]);
    const refused = await api("POST", `/v1/runs/${runId}/compensate`);
    expect(refused.status).toBe(409);
    expect(refused.json.error.code).toBe("run.terminal");

    const plain = { id: uniqueId("plain"), nodes: { boom: failingNode(make, key) } };
    plain.nodes.boom.depends_on = [];
    plain.nodes.boom.task.steps.shift();
    await register({ workflows: [plain] });
    const failedRun = await waitForRun(await start(plain.id));
    expect(failedRun.status).toBe("failed");
    expect(failedRun.compensation).toBeUndefined();
    expect(failedRun.controls).toEqual(["redrive"]);
    const nothing = await api("POST", `/v1/runs/${failedRun.run_id}/compensate`);
    expect(nothing.json.error).toMatchObject({ code: "run.terminal", message: "the run has nothing to undo" });
  });

  it("refuses an undo that would wait (a human, workflow or high-risk action) when it is registered", async ({
    expect,
  }) => {
    const response = await api("POST", "/v1/definitions", {
      actions: [
        {
          id: uniqueId("bad-undo"),
          kind: "http",
          implementation: { method: "GET", url_template: `${httpTarget()}/json` },
          undo: {
            action: { kind: "human", implementation: { prompt_template: "undo?", input_schema: {} } },
            input_mapping: { id: "$.nowhere[" },
          },
        },
      ],
    });
    expect(response.status).toBe(400);
    const paths = response.json.error.details.map((detail: { path: string }) => detail.path);
    expect(paths).toEqual(expect.arrayContaining(["actions.0.undo.action", "actions.0.undo.input_mapping.id"]));

    // A registered undo is resolved (and refused) when a run that uses it starts.
    const ask = uniqueId("ask");
    const make = uniqueId("make");
    const workflow = { id: uniqueId("saga"), nodes: { a: { task: { steps: [{ ref: "make", action: make }] } } } };
    await register({
      actions: [
        { id: ask, kind: "human", implementation: { prompt_template: "undo?", input_schema: {} } },
        {
          id: make,
          kind: "http",
          implementation: { method: "GET", url_template: `${httpTarget()}/json` },
          undo: { action: ask },
        },
      ],
      workflows: [workflow],
    });
    const refused = await api("POST", `/v1/workflows/${workflow.id}/runs`, { input: {} });
    expect(refused.status).toBe(400);
    expect(refused.json.error.code).toBe("definition.invalid_undo");
  });
});

describe("compensation needs no reader", () => {
  it("an undo dispatch lost in a restart fails its attempt as task.lost and is sent again by the alarm alone", async ({
    expect,
  }) => {
    const key = uniqueId("lost");
    // Each undo takes 1.5 s: the restart comes while the first one (c's) is in flight.
    const { make, actions } = itemActions("l", `${httpTarget()}/slow/{{key}}-{{id}}?ms=1500`);
    // boom only fails (it makes nothing): c's undo runs first.
    const boom = failingNode(make, key);
    boom.task.steps.shift();
    const workflow = chainWorkflow(uniqueId("saga"), make, key, { boom });
    await register({ actions, workflows: [workflow] });
    const runId = await start(workflow.id);
    await untilHits(`${key}-c`, 1);

    const alarm = await storedAlarm(runId);
    expect(alarm).not.toBeNull();
    expect(alarm ?? Number.POSITIVE_INFINITY).toBeLessThanOrEqual(Date.now() + LIVENESS_CHECK_MS);
    await abortAllDurableObjects();
    await runDurableObjectAlarm(stubOf(runId));
    // Sent again, and the rest of the compensation goes on, with nobody reading the run.
    await untilHits(`${key}-c`, 2);
    await untilHits(`${key}-a`, 1);

    const run = await waitForRun(runId, compensated);
    expect(run.compensation.status).toBe("completed");
    const entries = await journal(runId);
    expect(entries.filter((entry) => entry.kind === "undo.failed").map((entry) => entry.body.error.code)).toEqual([
      "task.lost",
    ]);
    expect(undoneNodes(entries)).toEqual(["c", "b", "a"]);
    await expectVerified(runId, expect);
  });
});
