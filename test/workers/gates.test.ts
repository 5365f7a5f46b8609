import { evictDurableObject } from "cloudflare:test";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { MAX_CHILD_STARTS_PER_EVENT } from "../../coordinator/waits.ts";
import {
  oneStepWorkflow,
  riskyStep,
  registerWorkflow,
  api,
  uniqueId,
  waitForRun,
  httpTarget,
  hits,
  register,
  start,
  journal,
  verified,
  httpStep,
  gateOpenOrSettled,
} from "./helpers.ts";

const contextStep = (ref: string, path: string, expr: string) => ({
  ref,
  action: { kind: "context", implementation: { updates: [{ path, expr }] } },
});
const humanAction = (extra: Record<string, unknown> = {}) => ({
  kind: "human",
  implementation: {
    prompt_template: "Publish {{title}}?",
    input_schema: {
      type: "object",
      required: ["ok"],
      properties: { ok: { type: "boolean" }, note: { type: "string" } },
    },
    ...extra,
  },
});

describe("human gates", () => {
  it("waits at a gate, rejects an answer that breaks input_schema, accepts a valid one, and completes with it", async ({
    expect,
  }) => {
    const id = uniqueId("review");
    await registerWorkflow({
      id,
      nodes: {
        draft: {
          task: {
            steps: [
              {
                ...contextStep("write", "title", "'Hello ' + input.name"),
                output_mapping: { "output.title": "$.title" },
              },
            ],
          },
        },
        approve: {
          depends_on: ["draft"],
          input_mapping: { title: "$.state.draft.title" },
          task: {
            steps: [
              {
                ref: "ask",
                action: humanAction(),
                output_mapping: { "output.answer": "$.response", "output.by": "$.responder" },
              },
            ],
          },
        },
        publish: {
          depends_on: ["approve"],
          input_mapping: { ok: "$.state.approve.answer.ok" },
          task: {
            steps: [
              {
                ...contextStep("go", "published", "input.ok"),
                output_mapping: { "output.published": "$.published" },
              },
            ],
          },
          output_mapping: { "output.published": "$.published" },
        },
      },
      output_schema: { type: "object", required: ["published"] },
    });
    const runId = await start(id, { input: { name: "world" } });
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    expect(waiting.status).toBe("waiting");
    expect(waiting.nodes.approve.status).toBe("waiting");
    const gates = (await api("GET", `/v1/runs/${runId}/gates`)).json.gates;
    expect(gates).toHaveLength(1);
    expect(gates[0]).toMatchObject({
      kind: "input",
      node: "approve",
      step: "ask",
      prompt: "Publish Hello world?",
      status: "open",
      expires_at: null,
    });
    const gateId = gates[0].gate_id;

    const bad = await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: "yes" } });
    expect(bad.status).toBe(400);
    expect(bad.json.error.code).toBe("gate.invalid_response");
    expect(bad.json.error.details[0].path).toBe("response.ok");

    const answered = await api("POST", `/v1/runs/${runId}/gates/${gateId}`, {
      response: { ok: true, note: "ship it" },
      responder: "ada@example.com",
    });
    expect(answered.status).toBe(200);
    expect(answered.json).toMatchObject({
      status: "answered",
      responder: "ada@example.com",
      response: { ok: true, note: "ship it" },
    });
    const again = await api("POST", `/v1/runs/${runId}/gates/${gateId}`, { response: { ok: false } });
    expect(again.status).toBe(409);
    expect(again.json.error.code).toBe("gate.answered");

    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ published: true });
    const kinds = (await journal(runId)).map((entry) => entry.kind);
    expect(kinds).toContain("gate.opened");
    expect(kinds).toContain("gate.answered");
    expect(await verified(runId)).toBe(true);
  });

  it("resumes a task at the step after its gate with the state the earlier steps set", async ({ expect }) => {
    const id = uniqueId("midgate");
    await registerWorkflow({
      id,
      nodes: {
        only: {
          task: {
            steps: [
              contextStep("before", "n", "input.n * 10"),
              { ref: "ask", action: humanAction(), input_mapping: { title: "$.state.before.n" } },
              {
                ...contextStep("after", "sum", "input.before + (input.ok ? 1 : 0)"),
                input_mapping: { before: "$.state.before.n", ok: "$.state.ask.response.ok" },
                output_mapping: { "output.sum": "$.sum" },
              },
            ],
          },
          output_mapping: { "output.sum": "$.sum" },
        },
      },
    });
    const runId = await start(id, { input: { n: 4 } });
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    expect(waiting.gates[0].prompt).toBe("Publish 40?");
    const answeredAt = Date.now();
    await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, { response: { ok: true } });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ sum: 41 });
    const entries = await journal(runId);
    const dispatches = entries.filter((entry) => entry.kind === "task.dispatched");
    expect(dispatches.map((entry) => entry.body.resume ?? null)).toEqual([null, "after"]);
    expect(Date.parse(dispatches[1]?.at ?? "") - answeredAt).toBeLessThan(5_000);
    expect(run.nodes.only.attempts).toBe(1);
  });

  it("completes with the default answer when a gate expires with on_timeout default, and fails the run when it says fail", async ({
    expect,
  }) => {
    const withDefault = uniqueId("expire-default");
    const withFail = uniqueId("expire-fail");
    const workflow = (id: string, onTimeout: unknown) => ({
      id,
      nodes: {
        only: {
          task: {
            steps: [
              {
                ref: "ask",
                action: humanAction({ timeout_ms: 150, on_timeout: onTimeout }),
                output_mapping: { "output.answer": "$.response" },
              },
            ],
          },
          output_mapping: { "output.answer": "$.answer" },
        },
      },
    });
    await register({
      workflows: [
        workflow(withDefault, { default: { ok: false, note: "nobody answered" } }),
        workflow(withFail, "fail"),
      ],
    });
    const defaulted = await waitForRun(await start(withDefault), undefined, 10_000);
    expect(defaulted.status).toBe("completed");
    expect(defaulted.output).toEqual({ answer: { ok: false, note: "nobody answered" } });
    expect(defaulted.gates[0]).toMatchObject({ status: "expired" });
    const failed = await waitForRun(await start(withFail), undefined, 10_000);
    expect(failed.status).toBe("failed");
    expect(failed.error.code).toBe("gate.expired");
    expect(await verified(failed.run_id)).toBe(true);
  });
});

describe("approvals for high-risk actions", () => {
  const riskyWorkflow = (id: string, key: string) => ({
    id,
    nodes: {
      only: {
        task: {
          steps: [riskyStep(key)],
        },
        output_mapping: { "output.status": "$.status" },
      },
    },
  });

  it("does not run a high-risk step until it is approved", async ({ expect }) => {
    const id = uniqueId("risky");
    const key = uniqueId("deploy");
    await registerWorkflow(riskyWorkflow(id, key));
    const runId = await start(id);
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    expect(waiting.gates[0]).toMatchObject({ kind: "approval", step: "deploy", status: "open" });
    expect(waiting.gates[0].input_schema.required).toEqual(["approved"]);
    expect(await hits(key)).toBe(0);
    expect(
      (await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, { response: { approve: true } }))
        .status,
    ).toBe(400);
    await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, {
      response: { approved: true, reason: "change window" },
      responder: "ops",
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ status: 200 });
    expect(await hits(key)).toBe(1);
    const kinds = (await journal(runId)).map((entry) => entry.kind);
    expect(kinds).toEqual(expect.arrayContaining(["approval.requested", "approval.granted"]));
  });

  it("fails the step, not retryable, when the approval is rejected", async ({ expect }) => {
    const id = uniqueId("rejected");
    const key = uniqueId("deploy");
    await registerWorkflow({
      ...riskyWorkflow(id, key),
      nodes: { only: { ...riskyWorkflow(id, key).nodes.only, retry: { max_attempts: 3, initial_delay_ms: 10 } } },
    });
    const runId = await start(id);
    const waiting = await waitForRun(runId, gateOpenOrSettled);
    await api("POST", `/v1/runs/${runId}/gates/${waiting.gates[0].gate_id}`, {
      response: { approved: false, reason: "not today" },
    });
    const run = await waitForRun(runId);
    expect(run.status).toBe("failed");
    expect(run.error).toMatchObject({ code: "approval.rejected", retryable: false });
    expect(run.error.message).toMatch(/not today/);
    expect(run.nodes.only.attempts).toBe(1);
    expect(await hits(key)).toBe(0);
  });
});

describe("run modes", () => {
  it("previews the plan in dependency layers without executing anything", async ({ expect }) => {
    const id = uniqueId("preview");
    const key = uniqueId("side");
    const call = {
      steps: [
        {
          ref: "call",
          action: {
            kind: "http",
            risk: "high",
            implementation: { method: "GET", url_template: `${httpTarget()}/mark/${key}` },
          },
        },
      ],
    };
    await registerWorkflow({
      id,
      nodes: {
        a: { task: call },
        b: { task: call, depends_on: ["a"] },
        c: { task: { steps: [contextStep("s", "v", "1")] }, depends_on: ["a"] },
        d: { task: call, depends_on: ["b", "c"] },
      },
    });
    const response = await api("POST", `/v1/workflows/${id}/runs`, { input: {}, mode: "preview" });
    expect(response.status).toBe(200);
    expect(response.json).toMatchObject({ run_id: null, status: "preview", workflow: { id, version: 1 } });
    expect(response.json.plan.layers).toEqual([["a"], ["b", "c"], ["d"]]);
    expect(response.json.plan.nodes.b.actions[0]).toMatchObject({ step: "call", kind: "http", risk: "high" });
    expect(response.json.plan.nodes.c.high_risk).toBe(false);
    expect(response.json.plan.high_risk.map((entry: { node: string }) => entry.node)).toEqual(["a", "b", "d"]);
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(await hits(key)).toBe(0);
  });
});

describe("sub-workflows", () => {
  async function registerFamily(): Promise<{
    parentStep: string;
    parentNode: string;
    failingReturn: string;
    failingPropagate: string;
    slowParent: string;
    child: string;
    slowChild: string;
  }> {
    const child = uniqueId("child");
    const failing = uniqueId("failing");
    const slowChild = uniqueId("slowchild");
    const names = {
      parentStep: uniqueId("p-step"),
      parentNode: uniqueId("p-node"),
      failingReturn: uniqueId("p-return"),
      failingPropagate: uniqueId("p-prop"),
      slowParent: uniqueId("p-slow"),
    };
    const childStep = (workflow: string, onFailure: string) => ({
      ref: "call",
      action: { kind: "workflow", implementation: { workflow, on_failure: onFailure } },
      // The failing children take no n, and their parents are started without one.
      input_mapping: { n: { path: "$.input.n", optional: true } },
      output_mapping: { "output.result": "$" },
    });
    await register({
      workflows: [
        {
          id: child,
          input_schema: { type: "object", required: ["n"] },
          nodes: {
            double: {
              task: { steps: [{ ...contextStep("x2", "n", "input.n * 2"), output_mapping: { "output.n": "$.n" } }] },
              output_mapping: { "output.n": "$.n" },
            },
          },
        },
        oneStepWorkflow(failing, "boom", httpStep("call", `${httpTarget()}/status/422`)),
        oneStepWorkflow(slowChild, "wait", httpStep("call", `${httpTarget()}/slow?ms=5000`)),
      ],
    });
    await register({
      workflows: [
        {
          id: names.parentStep,
          nodes: {
            main: { task: { steps: [childStep(child, "propagate")] }, output_mapping: { "output.result": "$.result" } },
          },
        },
        {
          id: names.parentNode,
          nodes: {
            main: { workflow: child, input_mapping: { n: "$.input.n" }, output_mapping: { "output.n": "$.n" } },
          },
        },
        {
          id: names.failingReturn,
          nodes: {
            main: { task: { steps: [childStep(failing, "return")] }, output_mapping: { "output.result": "$.result" } },
          },
        },
        { id: names.failingPropagate, nodes: { main: { task: { steps: [childStep(failing, "propagate")] } } } },
        { id: names.slowParent, nodes: { main: { workflow: slowChild } } },
      ],
    });
    return { ...names, child, slowChild };
  }

  it("runs a child from a workflow step and from a workflow node; the child's output becomes theirs; journals link and verify", async ({
    expect,
  }) => {
    const names = await registerFamily();
    const stepRun = await waitForRun(await start(names.parentStep, { input: { n: 21 } }));
    expect(stepRun.status).toBe("completed");
    expect(stepRun.output).toEqual({ result: { n: 42 } });
    const nodeRun = await waitForRun(await start(names.parentNode, { input: { n: 5 } }));
    expect(nodeRun.status).toBe("completed");
    expect(nodeRun.output).toEqual({ n: 10 });
    for (const parentRun of [stepRun, nodeRun]) {
      const entries = await journal(parentRun.run_id);
      const started = entries.find((entry) => entry.kind === "child.started");
      const finished = entries.find((entry) => entry.kind === "child.finished");
      expect(started?.body.child_run_id).toMatch(/^run_[0-9a-f]{32}$/);
      expect(finished?.body.child_run_id).toBe(started?.body.child_run_id);
      const childEntries = await journal(started?.body.child_run_id);
      const attest = childEntries.at(-1);
      expect(attest?.kind).toBe("attest");
      expect(finished?.body.attestation).toEqual({ seq: attest?.seq, hash: attest?.hash });
      const child = (await api("GET", `/v1/runs/${started?.body.child_run_id}`)).json;
      expect(child.workflow).toEqual({ id: names.child, version: 1 });
      expect(await verified(parentRun.run_id)).toBe(true);
      expect(await verified(started?.body.child_run_id)).toBe(true);
    }
  });

  it("starts the children of a wide foreach's workflow steps a few per event, and completes every item in order", async ({
    expect,
  }) => {
    const names = await registerFamily();
    const wide = uniqueId("p-wide");
    const step = {
      ref: "call",
      action: { kind: "workflow", implementation: { workflow: names.child, on_failure: "propagate" } },
      input_mapping: { n: "$.input.item" },
      output_mapping: { "output.n": "$.n" },
    };
    await registerWorkflow({
      id: wide,
      nodes: {
        each: {
          foreach: { items: "$.input.items" },
          input_mapping: { item: "$.item" },
          task: { steps: [step] },
          output_mapping: { "output.doubled": "$.n" },
        },
      },
    });
    const items = Array.from({ length: 12 }, (_, i) => i);
    const run = await waitForRun(await start(wide, { input: { items } }));
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ doubled: items.map((n) => n * 2) });
    const stub = env.COORDINATOR.get(env.COORDINATOR.idFromName(run.run_id)) as unknown as {
      getStats(): Promise<{ maxChildStartsPerEvent: number }>;
    };
    const stats = await stub.getStats();
    // Twelve items reached a workflow step together; no event started more than five children.
    expect(stats.maxChildStartsPerEvent).toBeGreaterThan(0);
    expect(stats.maxChildStartsPerEvent).toBeLessThanOrEqual(MAX_CHILD_STARTS_PER_EVENT);
    const entries = await journal(run.run_id);
    expect(entries.filter((entry) => entry.kind === "child.started")).toHaveLength(12);
    expect(await verified(run.run_id)).toBe(true);
  });

  it("fails the parent step with the child's error under propagate, and hands it back as data under return", async ({
    expect,
  }) => {
    const names = await registerFamily();
    const propagated = await waitForRun(await start(names.failingPropagate));
    expect(propagated.status).toBe("failed");
    expect(propagated.error.code).toBe("http.status");
    const returned = await waitForRun(await start(names.failingReturn));
    expect(returned.status).toBe("completed");
    expect(returned.output.result).toMatchObject({ status: "failed", error: { code: "http.status" } });
    expect(returned.output.result.run_id).toMatch(/^run_/);
  });

  it("cancels a running child when its parent is cancelled", async ({ expect }) => {
    const names = await registerFamily();
    const parentId = await start(names.slowParent);
    const waiting = await waitForRun(parentId, (run) => run.nodes.main.status === "waiting");
    expect(waiting.status).toBe("waiting");
    const started = await waitForRun(parentId, () => true).then(async () => {
      for (let i = 0; i < 100; i += 1) {
        const entry = (await journal(parentId)).find((candidate) => candidate.kind === "child.started");
        if (entry) {
          return entry;
        }
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      throw new Error("the child never started");
    });
    expect((await api("POST", `/v1/runs/${parentId}/cancel`)).json.status).toBe("cancelled");
    const child = await waitForRun(started.body.child_run_id);
    expect(child.status).toBe("cancelled");
    expect(await verified(parentId)).toBe(true);
    expect(await verified(started.body.child_run_id)).toBe(true);
  });

  it("delivers a child's result to a parent that was evicted while it waited", async ({ expect }) => {
    const names = await registerFamily();
    const id = uniqueId("p-evict");
    const slow = uniqueId("slow3");
    await registerWorkflow({
      id: slow,
      nodes: {
        wait: {
          task: {
            steps: [
              httpStep("call", `${httpTarget()}/slow?ms=400`, {
                output_mapping: { "output.waited": "$.body.waited" },
              }),
            ],
          },
          output_mapping: { "output.waited": "$.waited" },
        },
      },
    });
    await registerWorkflow({
      id,
      nodes: { main: { workflow: slow, output_mapping: { "output.waited": "$.waited" } } },
    });
    const parentId = await start(id);
    await waitForRun(parentId, (run) => run.nodes.main.status === "waiting");
    await evictDurableObject(env.COORDINATOR.get(env.COORDINATOR.idFromName(parentId)));
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ waited: 400 });
    expect(names.child).toBeTruthy();
  });

  it("stops runaway recursion at the depth limit", async ({ expect }) => {
    const id = uniqueId("recurse");
    await registerWorkflow(
      oneStepWorkflow(id, "again", { ref: "call", action: { kind: "workflow", implementation: { workflow: id } } }),
    );
    const run = await waitForRun(await start(id), undefined, 30_000);
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("workflow.depth_exceeded");
  });
});

describe("children when the parent fails or is redriven", () => {
  it("cancels a waiting child when another node fails the parent under fail_fast", async ({ expect }) => {
    const slow = uniqueId("slowkid");
    const parent = uniqueId("failfast");
    await registerWorkflow(oneStepWorkflow(slow, "wait", httpStep("call", `${httpTarget()}/slow?ms=4000`)));
    await registerWorkflow({
      id: parent,
      nodes: {
        kid: { workflow: slow },
        boom: {
          depends_on: [],
          task: {
            steps: [httpStep("call", `${httpTarget()}/slow?ms=300`), httpStep("fail", `${httpTarget()}/status/400`)],
          },
        },
      },
    });
    const parentId = await start(parent);
    const run = await waitForRun(parentId);
    expect(run.status).toBe("failed");
    const started = (await journal(parentId)).find((entry) => entry.kind === "child.started");
    expect(started).toBeDefined();
    const child = await waitForRun(started?.body.child_run_id);
    expect(child.status).toBe("cancelled");
  });

  it("starts a new child when a parent whose child failed is redriven", async ({ expect }) => {
    const flaky = uniqueId("flakykid");
    const key = uniqueId("once");
    const parent = uniqueId("redrive-parent");
    await registerWorkflow(
      oneStepWorkflow(flaky, "call", httpStep("call", `${httpTarget()}/flaky/${key}?fail=1&status=400`)),
    );
    await registerWorkflow({ id: parent, nodes: { kid: { workflow: flaky } } });
    const parentId = await start(parent);
    expect((await waitForRun(parentId)).status).toBe("failed");
    expect((await api("POST", `/v1/runs/${parentId}/redrive`)).status).toBe(200);
    const run = await waitForRun(parentId);
    expect(run.status).toBe("completed");
    const children = (await journal(parentId))
      .filter((entry) => entry.kind === "child.started")
      .map((entry) => entry.body.child_run_id);
    expect(children).toHaveLength(2);
    expect(children[0]).not.toBe(children[1]);
    expect(await verified(parentId)).toBe(true);
  });
});

describe("gate definitions", () => {
  it("rejects, at registration, a default answer that breaks the gate's input_schema", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      actions: [
        {
          id: uniqueId("ask"),
          kind: "human",
          implementation: {
            prompt_template: "ok?",
            input_schema: { type: "object", required: ["ok"], properties: { ok: { type: "boolean" } } },
            timeout_ms: 1000,
            on_timeout: { default: { ok: "maybe" } },
          },
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(response.json.error.details).toEqual([
      expect.objectContaining({
        path: "actions.0.implementation.on_timeout.default.ok",
        code: "definition.invalid_default",
      }),
    ]);
  });
});

describe("a node that fails while its other items wait", () => {
  it("closes their gates with it: expired, journaled, and gone from GET /v1/gates, while the run goes on", async ({
    expect,
  }) => {
    const id = uniqueId("item-fails");
    await registerWorkflow({
      id,
      nodes: {
        review: {
          foreach: { items: "$.input.items" },
          on_failure: "continue",
          task: {
            steps: [
              // Item 1 sleeps first and then fails; item 2 goes straight to its gate.
              {
                ref: "pause",
                action: { kind: "sleep", implementation: { duration_ms: 0 } },
                input_mapping: { duration_ms: "$.input.wait" },
              },
              {
                ...contextStep("check", "ok", "true"),
                condition: { if: "input.n != 1", else: "fail" },
                input_mapping: { n: "$.input.n" },
              },
              { ref: "ask", action: humanAction() },
            ],
          },
          input_mapping: { n: "$.item", wait: { expr: "item == 1 ? 400 : 0" } },
        },
        hold: { task: { steps: [{ ref: "ask", action: humanAction() }] } },
      },
    });
    const runId = await start(id, { input: { items: [1, 2] } });
    const run = await waitForRun(runId, (view) => view.nodes.review.status === "failed");
    const gates = run.gates.filter((gate: { node: string }) => gate.node === "review");
    expect(gates).toEqual([expect.objectContaining({ item: 1, status: "expired", reason: "node review failed" })]);
    expect(run.status).toBe("waiting");
    expect(run.waiting_for).toEqual([expect.objectContaining({ kind: "gate", node: "hold" })]);
    const entries = await journal(runId);
    expect(entries.find((entry) => entry.kind === "gate.expired")?.body).toMatchObject({
      gate_id: gates[0].gate_id,
      reason: "node review failed",
    });
    const listed: { node: string }[] = [];
    for (let cursor = ""; ;) {
      const page = await api("GET", `/v1/gates?limit=50${cursor}`);
      expect(page.status, JSON.stringify(page.json)).toBe(200);
      listed.push(...page.json.gates.filter((gate: { run_id: string }) => gate.run_id === runId));
      if (page.json.next_cursor === null) {
        break;
      }
      cursor = `&cursor=${encodeURIComponent(page.json.next_cursor)}`;
    }
    expect(listed.map((gate: { node: string }) => gate.node)).toEqual(["hold"]);
  });
});
