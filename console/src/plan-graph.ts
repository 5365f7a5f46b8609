/**
 * A plan run's graph (docs/plans.md): its workflow is compiled, not
 * registered, so the graph comes from the run's first journal entry, whose
 * `plan.graph` lists each step with its id (the node id, `step-2`), its tool
 * and its dependencies. Each node runs one compiled step named `call`; the
 * console names it by the plan's step and tool instead. Pure, so it is
 * unit-tested (test/node/console-agent.test.ts).
 */
import { z } from "zod";

const PlanCreated = z.looseObject({
  plan: z.looseObject({
    graph: z.looseObject({
      steps: z.array(z.looseObject({ id: z.string(), tool: z.string(), depends_on: z.array(z.string()) })),
    }),
  }),
});

export interface PlanStep {
  id: string;
  tool: string;
  dependsOn: string[];
}

/** The plan's steps from a `run.created` entry body, or null for a run that is not a plan run. */
export function planStepsOf(entries: readonly { kind: string; body: unknown }[]): PlanStep[] | null {
  const created = entries.find((entry) => entry.kind === "run.created");
  const parsed = PlanCreated.safeParse(created?.body);
  if (!parsed.success) {
    return null;
  }
  return parsed.data.plan.graph.steps.map((step) => ({ id: step.id, tool: step.tool, dependsOn: step.depends_on }));
}

/** How a step of `node` is named: a plan run's compiled `call` step by its plan step and tool. */
export function stepName(step: string, node: string, plan: readonly PlanStep[] | null): string {
  const planned = plan?.find((candidate) => candidate.id === node);
  return planned === undefined || step !== "call" ? step : `${node} (${planned.tool})`;
}
