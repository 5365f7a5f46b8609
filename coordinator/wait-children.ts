import { handedDown } from "./resources.ts";
import type { WaitKindRow } from "./wait-kinds.ts";
import { requestChild } from "./waits.ts";

/**
 * Child runs: a `workflow` step's, a `plan` step's (its plan compiled into
 * the child's workflow), or a sub-workflow node's (no task, no step). The
 * child is started by a wake (a fresh event, with a budget of child starts),
 * not where the wait opens: a hundred items reaching a workflow step at once
 * must not start a hundred runs from one event.
 */
export const childWaits: WaitKindRow<"child"> = {
  open: (_draft, { key }, wire) => ({
    kind: "child",
    key,
    run_id: null,
    workflow: wire.workflow,
    on_failure: wire.on_failure,
    input: wire.input,
    requested_at: null,
    ...(wire.plan ? { plan: wire.plan } : {}),
  }),
  expiresAt: () => null, // the child has its own deadline
  expire: () => undefined,
  unsent: (wait) => wait.run_id === null && wait.requested_at == null,
  inFlight: (wait) => wait.run_id === null,
  /**
   * Asks for the child nobody is starting: a new one (never requested), or one
   * whose start was lost with a restart (requested, but not among the starts
   * live in this instance; starting is idempotent by key).
   */
  send(draft, { nodeId, invocation, suspension, wait }, live, budget) {
    if (budget < 1 || wait.run_id !== null || (wait.requested_at != null && live.childStarts.has(wait.key))) {
      return 0;
    }
    // A node that is a sub-workflow hands its resources down; a workflow step does not.
    const resources =
      suspension.step_ref === null ? handedDown(draft, draft.nodeDefinition(nodeId).resource_bindings) : undefined;
    requestChild(draft, wait.key, wait.workflow, wait.input, resources, wait.plan);
    draft.setInvocation(nodeId, invocation.index, {
      suspension: { ...suspension, waiting_for: { ...wait, requested_at: draft.now } },
    });
    return 1;
  },
  /**
   * A child that was asked for is cancelled: the cancel is journaled
   * (`child.cancel_requested`) and recorded in `pending_cancels`, committed
   * with this event, and a wake sends it until the child confirms. A child
   * never asked for does not exist and needs nothing.
   */
  close(draft, { nodeId, invocation, suspension, wait }) {
    if (wait.run_id === null && wait.requested_at == null) {
      return;
    }
    draft.journal("child.cancel_requested", {
      node: nodeId,
      item: draft.itemOf(nodeId, invocation),
      step: suspension.step_ref,
      child_run_id: wait.run_id,
      key: wait.key,
    });
    draft.addCleanup("pending_cancels", [wait.key]);
  },
  view: (wait) => ({ kind: "child", run_id: wait.run_id, workflow: wait.workflow }),
};
