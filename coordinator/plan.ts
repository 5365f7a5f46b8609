import type { RunSnapshot } from "../schemas/resolved.ts";

export interface PlannedAction {
  step: string;
  id: string;
  version: number;
  kind: string;
  risk: "low" | "medium" | "high";
}

export interface PlannedNode {
  depends_on: string[];
  task: { id: string; version: number } | null;
  workflow: { id: string; version: number } | null;
  /** A node that chooses its child when it starts: the path it reads and the workflows it may choose. */
  workflow_choice: { from: string; allowed: string[] } | null;
  actions: PlannedAction[];
  when: string | null;
  foreach: string | null;
  high_risk: boolean;
}

export interface RunPlan {
  /** Nodes in dependency layers: every node's dependencies are in earlier layers. */
  layers: string[][];
  nodes: Record<string, PlannedNode>;
  /** Every step that would wait for an approval before running. */
  high_risk: { node: string; step: string; action: string }[];
}

/**
 * `mode: "preview"`: what a run would do, resolved exactly as a real start
 * would resolve it, without executing anything.
 */
export function planRun(snapshot: RunSnapshot): RunPlan {
  const workflow = snapshot.workflow.definition;
  const nodes: Record<string, PlannedNode> = {};
  const highRisk: RunPlan["high_risk"] = [];
  for (const [nodeId, node] of Object.entries(workflow.nodes)) {
    const task = snapshot.tasks[nodeId];
    const actions: PlannedAction[] = (task?.steps ?? []).map((step) => ({
      step: step.ref,
      id: step.action.id,
      version: step.action.version,
      kind: step.action.kind,
      risk: step.action.risk ?? "low",
    }));
    for (const action of actions.filter((candidate) => candidate.risk === "high")) {
      highRisk.push({ node: nodeId, step: action.step, action: `${action.id}@${action.version}` });
    }
    nodes[nodeId] = {
      depends_on: node.depends_on ?? [],
      task: task ? { id: task.id, version: task.version } : null,
      workflow: snapshot.workflows[nodeId] ?? null,
      workflow_choice:
        typeof node.workflow === "object" ? { from: node.workflow.from, allowed: [...node.workflow.allowed] } : null,
      actions,
      when: node.when ?? null,
      foreach: node.foreach?.items ?? null,
      high_risk: actions.some((action) => action.risk === "high"),
    };
  }
  return { layers: layersOf(nodes), nodes, high_risk: highRisk };
}

/**
 * Node ids in dependency layers: layer 0 has no dependencies, each node is one
 * layer after its deepest dependency; within a layer, the order of `nodes` (a
 * stored definition's keys are sorted by id, as canonical JSON sorts them).
 */
export function layersOf(nodes: Readonly<Record<string, { depends_on?: readonly string[] }>>): string[][] {
  const layerOf = new Map<string, number>();
  const depth = (id: string): number => {
    const known = layerOf.get(id);
    if (known !== undefined) {
      return known;
    }
    layerOf.set(id, 0); // Registration rejects cycles; this only guards the recursion.
    const layer = Math.max(-1, ...(nodes[id]?.depends_on ?? []).map(depth)) + 1;
    layerOf.set(id, layer);
    return layer;
  };
  const layers: string[][] = [];
  for (const id of Object.keys(nodes)) {
    const layer = depth(id);
    (layers[layer] ??= []).push(id);
  }
  return layers;
}
