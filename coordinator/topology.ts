import type { Node as NodeDefinition } from "../schemas/definitions.ts";
import type { Draft } from "./draft.ts";

export interface Topology {
  /** Each node with its definition and dependencies, in definition order. */
  order: readonly (readonly [string, NodeDefinition, readonly string[]])[];
  /** A node's position in `order`. */
  index: ReadonlyMap<string, number>;
  /** The positions of the nodes that depend on a node. */
  dependents: ReadonlyMap<string, readonly number[]>;
}

/** Each workflow's dependency graph: built once per definition, not per event. */
const topologies = new WeakMap<Draft["workflow"], Topology>();

export function topologyOf(workflow: Draft["workflow"]): Topology {
  let topology = topologies.get(workflow);
  if (topology === undefined) {
    const order = Object.entries(workflow.nodes).map(([id, node]) => [id, node, node.depends_on ?? []] as const);
    const index = new Map(order.map(([id], position) => [id, position]));
    const dependents = new Map<string, number[]>();
    order.forEach(([, , dependencies], position) => {
      for (const dependency of dependencies) {
        dependents.set(dependency, [...(dependents.get(dependency) ?? []), position]);
      }
    });
    topology = { order, index, dependents };
    topologies.set(workflow, topology);
  }
  return topology;
}
