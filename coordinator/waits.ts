import type { Json } from "../schemas/common.ts";
import { toFailure, type ErrorSummary } from "../schemas/errors.ts";
import type { ResourceHandle, TaskResume, TaskSuspension, StepRecord } from "../schemas/payload.ts";
import type { GateRecord, InvocationRecord, Suspension } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import { completeInvocation, failNode, itemOf } from "./nodes.ts";
import { withChild, withChildStatus } from "./summaries.ts";

/**
 * What suspended tasks wait for: human gates (inputs and approvals) and child
 * runs. Nothing is held open meanwhile: the invocation is `suspended` with the
 * task context, and the task is dispatched again, with a resume, when the
 * answer or the child's result arrives.
 */

/** The deepest a chain of sub-workflows may go: a run started by a client is depth 0. */
export const MAX_WORKFLOW_DEPTH = 8;
/** Child runs started per wake, at most: each start is two calls (catalog, child). */
export const MAX_CHILD_STARTS_PER_EVENT = 5;

/**
 * A child run's key: stable for one attempt of one step (or node) of one
 * iteration of one run (and one redrive of it), so a start is idempotent and a
 * new attempt, iteration or redrive gets a new child. The iteration is a last
 * segment from a `repeat` node's second iteration on (the first keeps the key
 * runs had before iterations were part of it).
 */
export function childKey(draft: Draft, nodeId: string, invocation: InvocationRecord, stepRef: string | null): string {
  const { run_id, redrives } = draft.record;
  const iteration = draft.node(nodeId).iterations;
  const base = `${run_id}/${redrives}/${nodeId}/${invocation.index}/${invocation.attempts}/${stepRef ?? "-"}`;
  return iteration > 1 ? `${base}/${iteration}` : base;
}

/** A task stopped at a human, approval or workflow step: record the wait and open what it waits for. */
export function suspendInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  suspended: TaskSuspension,
  result: { token: string; steps: StepRecord[] },
): void {
  const wait = suspended.wait;
  // The steps that ran before the wait are on record now: the continuation starts at the waiting step.
  draft.journal("task.suspended", {
    node: nodeId,
    item: itemOf(draft, nodeId, invocation),
    token: result.token,
    attempt: invocation.attempts,
    step: suspended.step_ref,
    steps: result.steps,
  });
  const base = { step_ref: suspended.step_ref, step_index: suspended.step_index, context: suspended.context };
  if (wait.kind === "gate") {
    const gate = openGate(draft, nodeId, invocation, suspended.step_ref, wait);
    setSuspended(draft, nodeId, invocation, { ...base, waiting_for: { kind: "gate", gate_id: gate.gate_id } });
    return;
  }
  // The child is started by the next wake (a fresh event, with a budget of child
  // starts), not here: a hundred items reaching a workflow step at once must not
  // start a hundred runs from one event.
  const key = childKey(draft, nodeId, invocation, suspended.step_ref);
  setSuspended(draft, nodeId, invocation, {
    ...base,
    waiting_for: {
      kind: "child",
      key,
      run_id: null,
      workflow: wait.workflow,
      on_failure: wait.on_failure,
      input: wait.input,
      requested_at: null,
    },
  });
}

function setSuspended(draft: Draft, nodeId: string, invocation: InvocationRecord, suspension: Suspension): void {
  draft.setInvocation(nodeId, invocation.index, {
    status: "suspended",
    token: null,
    deadline_at: null,
    suspension,
    resume: undefined,
  });
}

/** Starts a child run (the Durable Object resolves and creates it), unless the depth limit forbids it. */
export function requestChild(
  draft: Draft,
  key: string,
  workflow: string,
  input: Json,
  resources?: Record<string, ResourceHandle>,
): void {
  draft.commands.push({
    kind: "start_child",
    key,
    workflow,
    input,
    depth: draft.record.depth + 1,
    ...(resources ? { resources } : {}),
  });
}

function openGate(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  stepRef: string,
  wait: Extract<TaskSuspension["wait"], { kind: "gate" }>,
): GateRecord {
  const gate: GateRecord = {
    gate_id: `gate_${draft.record.gates.length + 1}`,
    kind: wait.gate_kind,
    node: nodeId,
    item: itemOf(draft, nodeId, invocation),
    step: stepRef,
    prompt: wait.prompt,
    input_schema: wait.input_schema as GateRecord["input_schema"],
    status: "open",
    opened_at: draft.now,
    expires_at: wait.timeout_ms === undefined ? null : draft.now + wait.timeout_ms,
    on_timeout: wait.on_timeout ?? "fail",
    ...(wait.action ? { action: wait.action } : {}),
  };
  draft.record.gates = [...draft.record.gates, gate];
  const body = {
    gate_id: gate.gate_id,
    node: nodeId,
    item: gate.item,
    step: stepRef,
    expires_at: gate.expires_at === null ? null : new Date(gate.expires_at).toISOString(),
  };
  if (gate.kind === "approval") {
    draft.journal("approval.requested", gate.action ? { ...body, action: gate.action } : body);
  } else {
    draft.journal("gate.opened", body);
  }
  return gate;
}

function replaceGate(draft: Draft, gate: GateRecord): void {
  draft.record.gates = draft.record.gates.map((candidate) => (candidate.gate_id === gate.gate_id ? gate : candidate));
}

/** The invocation suspended on a gate, if it is still waiting for it. */
function waitingOn(
  draft: Draft,
  predicate: (suspension: Suspension) => boolean,
): { nodeId: string; invocation: InvocationRecord } | undefined {
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    const invocation = node.invocations.find(
      (candidate) =>
        candidate.status === "suspended" && candidate.suspension !== undefined && predicate(candidate.suspension),
    );
    if (invocation) {
      return { nodeId, invocation };
    }
  }
  return undefined;
}

/** Continues a suspended invocation: it goes back to `pending` and its next dispatch carries the resume. */
function resumeInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  resume: Omit<TaskResume, "step_index" | "context">,
): void {
  const suspension = invocation.suspension;
  if (!suspension?.context) {
    return;
  }
  draft.setInvocation(nodeId, invocation.index, {
    status: "pending",
    suspension: undefined,
    resume: { ...resume, step_index: suspension.step_index, context: suspension.context },
  });
}

/** A valid answer (the Durable Object checked it against the gate's schema). */
export function answerGate(draft: Draft, gateId: string, response: Json, responder: string | null): void {
  const gate = draft.record.gates.find((candidate) => candidate.gate_id === gateId);
  if (!gate || gate.status !== "open") {
    return;
  }
  replaceGate(draft, { ...gate, status: "answered", response, responder, responded_at: draft.now });
  const found = waitingOn(
    draft,
    (suspension) => suspension.waiting_for.kind === "gate" && suspension.waiting_for.gate_id === gateId,
  );
  if (gate.kind === "approval") {
    const approved =
      typeof response === "object" && response !== null && !Array.isArray(response) && response.approved === true;
    const reason =
      typeof response === "object" &&
      response !== null &&
      !Array.isArray(response) &&
      typeof response.reason === "string"
        ? response.reason
        : undefined;
    draft.journal(approved ? "approval.granted" : "approval.rejected", {
      gate_id: gateId,
      node: gate.node,
      step: gate.step,
      responder,
      ...(reason ? { reason } : {}),
    });
    if (found) {
      resumeInvocation(
        draft,
        found.nodeId,
        found.invocation,
        approved ? { mode: "approved" } : { mode: "rejected", ...(reason ? { reason } : {}) },
      );
    }
    return;
  }
  draft.journal("gate.answered", { gate_id: gateId, node: gate.node, step: gate.step, responder, response });
  if (found) {
    const output = { gate_id: gateId, response, responder, responded_at: new Date(draft.now).toISOString() };
    resumeInvocation(draft, found.nodeId, found.invocation, { mode: "after", outcome: { ok: true, output } });
  }
}

/** Gates past their expiry end as `on_timeout` says: a default answer, or a failed step. */
export function expireGates(draft: Draft): void {
  for (const gate of draft.record.gates) {
    if (gate.status !== "open" || gate.expires_at === null || draft.now < gate.expires_at) {
      continue;
    }
    const found = waitingOn(
      draft,
      (suspension) => suspension.waiting_for.kind === "gate" && suspension.waiting_for.gate_id === gate.gate_id,
    );
    if (gate.on_timeout === "fail") {
      replaceGate(draft, { ...gate, status: "expired", reason: "timed out" });
      draft.journal("gate.expired", { gate_id: gate.gate_id, node: gate.node, step: gate.step, on_timeout: "fail" });
      if (found) {
        resumeInvocation(draft, found.nodeId, found.invocation, {
          mode: "after",
          outcome: {
            ok: false,
            error: { code: "gate.expired", message: `gate ${gate.gate_id} expired without an answer` },
          },
        });
      }
      continue;
    }
    const response = gate.on_timeout.default;
    replaceGate(draft, {
      ...gate,
      status: "expired",
      reason: "timed out; the default answer was used",
      response,
      responder: null,
      responded_at: draft.now,
    });
    draft.journal("gate.expired", {
      gate_id: gate.gate_id,
      node: gate.node,
      step: gate.step,
      on_timeout: "default",
      response,
    });
    if (found) {
      const output = {
        gate_id: gate.gate_id,
        response,
        responder: null,
        responded_at: new Date(draft.now).toISOString(),
      };
      resumeInvocation(draft, found.nodeId, found.invocation, { mode: "after", outcome: { ok: true, output } });
    }
  }
}

/** The child run exists: the journal links it to this run. */
export function childStarted(draft: Draft, key: string, runId: string): void {
  const found = waitingOn(
    draft,
    (suspension) => suspension.waiting_for.kind === "child" && suspension.waiting_for.key === key,
  );
  if (!found?.invocation.suspension || found.invocation.suspension.waiting_for.kind !== "child") {
    return;
  }
  const suspension = found.invocation.suspension;
  const waiting = { ...found.invocation.suspension.waiting_for, run_id: runId };
  draft.setInvocation(found.nodeId, found.invocation.index, {
    suspension: { ...suspension, waiting_for: waiting },
    children: withChild(found.invocation.children, {
      run_id: runId,
      step: suspension.step_ref,
      workflow: waiting.workflow,
      status: null,
    }),
  });
  draft.journal("child.started", {
    node: found.nodeId,
    item: itemOf(draft, found.nodeId, found.invocation),
    step: suspension.step_ref,
    child_run_id: runId,
    workflow: waiting.workflow,
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
  const found = waitingOn(
    draft,
    (suspension) => suspension.waiting_for.kind === "child" && suspension.waiting_for.key === outcome.key,
  );
  const suspension = found?.invocation.suspension;
  if (!found || !suspension || suspension.waiting_for.kind !== "child") {
    return;
  }
  const { nodeId } = found;
  const invocation = withChildStatus(draft, nodeId, found.invocation, outcome);
  draft.journal("child.finished", {
    node: nodeId,
    item: itemOf(draft, nodeId, invocation),
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
  } else if (suspension.waiting_for.on_failure === "return") {
    const output = { status: outcome.status, run_id: outcome.run_id, error };
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: true, output } });
  } else {
    resumeInvocation(draft, nodeId, invocation, { mode: "after", outcome: { ok: false, error } });
  }
}

type ChildWait = Extract<Suspension["waiting_for"], { kind: "child" }>;

/** The child run a suspended invocation waits for, while that child is not known to exist yet. */
export function unstartedChild(invocation: InvocationRecord): ChildWait | null {
  const waiting = invocation.suspension?.waiting_for;
  return invocation.status === "suspended" && waiting?.kind === "child" && waiting.run_id === null ? waiting : null;
}

/** Whether a suspended invocation waits for a child run that nobody has asked to start yet. */
export function hasUnrequestedChild(draft: Draft): boolean {
  return Object.values(draft.nodes).some((node) =>
    node.invocations.some((invocation) => unstartedChild(invocation)?.requested_at === null),
  );
}

/** The earliest gate expiry, for the alarm. */
export function nextGateExpiry(draft: Draft): number {
  let at = Number.POSITIVE_INFINITY;
  for (const gate of draft.record.gates) {
    if (gate.status === "open" && gate.expires_at !== null) {
      at = Math.min(at, gate.expires_at);
    }
  }
  return at;
}
