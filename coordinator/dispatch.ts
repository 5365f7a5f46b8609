import type { InvocationRecord } from "../schemas/run.ts";
import {
  DEADLINE_GRACE_MS,
  DEFAULT_MAX_PARALLEL,
  DEFAULT_TASK_TIMEOUT_MS,
  inFlightCount,
  runFieldsOf,
} from "./dispatch-basics.ts";
import type { Draft } from "./draft.ts";
import { failNode } from "./nodes.ts";
import { handedDown, resourcesOf } from "./resources.ts";
import { MAX_CHILD_STARTS_PER_EVENT, requestChild, waitKey } from "./waits.ts";

/**
 * Tasks travel to the executor in groups of at most this many per call; each
 * call is one Worker invocation. Six, because a production invocation may
 * have only six outbound connections waiting for response headers at once
 * (more are queued; `wrangler dev` does not enforce this), and most tasks are
 * one outbound call at a time: a larger group would serialize their I/O.
 */
export const TASKS_PER_EXECUTOR_CALL = 6;
/**
 * Executor calls per Durable Object event, at most. The platform allows 32
 * calls per event; a wake makes at most 20 executor calls, 10 calls to start
 * 5 child runs (`MAX_CHILD_STARTS_PER_EVENT`, catalog + child each) or to
 * cancel children and release containers (`MAX_CLEANUP_CALLS_PER_EVENT`, one
 * call each, out of the same 10) and 1 call to wake itself again: 31.
 */
export const MAX_EXECUTOR_CALLS_PER_EVENT = 20;
/** What a wake that is an event of its own may spend: 20 executor calls, and 10 calls to start (two each) or cancel children and release containers. */
export const FULL_WAKE_BUDGET = {
  executorCalls: MAX_EXECUTOR_CALLS_PER_EVENT,
  otherCalls: 2 * MAX_CHILD_STARTS_PER_EVENT,
} as const;
/** At most this many tasks are dispatched per Durable Object event: 20 calls of 6. */
export const MAX_DISPATCHES_PER_EVENT = TASKS_PER_EXECUTOR_CALL * MAX_EXECUTOR_CALLS_PER_EVENT;
/** The invocations that may be dispatched now, in node then item order, within every limit. */
export function dispatchable(draft: Draft, budget: number): { nodeId: string; index: number }[] {
  if (draft.record.error !== null || draft.record.status === "paused") {
    return [];
  }
  const runLimit = draft.workflow.max_parallel ?? DEFAULT_MAX_PARALLEL;
  let room = Math.min(budget, runLimit - inFlightCount(draft));
  const picked: { nodeId: string; index: number }[] = [];
  for (const nodeId in draft.nodes) {
    if (room <= 0) {
      break;
    }
    const node = draft.nodes[nodeId];
    if (
      node === undefined ||
      node.invocations.length === 0 ||
      (node.status !== "pending" && node.status !== "running" && node.status !== "waiting")
    ) {
      continue;
    }
    const nodeLimit = draft.nodeDefinition(nodeId).foreach?.max_parallel ?? Number.POSITIVE_INFINITY;
    let nodeRoom = nodeLimit - node.invocations.filter((invocation) => invocation.status === "running").length;
    for (const invocation of node.invocations) {
      if (room <= 0 || nodeRoom <= 0) {
        break;
      }
      if (invocation.status === "pending") {
        picked.push({ nodeId, index: invocation.index });
        room -= 1;
        nodeRoom -= 1;
      }
    }
  }
  return picked;
}

/**
 * Dispatches what is ready, at most `taskBudget` tasks (≤ {@link MAX_DISPATCHES_PER_EVENT})
 * and `childBudget` sub-workflow nodes; only a wake calls this.
 */
export function dispatchReady(draft: Draft, childBudget: number, taskBudget = MAX_DISPATCHES_PER_EVENT): void {
  let childStarts = 0;
  for (const { nodeId, index } of dispatchable(draft, Math.min(taskBudget, MAX_DISPATCHES_PER_EVENT))) {
    const invocation = draft.invocation(nodeId, index);
    // An earlier dispatch of this batch may have failed the run.
    if (invocation?.status !== "pending" || draft.record.error !== null) {
      continue;
    }
    if (draft.nodeDefinition(nodeId).workflow !== undefined) {
      if (childStarts < childBudget) {
        childStarts += 1;
        startNodeChild(draft, nodeId, invocation);
      }
      continue;
    }
    dispatchInvocation(draft, nodeId, invocation);
  }
}

/** A node that runs a sub-workflow: its invocation waits for a child run, no executor involved. */
function startNodeChild(draft: Draft, nodeId: string, invocation: InvocationRecord): void {
  const pinned = draft.snapshot.workflows[nodeId];
  // A node that chose its child at run time keeps the choice on the invocation.
  const workflow = invocation.workflow ?? (pinned && `${pinned.id}@${pinned.version}`);
  if (!workflow) {
    failNode(draft, nodeId, {
      code: "node.no_workflow",
      message: `node ${nodeId} has no resolved workflow`,
      node: nodeId,
    });
    return;
  }
  const attempt = invocation.attempts + 1;
  const started = { ...invocation, attempts: attempt };
  const key = waitKey(draft, nodeId, started, null);
  draft.setInvocation(nodeId, invocation.index, {
    status: "suspended",
    attempts: attempt,
    dispatched_at: draft.now,
    suspension: {
      step_ref: null,
      step_index: 0,
      context: null,
      waiting_for: {
        kind: "child",
        key,
        run_id: null,
        workflow,
        on_failure: "propagate",
        input: invocation.input ?? null,
        requested_at: draft.now,
      },
    },
  });
  draft.setNode(nodeId, { status: "waiting", attempts: draft.node(nodeId).attempts + 1 });
  requestChild(
    draft,
    key,
    workflow,
    invocation.input ?? null,
    handedDown(draft, draft.nodeDefinition(nodeId).resource_bindings),
  );
}

function dispatchInvocation(draft: Draft, nodeId: string, invocation: InvocationRecord): void {
  const definition = draft.nodeDefinition(nodeId);
  const task = draft.snapshot.tasks[nodeId];
  if (!task) {
    failNode(draft, nodeId, { code: "node.no_task", message: `node ${nodeId} has no resolved task`, node: nodeId });
    return;
  }
  draft.record.dispatch_count += 1;
  // Continuing after a gate or a child is the same attempt, not a new one.
  const resuming = invocation.resume !== undefined;
  const attempt = resuming ? invocation.attempts : invocation.attempts + 1;
  const token = `${draft.record.run_id}.${draft.record.dispatch_count}`;
  const timeoutMs = definition.timeout_ms ?? DEFAULT_TASK_TIMEOUT_MS;
  draft.setInvocation(nodeId, invocation.index, {
    status: "running",
    attempts: attempt,
    token,
    dispatched_at: draft.now,
    deadline_at: draft.now + timeoutMs + DEADLINE_GRACE_MS,
    retry_at: null,
  });
  draft.setNode(nodeId, { status: "running", attempts: draft.node(nodeId).attempts + (resuming ? 0 : 1) });
  const item = definition.foreach ? invocation.index : null;
  draft.journal("task.dispatched", {
    node: nodeId,
    item,
    token,
    attempt,
    task: { id: task.id, version: task.version },
    ...(resuming ? { resume: invocation.resume?.mode ?? "after" } : {}),
  });
  draft.commands.push({
    kind: "dispatch",
    payload: {
      token_id: token,
      ...runFieldsOf(draft),
      node_id: nodeId,
      item_index: item,
      iteration: Math.max(1, draft.node(nodeId).iterations),
      task_id: task.id,
      task_version: task.version,
      task,
      input: invocation.input ?? null,
      resources: resourcesOf(draft, definition.resource_bindings),
      timeout_ms: timeoutMs,
      retry_attempt: attempt - 1,
      ...(invocation.resume ? { resume: invocation.resume } : {}),
    },
  });
}
