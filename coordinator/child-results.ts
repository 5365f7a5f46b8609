import type { Json } from "../schemas/common.ts";
import { toFailure, type ErrorSummary } from "../schemas/errors.ts";
import type { Draft } from "./draft.ts";
import { completeInvocation, failNode } from "./nodes.ts";
import { withChild, withChildStatus } from "./summaries.ts";
import { toolChildFinished, toolChildStarted } from "./wait-tools.ts";
import { findWaiter, resumeInvocation } from "./waits.ts";

// What a child run reports back to the run that waits for it (coordinator/wait-children.ts opens the wait).

/** The child run exists: the journal links it to this run. */
export function childStarted(draft: Draft, key: string, runId: string): void {
  const found = findWaiter(draft, (waiting) => waiting.kind === "child" && waiting.key === key);
  const waiting = found?.suspension.waiting_for;
  if (!found || waiting?.kind !== "child") {
    toolChildStarted(draft, key, runId);
    return;
  }
  const { nodeId, invocation, suspension } = found;
  const started = { ...waiting, run_id: runId };
  draft.setInvocation(nodeId, invocation.index, {
    suspension: { ...suspension, waiting_for: started },
    children: withChild(invocation.children, {
      run_id: runId,
      step: suspension.step_ref,
      workflow: started.workflow,
      status: null,
    }),
  });
  draft.journal("child.started", {
    node: nodeId,
    item: draft.itemOf(nodeId, invocation),
    step: suspension.step_ref,
    child_run_id: runId,
    workflow: started.workflow,
  });
}

export interface ChildOutcome {
  key: string;
  run_id: string | null;
  status: "completed" | "failed" | "cancelled";
  output: Json;
  error: ErrorSummary | null;
  /** The child's attestation: its seq and hash, so custody can be verified across runs. */
  attestation: { seq: number; hash: string } | null;
}

/**
 * The child ended (or could not start). A task step gets the child's output,
 * or its error: as a failure (`propagate`) or as data (`return`). A node that
 * runs the child itself completes or fails with it.
 */
export function childFinished(draft: Draft, outcome: ChildOutcome): void {
  const found = findWaiter(draft, (waiting) => waiting.kind === "child" && waiting.key === outcome.key);
  const waiting = found?.suspension.waiting_for;
  if (!found || waiting?.kind !== "child") {
    toolChildFinished(draft, outcome);
    return;
  }
  const { nodeId, suspension } = found;
  const invocation = withChildStatus(draft, nodeId, found.invocation, outcome);
  draft.journal("child.finished", {
    node: nodeId,
    item: draft.itemOf(nodeId, invocation),
    step: suspension.step_ref,
    child_run_id: outcome.run_id,
    status: outcome.status,
    attestation: outcome.attestation,
    ...(outcome.error ? { error: outcome.error } : {}),
  });
  const error: ErrorSummary = outcome.error ?? {
    code: `workflow.child_${outcome.status}`,
    message: `the child run ended ${outcome.status}`,
  };
  if (suspension.step_ref === null) {
    if (outcome.status === "completed") {
      draft.setInvocation(nodeId, invocation.index, { status: "running", suspension: undefined });
      completeInvocation(draft, nodeId, { ...invocation, status: "running" }, outcome.output, 0);
    } else {
      const failure = toFailure(error, nodeId);
      draft.setInvocation(nodeId, invocation.index, { status: "failed", suspension: undefined, error: failure });
      failNode(draft, nodeId, failure);
    }
    return;
  }
  if (outcome.status === "completed") {
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: true, output: outcome.output } });
  } else if (waiting.on_failure === "return") {
    const output = { status: outcome.status, run_id: outcome.run_id, error };
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: true, output } });
  } else {
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: false, error } });
  }
}
