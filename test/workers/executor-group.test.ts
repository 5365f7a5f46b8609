import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { checkTaskGroup } from "../../executor/task-check.ts";
import {
  fromTaskGroup,
  toTaskGroup,
  type ResolvedTask,
  type TaskPayload,
  type TaskResult,
} from "../../schemas/index.ts";

/**
 * The coordinator sends tasks to the executor in groups (`runTasks`), each
 * task definition once however many payloads run it, and reads the results
 * back as newline-delimited JSON. These tests call the executor the same way,
 * through the real service binding.
 */

function contextTask(id: string, expr: string): ResolvedTask {
  return {
    id,
    version: 0,
    steps: [
      {
        ref: "s",
        action: { id: `${id}/s`, version: 0, kind: "context", implementation: { updates: [{ path: "v", expr }] } },
        output_mapping: { "output.v": "$.v" },
      },
    ],
  };
}

function payload(token: string, task: ResolvedTask, input: TaskPayload["input"]): TaskPayload {
  return {
    token_id: token,
    workflow_run_id: "run_group",
    workflow_id: "wf",
    workflow_version: 0,
    node_id: "n",
    item_index: null,
    iteration: 1,
    task_id: task.id,
    task_version: 0,
    task,
    input,
    resources: {},
    timeout_ms: 10_000,
    retry_attempt: 0,
    tools: [],
  };
}

/** A group's results read from `runTasks`: newline-delimited JSON on a stream. */
async function streamed(group: unknown): Promise<TaskResult[]> {
  const stream = await env.EXECUTOR.runTasks(group);
  const text = await new Response(stream).text();
  return text
    .split("\n")
    .filter((line) => line.trim() !== "")
    .map((line) => JSON.parse(line) as TaskResult);
}

/** A group's results from `runTaskList` (groups that wait on no I/O): one array. */
async function listed(group: unknown): Promise<TaskResult[]> {
  return (await env.EXECUTOR.runTaskList(group)) as TaskResult[];
}

// Both ways of sending a group run it the same way and answer the same results.
describe.each([
  ["runTasks", streamed],
  ["runTaskList", listed],
])("%s", (_name, results) => {
  it("sends each task once and runs every payload with its own task", async ({ expect }) => {
    const double = contextTask("double", "input.n * 2");
    const square = contextTask("square", "input.n * input.n");
    // Another object with the same id and version must not be confused with the first.
    const impostor = contextTask("double", "input.n + 1000");
    const payloads = [
      payload("a", double, { n: 3 }),
      payload("b", square, { n: 4 }),
      payload("c", double, { n: 5 }),
      payload("d", impostor, { n: 1 }),
    ];
    const group = toTaskGroup(payloads);
    expect(Object.keys(group.tasks)).toHaveLength(3);
    expect(group.payloads.every((one) => !("task" in one))).toBe(true);

    const byToken = new Map((await results(group)).map((result) => [result.token_id, result]));
    expect(byToken.get("a")).toMatchObject({ success: true, output: { v: 6 } });
    expect(byToken.get("b")).toMatchObject({ success: true, output: { v: 16 } });
    expect(byToken.get("c")).toMatchObject({ success: true, output: { v: 10 } });
    expect(byToken.get("d")).toMatchObject({ success: true, output: { v: 1001 } });
  });

  it("answers every payload of a malformed group with executor.invalid_payload, as data", async ({ expect }) => {
    const task = contextTask("ok", "1");
    const group = toTaskGroup([payload("x", task, {}), payload("y", task, {})]);
    const broken = { ...group, payloads: group.payloads.map((one) => ({ ...one, timeout_ms: -1 })) };
    const answered = await results(broken);
    expect(answered.map((result) => result.token_id).sort()).toEqual(["x", "y"]);
    for (const result of answered) {
      expect(result).toMatchObject({ success: false, error: { code: "executor.invalid_payload", retryable: false } });
      expect(result.error?.message).toContain("payloads.0.timeout_ms");
    }
  });

  it("fails a payload whose task the group does not carry, and runs the rest", async ({ expect }) => {
    const task = contextTask("ok", "7");
    const group = toTaskGroup([payload("here", task, {}), payload("lost", task, {})]);
    const [first, second] = group.payloads;
    if (!first || !second) {
      throw new Error("two payloads expected");
    }
    const answered = await results({ ...group, payloads: [first, { ...second, task_key: "nowhere@1" }] });
    const byToken = new Map(answered.map((result) => [result.token_id, result]));
    expect(byToken.get("here")).toMatchObject({ success: true, output: { v: 7 } });
    expect(byToken.get("lost")).toMatchObject({ success: false, error: { code: "executor.invalid_payload" } });
  });
});

describe("runTasks", () => {
  it("checks every task's definition, a task it has seen before included: one changed step is refused", async ({
    expect,
  }) => {
    const task = contextTask("seen", "input.n + 1");
    expect(await streamed(toTaskGroup([payload("first", task, { n: 1 })]))).toMatchObject([
      { success: true, output: { v: 2 } },
    ]);
    // The same id, version and key, one step no longer valid: remembered checks are by content.
    const changed = { ...task, steps: [{ ...task.steps[0], action: { kind: "context", implementation: {} } }] };
    const group = toTaskGroup([payload("second", task, { n: 1 })]);
    const answered = await streamed({ ...group, tasks: { "seen@0": changed } });
    expect(answered).toMatchObject([
      { token_id: "second", success: false, error: { code: "executor.invalid_payload" } },
    ]);
    expect(answered[0]?.error?.message).toContain("tasks.seen@0.steps.0.action");
    // And the valid one still runs, checked or remembered.
    expect(await streamed(toTaskGroup([payload("third", task, { n: 4 })]))).toMatchObject([
      { success: true, output: { v: 5 } },
    ]);
  });

  it("remembers a checked task under any names, and still checks each name", ({ expect }) => {
    // As the coordinator sends one task: a group of one.
    const checkAsGroupOfOne = (one: unknown) => {
      const checked = checkTaskGroup(toTaskGroup([one as TaskPayload]));
      return "group" in checked ? { payload: fromTaskGroup(checked.group)[0] } : checked;
    };
    // Inline tasks and their actions are named after their nodes: a chain is many names for one definition.
    const inNode = (node: string, actionId: unknown = `wf/${node}/s`, actionVersion: unknown = 0) => {
      const task = contextTask(`wf/${node}`, "1");
      const [step] = task.steps;
      const action = { ...step?.action, id: actionId, version: actionVersion };
      return { ...payload(`t-${node}`, task, {}), task: { ...task, steps: [{ ...step, action }] } };
    };
    expect(checkAsGroupOfOne(inNode("n1"))).toMatchObject({
      payload: { task: { id: "wf/n1", steps: [{ action: { id: "wf/n1/s" } }] } },
    });
    const second = checkAsGroupOfOne(inNode("n2", "wf/n2/s", 4));
    expect(second).toMatchObject({
      payload: { task: { id: "wf/n2", version: 0, steps: [{ ref: "s", action: { id: "wf/n2/s", version: 4 } }] } },
    });
    const secondPayload = "payload" in second ? second.payload : undefined;
    expect(Object.keys(secondPayload !== undefined && "task" in secondPayload ? secondPayload.task : {})).toEqual([
      "id",
      "version",
      "steps",
    ]);
    // A remembered definition does not excuse its names.
    const badTask = { ...inNode("n3"), task: { ...inNode("n3").task, id: "" } };
    expect(checkAsGroupOfOne(badTask)).toMatchObject({ details: [{ path: "tasks.@0.id" }] });
    for (const [actionId, actionVersion] of [
      ["", 0],
      ["wf/n4/s", -1],
      ["wf/n4/s", 1.5],
      ["wf/n4/s", 2 ** 53],
      [7, 0],
    ] as const) {
      const refused = checkAsGroupOfOne(inNode("n4", actionId, actionVersion));
      expect(refused).toMatchObject({
        details: [{ path: expect.stringMatching(/^tasks\.wf\/n4@0\.steps\.0\.action/) }],
      });
    }
  });
});
