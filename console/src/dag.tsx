/**
 * The workflow's DAG as an SVG graph: a box per node coloured by its status
 * in the run view, `done/total` for a foreach node, links to the child runs a
 * node started (from the journal's `child.started` entries), and an arrow per
 * `depends_on` edge. Positions come from dag-layout.ts.
 */
import { z } from "zod";
import type { DefinitionRecord, NodeView, RunView } from "../../schemas/api.ts";
import { layoutDag, NODE_HEIGHT_PX, NODE_WIDTH_PX, type DagNodeInput } from "./dag-layout.ts";
import type { PlanStep } from "./plan-graph.ts";
import { navigate } from "./router.tsx";

const WorkflowNodes = z.looseObject({
  nodes: z.record(
    z.string(),
    z.looseObject({ depends_on: z.array(z.string()).optional(), workflow: z.unknown().optional() }),
  ),
});

interface GraphNode extends DagNodeInput {
  subWorkflow: boolean;
  /** A plan step's tool, shown in its box. */
  tool?: string;
}

/**
 * The nodes and edges: a plan run's from its plan's steps (plan-graph.ts;
 * any other node of the view, such as the inputs gate, unconnected), else
 * from the pinned definition, or (without one) the view's nodes, unconnected.
 */
export function graphNodes(
  view: RunView,
  definition: DefinitionRecord | null | undefined,
  plan: readonly PlanStep[] | null = null,
): GraphNode[] {
  if (plan !== null) {
    const steps: GraphNode[] = plan.map((step) => ({ ...step, dependsOn: step.dependsOn, subWorkflow: false }));
    const planned = new Set(plan.map((step) => step.id));
    const others = Object.keys(view.nodes).filter((id) => !planned.has(id));
    return [...others.map((id) => ({ id, dependsOn: [], subWorkflow: false })), ...steps];
  }
  const parsed = WorkflowNodes.safeParse(definition?.definition);
  if (!parsed.success) {
    return Object.keys(view.nodes).map((id) => ({ id, dependsOn: [], subWorkflow: false }));
  }
  return Object.entries(parsed.data.nodes).map(([id, node]) => ({
    id,
    dependsOn: node.depends_on ?? [],
    subWorkflow: node.workflow !== undefined,
  }));
}

/** `done/total` of a foreach node: items that settled, of all items. */
export function foreachProgress(node: NodeView | undefined): string | null {
  const items = node?.items;
  if (items === undefined) {
    return null;
  }
  const done = items.completed + items.failed + items.skipped + items.cancelled;
  return `${done}/${items.total}`;
}

export function DagGraph(props: {
  view: RunView;
  definition: DefinitionRecord | null | undefined;
  plan: readonly PlanStep[] | null;
  children: Map<string, string[]>;
  /** Called with a node's id when its box is clicked. */
  onSelect: (node: string) => void;
}) {
  const nodes = graphNodes(props.view, props.definition, props.plan);
  const layout = layoutDag(nodes);
  const byId = new Map(nodes.map((node) => [node.id, node]));
  return (
    <svg
      class="dag"
      role="img"
      aria-label="workflow graph"
      width={layout.width}
      height={layout.height}
      viewBox={`0 0 ${layout.width} ${layout.height}`}
    >
      <defs>
        <marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="7" markerHeight="7" orient="auto">
          <path d="M 0 0 L 10 5 L 0 10 z" class="dag-arrow" />
        </marker>
      </defs>
      {layout.edges.map((edge) => (
        <path key={`${edge.from}->${edge.to}`} d={edge.path} class="dag-edge" marker-end="url(#arrow)" />
      ))}
      {layout.nodes.map((placed) => (
        <DagBox
          key={placed.id}
          id={placed.id}
          x={placed.x}
          y={placed.y}
          node={props.view.nodes[placed.id]}
          subWorkflow={byId.get(placed.id)?.subWorkflow ?? false}
          tool={byId.get(placed.id)?.tool}
          children={props.children.get(placed.id) ?? []}
          onSelect={props.onSelect}
        />
      ))}
    </svg>
  );
}

function DagBox(props: {
  id: string;
  x: number;
  y: number;
  node: NodeView | undefined;
  subWorkflow: boolean;
  tool: string | undefined;
  children: string[];
  onSelect: (node: string) => void;
}) {
  const status = props.node?.status ?? "pending";
  const progress = foreachProgress(props.node);
  const detail = [
    status,
    progress === null ? null : `${progress} items`,
    props.subWorkflow ? "sub-workflow" : null,
    props.tool ?? null,
  ]
    .filter((part) => part !== null)
    .join(" · ");
  return (
    <g
      class={`dag-node status-${status}`}
      data-node={props.id}
      data-status={status}
      onClick={() => props.onSelect(props.id)}
    >
      <title>{`${props.id}: click for its invocations and steps`}</title>
      <rect x={props.x} y={props.y} width={NODE_WIDTH_PX} height={NODE_HEIGHT_PX} rx="8" />
      <text x={props.x + 10} y={props.y + 20} class="dag-title">
        {props.id}
      </text>
      <text x={props.x + 10} y={props.y + 37} class="dag-detail">
        {detail}
      </text>
      {props.children.map((child, index) => (
        <a
          key={child}
          href={`/runs/${child}`}
          onClick={(event: MouseEvent) => {
            event.preventDefault();
            event.stopPropagation(); // the link, not the box: no node panel
            navigate(`/runs/${child}`);
          }}
        >
          <text x={props.x + 10 + index * 56} y={props.y + 52} class="dag-child">
            child {index + 1} ↗
          </text>
        </a>
      ))}
    </g>
  );
}
