import { openSealed } from "../lib/journal/seal.ts";
import { DEFAULT_PRIORITY } from "../schemas/limits.ts";
import type { AgentView, DispatchView, NodeDetail, NodeView, RunView, RunWait } from "../schemas/api.ts";
import { toFailureView } from "../schemas/errors.ts";
import type { JournalEntry } from "../schemas/journal.ts";
import { StepRecord } from "../schemas/payload.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import { triggerOf, type NodeRecord, type RunRecord } from "../schemas/run.ts";
import { toPlanResults } from "../plans/index.ts";
import { agentViews, type AgentLimits } from "./agent-view.ts";
import { toGateView } from "./children.ts";
import { allows, RUN_CONTROLS } from "./controls.ts";
import { layersOf } from "./plan.ts";
import type { CreateRunOutcome } from "./create.ts";
import type { RunState } from "./decide.ts";
import { isTerminal } from "./lifecycle.ts";
import { waitingForView } from "./wait-kinds.ts";

const iso = (ms: number | null): string | null => (ms === null ? null : new Date(ms).toISOString());

/** `GET /v1/runs/{id}`: the run as its users see it. */
/** What a run start answers: who the run is and where it stands, and how it ended once it has. */
export function toStartSummary({ record }: RunState): CreateRunOutcome["run"] {
  const { run_id, status, workflow } = record;
  if (!isTerminal(status)) {
    return { run_id, status, workflow };
  }
  return { run_id, status, workflow, ...outcomeOf(record) };
}

/** The workflow's limits as the run holds or waits for them (absent for a workflow without, or a run that gave them up). */
function limitsOf(record: RunRecord, snapshot: RunSnapshot | null): Pick<RunView, "limits"> {
  const uses = snapshot?.limits;
  if (uses === undefined || record.limits === undefined) {
    return {};
  }
  return {
    limits: record.limits.map((limit, index) => ({
      limit: uses[index]?.limit.id ?? "",
      key: limit.key,
      status: limit.status,
      since: new Date(limit.since).toISOString(),
    })),
  };
}

/** The run's output (once completed, else null) and error (null unless it has one). */
function outcomeOf(record: RunRecord): Pick<RunView, "output" | "error"> {
  return {
    output: record.status === "completed" ? record.context.output : null,
    error: record.error && toFailureView(record.error),
  };
}

/** The run view of a run whose snapshot is `snapshot` (null for a run not loaded yet: no foreach nodes known). */
export function toRunView(state: RunState, snapshot: RunSnapshot | null): RunView {
  const nodes = snapshot?.workflow.definition.nodes ?? {};
  const foreachNodes = new Set(Object.keys(nodes).filter((id) => nodes[id]?.foreach !== undefined));
  const { record } = state;
  const ordered = inDependencyOrder(state.nodes, nodes);
  return {
    run_id: record.run_id,
    workflow: record.workflow,
    status: record.status,
    mode: record.mode,
    input: record.context.input,
    ...outcomeOf(record),
    created_at: new Date(record.created_at).toISOString(),
    updated_at: new Date(record.updated_at).toISOString(),
    start_at: iso(record.start_at ?? null),
    nodes: Object.fromEntries(ordered.map(([id, node]) => [id, toNodeView(node, foreachNodes.has(id))])),
    gates: record.gates.map(toGateView),
    waiting_for: runWaits(ordered, foreachNodes),
    usage: record.usage,
    trigger: triggerOf(record),
    priority: record.priority ?? DEFAULT_PRIORITY,
    ...limitsOf(record, snapshot),
    parent: record.parent && parentOf(record.parent.run_id, record.parent.key),
    children: Object.entries(state.nodes)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
      .flatMap(([id, node]) =>
        node.invocations.flatMap((invocation) =>
          (invocation.children ?? []).map((child) => ({
            ...child,
            node: id,
            item: foreachNodes.has(id) ? invocation.index : null,
          })),
        ),
      ),
    ...(record.plan_steps ? { results: toPlanResults(record.plan_steps, state.nodes, record.context.state) } : {}),
    ...(record.undos === undefined ? {} : { compensation: toCompensationView(record) }),
    controls: RUN_CONTROLS.filter((control) => allows(control, record)),
    ...(record.erased === undefined
      ? {}
      : { erased: { ...record.erased, at: new Date(record.erased.at).toISOString() } }),
  };
}

/**
 * The run's nodes in dependency order, as a preview's `layers` list them
 * (layer by layer; within a layer in the stored definition's order, which is
 * by id), whatever order storage gave; a node the definition lacks comes last.
 */
function inDependencyOrder<T>(
  records: Readonly<Record<string, T>>,
  definition: Readonly<Record<string, { depends_on?: readonly string[] }>>,
): [string, T][] {
  const order = new Map(
    layersOf(definition)
      .flat()
      .map((id, position) => [id, position]),
  );
  const positionOf = (id: string) => order.get(id) ?? order.size;
  return Object.entries(records).sort(([a], [b]) => positionOf(a) - positionOf(b));
}

/** The run's undos and how its compensation went (the view shows it once a step enqueued an undo). */
function toCompensationView(record: RunRecord): NonNullable<RunView["compensation"]> {
  const compensation = record.compensation;
  return {
    status: compensation?.status ?? "none",
    trigger: compensation?.trigger ?? null,
    started_at: iso(compensation?.started_at ?? null),
    finished_at: iso(compensation?.finished_at ?? null),
    undos: (record.undos ?? []).map((undo) => ({
      node: undo.node,
      item: undo.item,
      step: undo.step,
      action: undo.action,
      status: undo.status,
      attempts: undo.attempts,
      error: undo.error && toFailureView(undo.error),
    })),
  };
}

/** The run's open waits, in node order: the first {@link VIEW_INVOCATIONS} of them. */
function runWaits(nodes: [string, NodeRecord][], foreachNodes: ReadonlySet<string>): RunWait[] {
  const waits: RunWait[] = [];
  for (const [node, record] of nodes) {
    for (const invocation of record.invocations) {
      const waitingFor = waitingForView(invocation);
      if (waitingFor === undefined) {
        continue;
      }
      const item = foreachNodes.has(node) ? invocation.index : null;
      waits.push({ ...waitingFor, node, item, step: invocation.suspension?.step_ref ?? null });
      if (waits.length === VIEW_INVOCATIONS) {
        return waits;
      }
    }
  }
  return waits;
}

function waitingFor(
  invocation: NodeRecord["invocations"][number],
): Pick<NodeView["invocations"][number], "waiting_for"> {
  const view = waitingForView(invocation);
  return view === undefined ? {} : { waiting_for: view };
}

/** How many invocations of a foreach node the run view lists (the node view lists them all). */
const VIEW_INVOCATIONS = 100;

/**
 * Where a child run was started, read from its start key
 * (`<parent>/<redrives>/<node>/<index>/<attempt>/<step or ->[/<iteration>]`,
 * coordinator/waits.ts waitKey): node ids and step refs never hold a `/`.
 */
function parentOf(runId: string, key: string): RunView["parent"] {
  const [, node, , , step] = key.startsWith(`${runId}/`) ? key.slice(runId.length + 1).split("/") : [];
  return { run_id: runId, node: node ?? "", step: step === undefined || step === "-" ? null : step };
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
    invocations: node.invocations.slice(0, VIEW_INVOCATIONS).map((invocation) => ({
      index: invocation.index,
      status: invocation.status,
      attempts: invocation.attempts,
      steps: invocation.steps ?? [],
      ...waitingFor(invocation),
    })),
  };
}

const DISPATCH_KINDS: ReadonlySet<string> = new Set(["task.completed", "task.failed", "task.suspended"]);

/**
 * `GET /v1/runs/{id}/nodes/{node}`: the node in full. Each invocation lists
 * its dispatches in journal order, from the entries that closed them
 * (`task.completed`, `task.failed`, `task.suspended`) with their step records;
 * an invocation of a task with an agent step (`agentSteps`) has its loop's `agent`.
 */
export async function toNodeDetail(
  nodeId: string,
  node: NodeRecord,
  foreach: boolean,
  entries: JournalEntry[],
  agentSteps: ReadonlyMap<string, AgentLimits> = new Map(),
): Promise<NodeDetail> {
  const dispatches = new Map<number, DispatchView[]>();
  for (const entry of entries) {
    if (!DISPATCH_KINDS.has(entry.kind) || entry.body.node !== nodeId) {
      continue;
    }
    const index = typeof entry.body.item === "number" ? entry.body.item : 0;
    // An erased undo input reads as null (its step record stays).
    const steps = StepRecord.array().safeParse(openSealed(entry.body)["steps"] ?? []);
    const list = dispatches.get(index) ?? [];
    list.push({
      seq: entry.seq,
      kind: entry.kind as DispatchView["kind"],
      attempt: typeof entry.body.attempt === "number" ? entry.body.attempt : 0,
      steps: steps.success ? steps.data : [],
    });
    dispatches.set(index, list);
  }
  const agents = await agentViews(nodeId, agentSteps, entries);
  return {
    children: childrenOf(nodeId, entries),
    node: nodeId,
    ...toNodeView(node, foreach),
    iterations: node.iterations,
    invocations: node.invocations.map((invocation) => ({
      index: invocation.index,
      status: invocation.status,
      attempts: invocation.attempts,
      input: invocation.input ?? null,
      output: invocation.output ?? null,
      error: invocation.error && toFailureView(invocation.error),
      dispatches: dispatches.get(invocation.index) ?? [],
      ...waitingFor(invocation),
      ...agentOf(agents.get(invocation.index)),
    })),
  };
}

function agentOf(agent: AgentView | undefined): Pick<NodeDetail["invocations"][number], "agent"> {
  return agent === undefined ? {} : { agent };
}

/** The child runs a node started (`child.started`), with how each ended (`child.finished`) once it has. */
function childrenOf(nodeId: string, entries: JournalEntry[]): NodeDetail["children"] {
  const ended = new Map<string, NodeDetail["children"][number]["status"]>();
  for (const entry of entries) {
    if (entry.kind === "child.finished" && entry.body.node === nodeId && typeof entry.body.child_run_id === "string") {
      const status = entry.body.status;
      ended.set(
        entry.body.child_run_id,
        status === "completed" || status === "failed" || status === "cancelled" ? status : null,
      );
    }
  }
  return entries
    .filter((entry) => entry.kind === "child.started" && entry.body.node === nodeId)
    .map((entry) => {
      const runId = String(entry.body.child_run_id);
      return {
        run_id: runId,
        item: typeof entry.body.item === "number" ? entry.body.item : null,
        step: typeof entry.body.step === "string" ? entry.body.step : null,
        workflow: String(entry.body.workflow),
        status: ended.get(runId) ?? null,
      };
    });
}
