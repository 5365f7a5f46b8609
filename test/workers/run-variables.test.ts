import { describe, it } from "vitest";
import { renderTemplate } from "../../lib/expr/template.ts";
import { compileCel, evalCel } from "../../lib/expr/cel.ts";
import { idempotencyKey, withRunVariables, type StepRunVariables } from "../../lib/expr/run-scope.ts";
import { ErrorBody } from "../../schemas/api.ts";
import type { TaskPayload, TaskResult } from "../../schemas/index.ts";
import { api, httpTarget, register, runOne, runWorkflow, start, uniqueId, waitForRun } from "./helpers.ts";

/** A UUID of version 8 and the RFC 9562 variant: what `run.idempotency_key` looks like. */
const UUID_V8 = /^[0-9a-f]{8}-[0-9a-f]{4}-8[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const RETRY = { execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10, max_delay_ms: 20 } } };
const NO_RETRY = { execution: { retry_policy: { max_attempts: 1 } } };

/** An http step that calls `/record/<key>` with `idempotency: true`, and says what it expects in headers of its own. */
function recordStep(ref: string, key: string, query = "", extra: Record<string, unknown> = {}) {
  return {
    ref,
    action: {
      kind: "http",
      implementation: {
        method: "POST",
        url_template: `${httpTarget()}/record/${key}${query}`,
        headers: { "x-expected": "{{run.idempotency_key}}", "x-attempt": "{{run.attempt}}", "x-item": "{{run.item}}" },
        idempotency: true,
      },
      ...extra,
    },
    output_mapping: {},
  };
}

async function recorded(key: string): Promise<Record<string, string>[]> {
  const response = await fetch(`${httpTarget()}/recorded/${key}`);
  const body = (await response.json()) as { requests: { headers: Record<string, string> }[] };
  return body.requests.map((request) => request.headers);
}

describe("the run variable", () => {
  it("gives a context step's expression the run's id, workflow, node, item, attempt, step and key", async ({
    expect,
  }) => {
    const id = uniqueId("runvar");
    const step = {
      ref: "who",
      action: {
        kind: "context",
        implementation: {
          updates: [
            { path: "id", expr: "run.id" },
            { path: "run", expr: "run" },
          ],
        },
      },
      output_mapping: { "output.id": "$.id", "output.run": "$.run" },
    };
    const run = await runWorkflow({
      id,
      nodes: { main: { task: { steps: [step] }, output_mapping: { "output.r": "$" } } },
    });
    expect(run.status).toBe("completed");
    const { id: seen, run: variable } = run.output.r as { id: string; run: StepRunVariables };
    expect(seen).toBe(run.run_id);
    expect(variable).toMatchObject({
      id: run.run_id,
      workflow: { id, version: 1 },
      node: "main",
      item: null,
      iteration: 1,
      attempt: 1,
      step: "who",
    });
    expect(variable.idempotency_key).toMatch(UUID_V8);
  });

  it("renders {{run.idempotency_key}} in a mapping template, the same key a step's CEL reads", async ({ expect }) => {
    const id = uniqueId("runtpl");
    const step = {
      ref: "keyed",
      action: { kind: "context", implementation: { updates: [{ path: "cel", expr: "run.idempotency_key" }] } },
      input_mapping: { text: { template: "key={{run.idempotency_key}} step={{run.step}}" } },
      output_mapping: { "output.cel": "$.cel" },
    };
    const echo = {
      ref: "echo",
      action: { kind: "context", implementation: { updates: [{ path: "text", expr: "input.text" }] } },
      input_mapping: { text: { template: "key={{run.idempotency_key}} step={{run.step}}" } },
      output_mapping: { "output.text": "$.text" },
    };
    const run = await runWorkflow({
      id,
      nodes: { main: { task: { steps: [step, echo] }, output_mapping: { "output.r": "$" } } },
    });
    expect(run.status).toBe("completed");
    const { cel, text } = run.output.r as { cel: string; text: string };
    expect(cel).toMatch(UUID_V8);
    // Another step, another key; the template and CEL agree on each.
    const [, key, ref] = /^key=(\S+) step=(\S+)$/.exec(text) ?? [];
    expect(ref).toBe("echo");
    expect(key).toMatch(UUID_V8);
    expect(key).not.toBe(cel);
  });

  it("sends the same Idempotency-Key on an http call retried after a 503", async ({ expect }) => {
    const key = uniqueId("idem-retry");
    const run = await runWorkflow({
      id: uniqueId("idemretry"),
      nodes: { main: { task: { steps: [recordStep("charge", key, "?fail=1", RETRY)] } } },
    });
    expect(run.status).toBe("completed");
    const requests = await recorded(key);
    expect(requests).toHaveLength(2);
    const [first, second] = requests;
    expect(first?.["idempotency-key"]).toMatch(UUID_V8);
    expect(second?.["idempotency-key"]).toBe(first?.["idempotency-key"]);
    expect(first?.["x-expected"]).toBe(first?.["idempotency-key"]);
  });

  it("keeps the key when the node re-dispatches its task, while run.attempt counts up", async ({ expect }) => {
    const key = uniqueId("idem-node");
    const run = await runWorkflow({
      id: uniqueId("idemnode"),
      nodes: {
        main: {
          task: { steps: [{ ...recordStep("charge", key, "?fail=1", NO_RETRY), on_failure: "retry" }] },
          retry: { max_attempts: 2, initial_delay_ms: 10 },
        },
      },
    });
    expect(run.status).toBe("completed");
    expect(run.nodes.main.attempts).toBe(2);
    const requests = await recorded(key);
    expect(requests.map((headers) => headers["x-attempt"])).toEqual(["1", "2"]);
    expect(requests[1]?.["idempotency-key"]).toBe(requests[0]?.["idempotency-key"]);
  });

  it("gives each foreach item and each step a key of its own", async ({ expect }) => {
    const key = uniqueId("idem-items");
    const run = await runWorkflow(
      {
        id: uniqueId("idemitems"),
        nodes: {
          fan: {
            foreach: { items: "$.input.items" },
            task: { steps: [recordStep("first", key), recordStep("second", key)] },
          },
        },
      },
      { items: ["a", "b"] },
    );
    expect(run.status).toBe("completed");
    const requests = await recorded(key);
    expect(requests.map((headers) => headers["x-item"]).sort()).toEqual(["0", "0", "1", "1"]);
    const keys = requests.map((headers) => headers["idempotency-key"]);
    expect(new Set(keys).size).toBe(4);
    for (const headers of requests) {
      expect(headers["idempotency-key"]).toBe(headers["x-expected"]);
    }
  });

  it("sends no Idempotency-Key without idempotency: true, and leaves one the definition sets", async ({ expect }) => {
    const key = uniqueId("idem-own");
    const plain = recordStep("plain", key);
    const own = recordStep("own", key);
    const steps = [
      { ...plain, action: { ...plain.action, implementation: { ...plain.action.implementation, idempotency: false } } },
      {
        ...own,
        action: {
          ...own.action,
          implementation: { ...own.action.implementation, headers: { "Idempotency-Key": "$env:HTTP_TARGET_URL" } },
        },
      },
    ];
    const run = await runWorkflow({ id: uniqueId("idemown"), nodes: { main: { task: { steps } } } });
    expect(run.status).toBe("completed");
    const [first, second] = await recorded(key);
    expect(first?.["idempotency-key"]).toBeUndefined();
    expect(second?.["idempotency-key"]).toBe(httpTarget());
  });

  it("gives the same key to a task dispatched again under a new token and attempt", async ({ expect }) => {
    const key = uniqueId("idem-lost");
    const step = recordStep("charge", key);
    const payload = (token: string, attempt: number): TaskPayload => ({
      token_id: token,
      workflow_run_id: "run_00000000000000000000000000000001",
      workflow_id: "wf",
      workflow_version: 1,
      node_id: "n",
      item_index: null,
      iteration: 1,
      task_id: "wf/n",
      task_version: 0,
      task: {
        id: "wf/n",
        version: 0,
        steps: [{ ...step, action: { ...step.action, id: "wf/n/charge", version: 0 } }],
      } as TaskPayload["task"],
      input: {},
      resources: {},
      timeout_ms: 10_000,
      retry_attempt: attempt,
      tools: [],
    });
    const first = (await runOne(payload("t1", 0))) as TaskResult;
    const again = (await runOne(payload("t2", 1))) as TaskResult;
    expect([first.success, again.success]).toEqual([true, true]);
    const requests = await recorded(key);
    expect(requests.map((headers) => headers["x-attempt"])).toEqual(["1", "2"]);
    expect(requests[1]?.["idempotency-key"]).toBe(requests[0]?.["idempotency-key"]);
    expect(requests[0]?.["idempotency-key"]).toBe(
      idempotencyKey({
        id: payload("t", 0).workflow_run_id,
        node: "n",
        item: null,
        iteration: 1,
        task: "wf/n",
        step: "charge",
      }),
    );
  });

  it("keeps the key when a failed run is redriven", async ({ expect }) => {
    const key = uniqueId("idem-redrive");
    const id = uniqueId("idemredrive");
    await register({
      workflows: [{ id, nodes: { main: { task: { steps: [recordStep("charge", key, "?fail=1&status=400")] } } } }],
    });
    const runId = await start(id);
    expect((await waitForRun(runId)).status).toBe("failed");
    expect((await api("POST", `/v1/runs/${runId}/redrive`)).status).toBe(200);
    expect((await waitForRun(runId)).status).toBe("completed");
    const requests = await recorded(key);
    expect(requests).toHaveLength(2);
    expect(requests[1]?.["idempotency-key"]).toBe(requests[0]?.["idempotency-key"]);
  });

  it("gives an undo's call a key of its own, with run.step undo", async ({ expect }) => {
    const key = uniqueId("idem-undo");
    const make = uniqueId("make");
    const remove = uniqueId("remove");
    const http = (headers: Record<string, string>) => ({
      kind: "http",
      implementation: { method: "POST", url_template: `${httpTarget()}/record/${key}`, headers, idempotency: true },
    });
    const boom = { kind: "http", implementation: { method: "GET", url_template: `${httpTarget()}/status/404` } };
    const id = uniqueId("idemundo");
    await register({
      actions: [
        { id: remove, ...http({ "x-step": "{{run.step}}" }) },
        { id: make, ...http({ "x-step": "{{run.step}}" }), undo: { action: remove } },
      ],
      workflows: [
        {
          id,
          nodes: {
            main: {
              task: {
                steps: [
                  { ref: "make", action: make },
                  { ref: "boom", action: boom },
                ],
              },
            },
          },
        },
      ],
    });
    const runId = await start(id);
    const run = await waitForRun(
      runId,
      (view: { compensation?: { status: string } }) => view.compensation?.status === "completed",
    );
    expect(run.status).toBe("failed");
    const requests = await recorded(key);
    expect(requests.map((headers) => headers["x-step"])).toEqual(["make", "undo"]);
    expect(requests[1]?.["idempotency-key"]).toMatch(UUID_V8);
    expect(requests[1]?.["idempotency-key"]).not.toBe(requests[0]?.["idempotency-key"]);
  });

  it("gives each repeat iteration a key of its own, and binds run in repeat.until and the node's output mapping", async ({
    expect,
  }) => {
    const key = uniqueId("idem-repeat");
    const run = await runWorkflow({
      id: uniqueId("idemrepeat"),
      nodes: {
        loop: {
          task: { steps: [recordStep("call", key)] },
          repeat: { until: "run.iteration == 2 && run.node == 'loop'", max_iterations: 3 },
          output_mapping: { "output.at": { expr: "run.node + '@' + string(run.iteration)" } },
        },
      },
    });
    expect(run.status).toBe("completed");
    expect(run.output.at).toBe("loop@2");
    const keys = (await recorded(key)).map((headers) => headers["idempotency-key"]);
    expect(keys).toHaveLength(2);
    expect(keys[1]).not.toBe(keys[0]);
  });

  it("binds run in a node's when and input mapping, with the item's index", async ({ expect }) => {
    const id = uniqueId("runnode");
    const step = {
      ref: "echo",
      action: { kind: "context", implementation: { updates: [{ path: "got", expr: "input" }] } },
      output_mapping: { "output.got": "$.got" },
    };
    const run = await runWorkflow(
      {
        id,
        nodes: {
          fan: {
            foreach: { items: "$.input.items" },
            when: "run.item != 1 && run.iteration == 1",
            input_mapping: {
              at: { expr: "run.node + '/' + string(run.item)" },
              wf: { template: "{{run.workflow.id}}@{{run.workflow.version}} {{run.id}}" },
            },
            task: { steps: [step] },
            output_mapping: { "output.got": "$.got" },
          },
        },
      },
      { items: ["a", "b", "c"] },
    );
    expect(run.status).toBe("completed");
    const wf = `${id}@1 ${run.run_id}`;
    expect(run.output.got).toEqual([{ at: "fan/0", wf }, null, { at: "fan/2", wf }]);
  });
});

describe("the run variable at registration", () => {
  async function registerWhen(where: "node" | "step", expr: string): Promise<{ status: number; json: unknown }> {
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    const node =
      where === "node"
        ? { when: expr, task: { steps: [step] } }
        : { task: { steps: [{ ...step, condition: { if: expr } }] } };
    return api("POST", "/v1/definitions", { workflows: [{ id: uniqueId("runreg"), nodes: { main: node } }] });
  }

  it("accepts run's fields where they are bound", async ({ expect }) => {
    expect((await registerWhen("step", "run.idempotency_key != '' && run.attempt > 0")).status).toBe(201);
    expect((await registerWhen("node", "run.id != '' && run.item == null")).status).toBe(201);
  });

  it("refuses a field run does not have there", async ({ expect }) => {
    const wrong = await registerWhen("step", "run.nope == 1");
    expect(wrong.status).toBe(400);
    expect(JSON.stringify(ErrorBody.parse(wrong.json).error.details)).toContain('run has no field \\"nope\\" here');
    const nodeStep = await registerWhen("node", "run.step == 'x'");
    expect(nodeStep.status).toBe(400);
    expect(ErrorBody.parse(nodeStep.json).error.details?.[0]).toMatchObject({
      path: expect.stringContaining("when"),
      code: "definition.invalid_cel",
    });
  });
});

describe("the fields an expression selects on run", () => {
  it.for([
    ["run.id + run.step", ["id", "step"]],
    ["[{'x': 1}].all(run, run.x > 0)", []],
    ["has(run.item) && run['nope'] == 1 && input.run.nope", ["item"]],
  ] as const)("%s selects %j", ([source, fields], { expect }) => {
    const compiled = compileCel(source);
    expect(compiled.ok && compiled.program.runFields).toEqual(fields);
  });
});

describe("run in templates and CEL", () => {
  const run: StepRunVariables = {
    id: "run_1",
    workflow: { id: "wf", version: 2 },
    node: "n",
    item: 3,
    iteration: 1,
    attempt: 1,
    step: "s",
    idempotency_key: "k",
  };

  it("is reserved: an input field called run does not shadow it, and stays readable as this.run", ({ expect }) => {
    const text = withRunVariables(run, () =>
      renderTemplate(
        "{{run.id}} {{this.run}} {{#each list}}{{run.item}}{{/each}} {{#each list as |run|}}{{run}}{{/each}}",
        {
          run: "mine",
          list: ["x"],
        },
      ),
    );
    expect(text).toBe("run_1 mine 3 x");
    expect(withRunVariables(run, () => evalCel("run.workflow.version + input.run", { input: { run: 1 } }))).toBe(3);
  });

  it("is not bound outside a run", ({ expect }) => {
    expect(renderTemplate("{{run}}", { run: "data" })).toBe("data");
    expect(() => evalCel("run.id", {})).toThrow(/undeclared variable/);
  });
});
