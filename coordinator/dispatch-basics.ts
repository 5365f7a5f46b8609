import type { TaskPayload } from "../schemas/payload.ts";
import type { InvocationRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";

/**
 * What every dispatch of a run shares, whoever sends it (a node's task, an
 * undo, an agent's tool call): the run's fields, the deadlines and the
 * run's limit on tasks in flight.
 */

/** A task attempt's bound when its node sets no `timeout_ms`: 15 minutes. */
export const DEFAULT_TASK_TIMEOUT_MS = 15 * 60_000;
/**
 * The executor enforces `timeout_ms` itself and reports the timeout; the
 * coordinator's own deadline comes this much later and only catches an
 * executor that never answered.
 */
export const DEADLINE_GRACE_MS = 10_000;

/** What every payload of the run carries about the run: its id, workflow, allowlist and parent. */
export function runFieldsOf(
  draft: Draft,
): Pick<TaskPayload, "workflow_run_id" | "workflow_id" | "workflow_version" | "tools" | "parent_run_id" | "priority"> {
  const { run_id, workflow, parent, priority } = draft.record;
  return {
    workflow_run_id: run_id,
    workflow_id: workflow.id,
    workflow_version: workflow.version,
    tools: draft.workflow.tools ?? [],
    // Artifacts of a parent run are readable by its children (executor/tools/artifacts.ts).
    ...(parent === null ? {} : { parent_run_id: parent.run_id }),
    // Its place in the queues of the limits its steps' actions and models name (default 5: not sent).
    ...(priority === undefined ? {} : { priority }),
  };
}

/** In-flight tasks per run when the workflow sets no `max_parallel`. */
export const DEFAULT_MAX_PARALLEL = 32;

/** Node statuses after which none of its invocations is open (running, suspended, retrying or pending). */
export const SETTLED_NODE: ReadonlySet<string> = new Set(["completed", "skipped", "cancelled", "failed"]);

/** Tasks in flight in the run: running invocations, and the running tool calls of agent steps between turns. */
export function inFlightCount(draft: Draft): number {
  let count = 0;
  for (const nodeId in draft.nodes) {
    const node = draft.nodes[nodeId];
    // A settled node has none running (completing waits for all; failing and cancelling close them).
    if (node !== undefined && !SETTLED_NODE.has(node.status)) {
      for (const invocation of node.invocations) {
        count += invocation.status === "running" ? 1 : runningToolCalls(invocation);
      }
    }
  }
  return count;
}

function runningToolCalls(invocation: InvocationRecord): number {
  const wait = invocation.status === "suspended" ? invocation.suspension?.waiting_for : undefined;
  return wait?.kind === "tools" ? wait.calls.filter((call) => call.status === "running").length : 0;
}
