import fc from "fast-check";
import { z } from "zod";
import { describe, it } from "vitest";
import { TaskGroup, TaskResult } from "../../schemas/index.ts";
import { fastPayloadEnvelope, fastTaskGroupEnvelope, fastTaskResult } from "../../schemas/payload-fast.ts";

/**
 * The fast paths of schemas/payload-fast.ts stand in for zod on every
 * dispatch and result. Each must accept only what its schema accepts, and
 * return what the schema returns; these tests hold them to that on the shapes
 * the engine sends and on hundreds of mutations of them.
 */

const Envelope = TaskGroup.shape.payloads.element;
const GroupEnvelope = TaskGroup.extend({ tasks: z.record(z.string(), z.unknown()) });

const PAYLOAD = {
  token_id: "run_a.7",
  workflow_run_id: "run_a",
  workflow_id: "wf",
  workflow_version: 0,
  node_id: "n7",
  item_index: null,
  iteration: 1,
  task_id: "wf/n7",
  task_version: 0,
  task: { id: "wf/n7" },
  input: { items: [1, "two", { three: null }] },
  resources: {},
  timeout_ms: 900_000,
  retry_attempt: 0,
  tools: ["read_file"],
};

const RESULT = {
  token_id: "run_a.7",
  success: true,
  output: { waited: 100, list: [true, null] },
  metrics: { duration_ms: 101.5, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
  steps: [
    {
      step: "get",
      action: "http wf/n7/get@0",
      status: "completed",
      duration_ms: 101,
      attempts: [
        { attempt: 1, duration_ms: 50, retry_in_ms: 10, retry_reason: "backoff", call: { status: 503 } },
        { attempt: 2, duration_ms: 51, call: { method: "GET", status: 200, url: "http://127.0.0.1/wait" } },
      ],
    },
  ],
};

const GROUP = {
  tasks: { "wf/n7@0": { id: "wf/n7" } },
  payloads: [0, 1].map((item) => {
    const { task: _task, ...rest } = PAYLOAD;
    return { ...rest, item_index: item, token_id: `run_a.${item}`, task_key: "wf/n7@0" };
  }),
};

/** Values that break one schema rule or another. */
const ODD_VALUES: unknown[] = [
  undefined,
  null,
  "",
  "x",
  -1,
  0,
  1,
  1.5,
  -0,
  Number.NaN,
  Number.POSITIVE_INFINITY,
  2 ** 53,
  true,
  [],
  [undefined],
  {},
  { nested: undefined },
  new Map(),
  "backoff",
  "completed",
  "other",
];

/** A copy of `value` with one member somewhere in it (at `path`, chosen by `pick`) replaced, removed or added. */
function mutate(value: unknown, picks: number[], replacement: unknown, how: "set" | "delete" | "add"): unknown {
  const copy: unknown = structuredClone(value);
  let target: unknown = copy;
  for (const pick of picks) {
    const members = containerMembers(target);
    if (members.length === 0) {
      break;
    }
    const key = members[pick % members.length] as string | number;
    const child: unknown = (target as Record<string | number, unknown>)[key];
    if (containerMembers(child).length === 0 || pick % 3 === 0) {
      const holder = target as Record<string | number, unknown>;
      if (how === "delete") {
        delete holder[key];
      } else if (how === "add" && !Array.isArray(holder)) {
        holder[`extra_${pick}`] = replacement;
      } else {
        holder[key] = replacement;
      }
      return copy;
    }
    target = child;
  }
  return copy;
}

function containerMembers(value: unknown): (string | number)[] {
  if (Array.isArray(value)) {
    return value.map((_, index) => index);
  }
  return typeof value === "object" && value !== null && !(value instanceof Map) ? Object.keys(value) : [];
}

const mutations = fc.tuple(
  fc.array(fc.nat(50), { minLength: 1, maxLength: 6 }),
  fc.constantFrom(...ODD_VALUES),
  fc.constantFrom("set" as const, "delete" as const, "add" as const),
);

describe("the exact fast paths of the executor boundary", () => {
  it("take the shapes the engine sends", ({ expect }) => {
    expect(fastPayloadEnvelope(GROUP.payloads[0])).toBe(GROUP.payloads[0]);
    expect(fastTaskResult(RESULT)).toBe(RESULT);
    expect(fastTaskGroupEnvelope(GROUP)).toBe(GROUP);
    expect(fastTaskResult({ ...RESULT, success: false, output: undefined, steps: undefined })).not.toBeNull();
  });

  it("leave rarer shapes to the schema", ({ expect }) => {
    const resumed = {
      ...GROUP.payloads[0],
      resume: { step_index: 1, context: { input: {}, state: {}, output: {} }, mode: "after" },
    };
    expect(fastPayloadEnvelope(resumed)).toBeNull();
    expect(Envelope.safeParse(resumed).success).toBe(true);
    const failed = {
      ...RESULT,
      success: false,
      error: { code: "x", message: "m", retryable: false, context_snapshot: null },
    };
    expect(fastTaskResult(failed)).toBeNull();
    expect(TaskResult.safeParse(failed).success).toBe(true);
  });

  for (const [name, base, fast, schema] of [
    ["a payload of a group", GROUP.payloads[0], fastPayloadEnvelope, Envelope],
    ["a task group", GROUP, fastTaskGroupEnvelope, GroupEnvelope],
    ["a task result", RESULT, fastTaskResult, TaskResult],
  ] as const) {
    it(`accept ${name} only when its schema does, and as the schema reads it`, ({ expect }) => {
      let taken = 0;
      fc.assert(
        fc.property(mutations, ([picks, replacement, how]) => {
          const value = mutate(base, picks, replacement, how);
          const accepted = fast(value);
          if (accepted !== null) {
            taken += 1;
            const parsed = (schema as z.ZodType).safeParse(value);
            expect(parsed.success).toBe(true);
            expect(accepted).toEqual(parsed.data);
          }
        }),
        { numRuns: 600, seed: 16 },
      );
      // Some mutations keep the value valid (a string for a string): the fast path is exercised, not only refused.
      expect(taken).toBeGreaterThan(0);
    });
  }
});
