import { describe, it } from "vitest";
import { IMPLEMENTATION_CHECKS, type ImplementationChecks } from "../../catalog/check-actions.ts";
import {
  ACTION_HANDLERS,
  suspensionFor,
  type ActionContext,
  type ActionRegistry,
} from "../../executor/actions/index.ts";
import {
  Action,
  ACTION_IMPLEMENTATIONS,
  ACTION_KINDS,
  ACTION_TRAITS,
  InlineAction,
  ResolvedAction,
  type ActionImplementations,
  type ActionKind,
  type ActionTraits,
} from "../../schemas/index.ts";

/**
 * Action kinds are one table each: the implementation schemas
 * (`ACTION_IMPLEMENTATIONS`, from which the kinds and the action union
 * derive), their traits, the validator's checks and the executor's handlers.
 * Each table is typed `{ [K in ActionKind]: … }`, so a kind missing from one
 * does not compile (the `@ts-expect-error` lines below fail the typecheck if
 * it ever does), and at run time all of them have the same keys.
 */

/** `table` without its `kind` row, as a table that forgot a kind would be. */
function without<T extends object, K extends keyof T>(table: T, kind: K): Omit<T, K> {
  const { [kind]: _dropped, ...rest } = table;
  return rest;
}

/** A task context with nothing in it, for kinds that do not read it. */
const NO_CONTEXT = { input: null, state: {}, output: {} };
const sorted = (keys: readonly string[]) => [...keys].sort();

describe("action kinds", () => {
  it("do not compile when a per-kind table misses a kind", ({ expect }) => {
    // @ts-expect-error -- a registry without `metric` is not an ActionRegistry
    const registry: ActionRegistry = without(ACTION_HANDLERS, "metric");
    // @ts-expect-error -- checks without `human` are not ImplementationChecks
    const checks: ImplementationChecks = without(IMPLEMENTATION_CHECKS, "human");
    // @ts-expect-error -- traits without `context` are not one row per kind
    const traits: { [K in ActionKind]: ActionTraits } = without(ACTION_TRAITS, "context");
    // @ts-expect-error -- the action union needs an implementation schema for every kind, here `shell`
    const implementations: ActionImplementations = without(ACTION_IMPLEMENTATIONS, "shell");
    // @ts-expect-error -- a kind that no table has is not an ActionKind
    const unknown: ActionKind = "sql";
    expect(Object.keys(registry)).not.toContain("metric");
    expect(Object.keys(checks)).not.toContain("human");
    expect(Object.keys(traits)).not.toContain("context");
    expect(Object.keys(implementations)).not.toContain("shell");
    expect(ACTION_KINDS).not.toContain(unknown);
  });

  it("are the same in the schema table, the traits, the validator's checks and the executor's registry", ({
    expect,
  }) => {
    const kinds = sorted(ACTION_KINDS);
    expect(kinds).toHaveLength(13);
    expect(sorted(Object.keys(ACTION_IMPLEMENTATIONS))).toEqual(kinds);
    expect(sorted(Object.keys(ACTION_TRAITS))).toEqual(kinds);
    expect(sorted(Object.keys(IMPLEMENTATION_CHECKS))).toEqual(kinds);
    expect(sorted(Object.keys(ACTION_HANDLERS))).toEqual(kinds);
  });

  it("each have one member, in the table's order, in the written, inline and resolved action unions", ({ expect }) => {
    for (const union of [Action, InlineAction, ResolvedAction]) {
      expect(union.options.map((member) => member.shape.kind.value)).toEqual(ACTION_KINDS);
    }
  });

  it("suspend a task only at human, workflow, sleep, event and plan steps, with the wait their handler builds", ({
    expect,
  }) => {
    const human = ResolvedAction.parse({
      id: "ask",
      version: 1,
      kind: "human",
      implementation: { prompt_template: "Ship {{title}}?", input_schema: { type: "object" }, timeout_ms: 60_000 },
    });
    expect(suspensionFor(human, { title: "v2" }, NO_CONTEXT)).toEqual({
      kind: "gate",
      gate_kind: "input",
      prompt: "Ship v2?",
      input_schema: { type: "object" },
      timeout_ms: 60_000,
    });
    const child = ResolvedAction.parse({
      id: "sub",
      version: 0,
      kind: "workflow",
      implementation: { workflow: "child@3" },
    });
    expect(suspensionFor(child, { n: 1 }, NO_CONTEXT)).toEqual({
      kind: "child",
      workflow: "child@3",
      input: { n: 1 },
      on_failure: "propagate",
    });
    // A child chosen from the task context, among the allowed (pinned) workflows.
    const chooser = ResolvedAction.parse({
      id: "pick",
      version: 0,
      kind: "workflow",
      implementation: { workflow: { from: "$.input.flow", allowed: ["fast@2", "slow@5"] } },
    });
    const context = { input: { flow: "slow" }, state: {}, output: {} };
    expect(suspensionFor(chooser, { n: 1 }, context)).toEqual({
      kind: "child",
      workflow: "slow@5",
      input: { n: 1 },
      on_failure: "propagate",
      chosen: { from: "$.input.flow", value: "slow" },
    });
    expect(() => suspensionFor(chooser, {}, { ...context, input: { flow: "slow@4" } })).toThrow(
      /is not one of the allowed workflows: fast@2, slow@5/,
    );
    // A plan step's child: the plan is its input, checked now; the child is the plan workflow.
    const planner = ResolvedAction.parse({
      id: "run_plan",
      version: 1,
      kind: "plan",
      implementation: { tools: ["tool:list_artifacts"], mode: "approval" },
    });
    const plan = { steps: [{ tool: "tool:list_artifacts", params: {} }] };
    expect(suspensionFor(planner, plan, NO_CONTEXT)).toEqual({
      kind: "child",
      workflow: "plan",
      input: {},
      on_failure: "propagate",
      plan: { given: plan, tools: ["tool:list_artifacts"], mode: "approval" },
    });
    expect(() => suspensionFor(planner, { steps: [] }, NO_CONTEXT)).toThrow(
      expect.objectContaining({ code: "plan.invalid", retryable: false }),
    );
    expect(() => suspensionFor(planner, [plan], NO_CONTEXT)).toThrow(/must be a plan \(an object\); it is an array/);
    const compute = ResolvedAction.parse({
      id: "calc",
      version: 0,
      kind: "context",
      implementation: { updates: [{ path: "a", expr: "1" }] },
    });
    expect(suspensionFor(compute, {}, NO_CONTEXT)).toBeUndefined();
    const suspending = ACTION_KINDS.filter((kind) => ACTION_HANDLERS[kind].suspend !== undefined);
    expect(suspending).toEqual(["workflow", "human", "sleep", "event", "plan"]);
    // The suspending kinds are the ones whose trait says so.
    expect(ACTION_KINDS.filter((kind) => ACTION_TRAITS[kind].suspends)).toEqual(suspending);
  });

  it("wait for an event by its names (one or a list, each once), with the step input its match reads", ({ expect }) => {
    const wait = (implementation: Record<string, unknown>) =>
      suspensionFor(
        ResolvedAction.parse({ id: "reply", version: 1, kind: "event", implementation }),
        { id: 7 },
        NO_CONTEXT,
      );
    expect(wait({ name: "paid" })).toEqual({ kind: "event", names: ["paid"], input: { id: 7 } });
    expect(
      wait({
        name: ["paid", "refunded", "paid"],
        match: "event.data.id == input.id",
        timeout_ms: 5,
        on_timeout: "fail",
      }),
    ).toEqual({
      kind: "event",
      names: ["paid", "refunded"],
      input: { id: 7 },
      match: "event.data.id == input.id",
      timeout_ms: 5,
      on_timeout: "fail",
    });
  });

  it("sleep on a duration or an absolute time, the input's winning, and continue at once when the time is past", ({
    expect,
  }) => {
    const sleep = (implementation: Record<string, unknown>) =>
      ResolvedAction.parse({ id: "nap", version: 1, kind: "sleep", implementation });
    expect(suspensionFor(sleep({ duration_ms: 2_000 }), {}, NO_CONTEXT)).toEqual({ kind: "timer", duration_ms: 2_000 });
    const later = Date.now() + 3_600_000;
    expect(suspensionFor(sleep({ duration_ms: 2_000 }), { until: later }, NO_CONTEXT)).toEqual({
      kind: "timer",
      until: later,
    });
    const iso = `${new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 19)}+01:00`;
    expect(suspensionFor(sleep({}), { until: iso }, NO_CONTEXT)).toEqual({ kind: "timer", until: Date.parse(iso) });
    expect(suspensionFor(sleep({ until: "2001-01-01T00:00:00Z" }), {}, NO_CONTEXT)).toBeUndefined();
    expect(suspensionFor(sleep({ duration_ms: 0 }), {}, NO_CONTEXT)).toBeUndefined();
    for (const [implementation, input, message] of [
      [{}, {}, /exactly one of duration_ms and until; it has neither/],
      [{}, { duration_ms: 5, until: later }, /it has both/],
      [{}, { until: "tomorrow" }, /ISO-8601 with an offset or epoch milliseconds/],
      [{}, { until: "2026-12-02T03:04:05" }, /ISO-8601 with an offset/],
      [{}, { duration_ms: -1 }, /integer from 0 to 31536000000/],
      [{}, { until: Date.now() + 400 * 86_400_000 }, /more than 365 days ahead/],
    ] as const) {
      expect(() => suspensionFor(sleep(implementation), input, NO_CONTEXT)).toThrow(
        expect.objectContaining({ code: "sleep.invalid", retryable: false, message: expect.stringMatching(message) }),
      );
    }
  });

  it("never run a suspending kind as an action: reaching its handler is an internal error", async ({ expect }) => {
    const human = ResolvedAction.parse({
      id: "ask",
      version: 1,
      kind: "human",
      implementation: { prompt_template: "?", input_schema: true },
    });
    if (human.kind !== "human") {
      throw new Error("parsed as another kind");
    }
    const context = {} as ActionContext;
    await expect(ACTION_HANDLERS.human.run(human, {}, context)).rejects.toMatchObject({ code: "executor.internal" });
  });

  it("wait on I/O except context, which computes from its input alone", ({ expect }) => {
    expect(ACTION_KINDS.filter((kind) => !ACTION_TRAITS[kind].waitsOnIo)).toEqual(["context"]);
  });
});
