import { describe, it } from "vitest";
import { openSealed } from "../../lib/journal/seal.ts";
import { isJournalKind, parseJournalBody } from "../../schemas/journal-bodies.ts";
import { api, journal, register, start, uniqueId, verifyRun, waitForRun } from "./helpers.ts";

/**
 * Choosing work at run time (docs/definitions.md): a `workflow` node or step
 * names its child with `{ from, allowed }`; the choice is checked against the
 * allowlist, pinned to the version the run resolved when it started, and
 * journaled as `workflow.chosen`.
 */

/** A child workflow that says which one it is. */
const childWorkflow = (id: string, name: string) => ({
  id,
  nodes: {
    say: {
      task: {
        steps: [
          {
            ref: "say",
            action: { kind: "context", implementation: { updates: [{ path: "who", expr: `'${name}'` }] } },
            output_mapping: { "output.who": "$.who" },
          },
        ],
      },
      output_mapping: { "output.who": "$.who" },
    },
  },
});

async function registerChildren() {
  const fast = uniqueId("fast");
  const slow = uniqueId("slow");
  await register({ workflows: [childWorkflow(fast, "fast"), childWorkflow(slow, "slow")] });
  // A later version of `slow`: a run pins the version current when it starts.
  await register({ workflows: [childWorkflow(slow, "slow v2")] });
  return { fast, slow };
}

const chosenEntries = async (runId: string) =>
  (await journal(runId))
    .filter((entry) => entry.kind === "workflow.chosen")
    .map((entry) => openSealed(entry.body) as typeof entry.body);

async function expectVerifiedOnTable(runId: string, expect: (value: unknown) => { toMatchObject(v: unknown): void }) {
  expect(await verifyRun(runId)).toMatchObject({ ok: true, attested: true });
  const entries = await journal(runId);
  const offTable = entries.filter(
    (entry) => !isJournalKind(entry.kind) || !parseJournalBody(entry.kind, entry.body).success,
  );
  expect({ offTable }).toMatchObject({ offTable: [] });
}

describe("choosing a child workflow at run time", () => {
  it("a workflow node runs the child its input names, from the allowlist, pinned and journaled", async ({ expect }) => {
    const { fast, slow } = await registerChildren();
    const parent = {
      id: uniqueId("router"),
      nodes: {
        route: {
          workflow: { from: "$.input.flow", allowed: [fast, slow] },
          output_mapping: { "output.who": "$.who" },
        },
      },
    };
    await register({ workflows: [parent] });
    // A preview cannot know the choice yet: it shows where it comes from and what it may be.
    const preview = await api("POST", `/v1/workflows/${parent.id}/runs`, { input: { flow: slow }, mode: "preview" });
    expect(preview.json.plan.nodes.route).toMatchObject({
      workflow: null,
      workflow_choice: { from: "$.input.flow", allowed: [fast, slow] },
    });
    const runId = await start(parent.id, { input: { flow: slow } });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ who: "slow v2" });
    expect(run.children).toMatchObject([{ node: "route", workflow: `${slow}@2`, status: "completed" }]);
    expect(await chosenEntries(runId)).toEqual([
      { node: "route", item: null, step: null, from: "$.input.flow", value: slow, workflow: `${slow}@2` },
    ]);
    await expectVerifiedOnTable(runId, expect);
  });

  it("a workflow node fails with workflow.not_allowed when the choice is not on its allowlist", async ({ expect }) => {
    const { fast } = await registerChildren();
    const parent = {
      id: uniqueId("router"),
      nodes: { route: { workflow: { from: "$.input.flow", allowed: [fast] } } },
    };
    await register({ workflows: [parent] });
    for (const flow of ["elsewhere", `${fast}@9`, 42]) {
      const run = await waitForRun(await start(parent.id, { input: { flow } }));
      expect(run.status).toBe("failed");
      expect(run.error).toMatchObject({ code: "workflow.not_allowed", node: "route" });
      expect(run.children).toEqual([]);
    }
  });

  it("a workflow step chooses from the task context, one child per foreach item", async ({ expect }) => {
    const { fast, slow } = await registerChildren();
    const parent = {
      id: uniqueId("router"),
      nodes: {
        each: {
          foreach: { items: "$.input.flows" },
          input_mapping: { flow: "$.item" },
          task: {
            steps: [
              {
                ref: "call",
                action: {
                  kind: "workflow",
                  implementation: { workflow: { from: "$.input.flow", allowed: [fast, slow] } },
                },
                output_mapping: { "output.who": "$.who" },
              },
            ],
          },
          output_mapping: { "output.who": "$.who" },
        },
      },
    };
    await register({ workflows: [parent] });
    const runId = await start(parent.id, { input: { flows: [fast, `${slow}@2`] } });
    const run = await waitForRun(runId);
    expect(run.status).toBe("completed");
    expect(run.output).toEqual({ who: ["fast", "slow v2"] });
    const chosen = await chosenEntries(runId);
    expect(chosen.sort((a, b) => a.item - b.item)).toEqual([
      { node: "each", item: 0, step: "call", from: "$.input.flow", value: fast, workflow: `${fast}@1` },
      { node: "each", item: 1, step: "call", from: "$.input.flow", value: `${slow}@2`, workflow: `${slow}@2` },
    ]);
    await expectVerifiedOnTable(runId, expect);
  });

  it("refuses a choice whose from is not a JSONPath or whose allowlist names an unknown workflow", async ({
    expect,
  }) => {
    const response = await api("POST", "/v1/definitions", {
      workflows: [
        {
          id: uniqueId("router"),
          nodes: { route: { workflow: { from: "$.input[", allowed: [uniqueId("nowhere")] } } },
        },
      ],
    });
    expect(response.status).toBe(400);
    const paths = response.json.error.details.map((detail: { path: string }) => detail.path);
    expect(paths).toEqual(
      expect.arrayContaining(["workflows.0.nodes.route.workflow.from", "workflows.0.nodes.route.workflow.allowed.0"]),
    );
  });
});
