import { toFailureView, type NodeRecord, type NodeView, type RunView } from "../schemas/index.ts";
import { toGateView } from "./children.ts";
import type { RunState } from "./decide.ts";

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** `GET /v1/runs/{id}`: the run as its users see it. */
export function toRunView(state: RunState, foreachNodes: ReadonlySet<string>): RunView {
  const { record } = state;
  return {
    run_id: record.run_id,
    workflow: record.workflow,
    status: record.status,
    mode: record.mode,
    input: record.context.input,
    output: record.status === "completed" ? record.context.output : null,
    error: record.error && toFailureView(record.error),
    created_at: new Date(record.created_at).toISOString(),
    updated_at: new Date(record.updated_at).toISOString(),
    nodes: Object.fromEntries(
      Object.entries(state.nodes).map(([id, node]) => [id, toNodeView(node, foreachNodes.has(id))]),
    ),
    gates: record.gates.map(toGateView),
    usage: record.usage,
  };
}

function toNodeView(node: NodeRecord, foreach: boolean): NodeView {
  const count = (status: string) => node.invocations.filter((invocation) => invocation.status === status).length;
  return {
    status: node.status,
    attempts: node.attempts,
    started_at: iso(node.started_at),
    finished_at: iso(node.finished_at),
    ...(node.error ? { error: toFailureView(node.error) } : {}),
    ...(foreach
      ? {
          items: {
            total: node.invocations.length,
            pending: count("pending") + count("retrying"),
            running: count("running") + count("suspended"),
            completed: count("completed"),
            failed: count("failed"),
            skipped: count("skipped"),
            cancelled: count("cancelled"),
          },
        }
      : {}),
  };
}
