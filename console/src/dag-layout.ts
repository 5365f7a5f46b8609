/**
 * Where each node of a workflow's DAG is drawn: columns by dependency depth
 * (a node sits one column right of its deepest dependency, as the preview
 * plan's `layers` are built), rows in definition order within a column, and
 * one curve per `depends_on` edge.
 */

export interface DagNodeInput {
  id: string;
  dependsOn: readonly string[];
}

export interface PlacedNode {
  id: string;
  layer: number;
  x: number;
  y: number;
}

export interface PlacedEdge {
  from: string;
  to: string;
  /** An SVG path from the right side of `from` to the left side of `to`. */
  path: string;
}

export interface DagLayout {
  nodes: PlacedNode[];
  edges: PlacedEdge[];
  width: number;
  height: number;
}

export const NODE_WIDTH_PX = 180;
export const NODE_HEIGHT_PX = 58;
const COLUMN_GAP_PX = 70;
const ROW_GAP_PX = 22;
const MARGIN_PX = 12;

/**
 * Each node's layer: 0 without dependencies, else one more than its deepest
 * dependency. Unknown dependencies are ignored, and a cycle (which
 * registration refuses) cannot loop: a node is visited at most once per path.
 */
export function layersOf(nodes: readonly DagNodeInput[]): Map<string, number> {
  const byId = new Map(nodes.map((node) => [node.id, node]));
  const layers = new Map<string, number>();
  const visiting = new Set<string>();
  const layerOf = (id: string): number => {
    const known = layers.get(id);
    if (known !== undefined) {
      return known;
    }
    if (visiting.has(id)) {
      return 0;
    }
    visiting.add(id);
    const deps = (byId.get(id)?.dependsOn ?? []).filter((dep) => byId.has(dep));
    const layer = deps.length === 0 ? 0 : Math.max(...deps.map(layerOf)) + 1;
    visiting.delete(id);
    layers.set(id, layer);
    return layer;
  };
  for (const node of nodes) {
    layerOf(node.id);
  }
  return layers;
}

/** Positions (top-left corners) for every node, the edges between them, and the drawing's size. */
export function layoutDag(nodes: readonly DagNodeInput[]): DagLayout {
  const layers = layersOf(nodes);
  const rows = new Map<number, number>();
  const placed: PlacedNode[] = nodes.map((node) => {
    const layer = layers.get(node.id) ?? 0;
    const row = rows.get(layer) ?? 0;
    rows.set(layer, row + 1);
    return {
      id: node.id,
      layer,
      x: MARGIN_PX + layer * (NODE_WIDTH_PX + COLUMN_GAP_PX),
      y: MARGIN_PX + row * (NODE_HEIGHT_PX + ROW_GAP_PX),
    };
  });
  const at = new Map(placed.map((node) => [node.id, node]));
  const edges: PlacedEdge[] = [];
  for (const node of nodes) {
    const to = at.get(node.id);
    for (const dep of node.dependsOn) {
      const from = at.get(dep);
      if (from !== undefined && to !== undefined) {
        edges.push({ from: dep, to: node.id, path: curve(from, to) });
      }
    }
  }
  const columns = Math.max(0, ...placed.map((node) => node.layer + 1));
  const tallest = Math.max(0, ...rows.values());
  return {
    nodes: placed,
    edges,
    width: MARGIN_PX * 2 + columns * NODE_WIDTH_PX + Math.max(0, columns - 1) * COLUMN_GAP_PX,
    height: MARGIN_PX * 2 + tallest * NODE_HEIGHT_PX + Math.max(0, tallest - 1) * ROW_GAP_PX,
  };
}

function curve(from: PlacedNode, to: PlacedNode): string {
  const x1 = from.x + NODE_WIDTH_PX;
  const y1 = from.y + NODE_HEIGHT_PX / 2;
  const x2 = to.x;
  const y2 = to.y + NODE_HEIGHT_PX / 2;
  const bend = Math.max(24, (x2 - x1) / 2);
  return `M ${x1} ${y1} C ${x1 + bend} ${y1}, ${x2 - bend} ${y2}, ${x2} ${y2}`;
}
