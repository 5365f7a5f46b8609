import type { By } from "../schemas/auth.ts";
import { toPlanResults } from "../plans/index.ts";
import type { Json } from "../schemas/common.ts";
import type { Node as NodeDefinition } from "../schemas/definitions.ts";
import { toErrorSummary, type ErrorSummary, type Failure } from "../schemas/errors.ts";
import type { WaitRegistration } from "../schemas/events.ts";
import type { JournalBody, JournalKind } from "../schemas/journal-bodies.ts";
import type { ChildPlan, ResourceHandle, TaskPayload } from "../schemas/payload.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import type { InvocationRecord, NodeRecord, RunRecord, RunStatus } from "../schemas/run.ts";
import { assertTransition } from "./lifecycle.ts";
import { closeWaits } from "./wait-kinds.ts";
import { releaseRunLimits } from "./run-limits.ts";
import { DEFAULT_PRIORITY, type LimitConfig, type LimitHolder } from "../schemas/limits.ts";

export interface RunState {
  record: RunRecord;
  nodes: Record<string, NodeRecord>;
}

/** A journal entry to sign and append: a kind of the table in schemas/journal-bodies.ts, with that kind's body. */
export type JournalCommand = {
  [K in JournalKind]: { kind: "journal"; seq: number; entryKind: K; body: JournalBody<K> };
}[JournalKind];

export type Command =
  | { kind: "dispatch"; payload: TaskPayload }
  | JournalCommand
  /** Stop these containers (by their durable names): some of the run's `pending_releases`, sent by a wake. */
  | { kind: "release_resources"; containers: string[] }
  /**
   * Start (idempotently, by key) a child run of a pinned workflow `id@version`,
   * or of a `plan` step's plan, whose grants must be on `parent_tools` (this run's allowlist).
   */
  | {
      kind: "start_child";
      key: string;
      workflow: string;
      input: Json;
      depth: number;
      resources?: Record<string, ResourceHandle>;
      plan?: ChildPlan & { parent_tools: string[] };
      /** The parent's priority, which the child inherits (absent: 5). */
      priority?: number;
    }
  /** Cancel the child runs started under these keys: some of the run's `pending_cancels`, sent by a wake. */
  | { kind: "cancel_children"; keys: string[] }
  /** Register an event wait at the hub of each of its names (idempotent by key); their answer comes back as `event_registered`. */
  | { kind: "register_event_wait"; key: string; registration: WaitRegistration }
  /** The event wait ended: its hubs may forget it (best effort). */
  | { kind: "unregister_event_wait"; key: string; names: string[] }
  /**
   * Queue a holder at the object of (limit, key) (idempotent per holder); the
   * answer comes back as `limit_queued`, a later grant through `limitGranted`.
   * A step's holder has a lease (`LIMIT_LEASE_MS`), a run's none.
   */
  | { kind: "queue_for_limit"; limit: LimitConfig; key: string; holder: LimitHolder; lease: "step" | "run" }
  /** A step's limit wait closed: the object may drop these holders (best effort). */
  | { kind: "withdraw_from_limit"; limit: string; key: string; holder_ids: string[] }
  /** Give up the run's slots and places at these limit objects: some of its `pending_limit_releases`, sent by a wake. */
  | { kind: "release_limits"; objects: string[] }
  /** This run is a child and has ended: tell its parent (the DO adds the attestation's seq and hash). */
  | {
      kind: "notify_parent";
      parent_run_id: string;
      key: string;
      status: "completed" | "failed" | "cancelled";
      output: Json;
      error: ErrorSummary | null;
    };

export interface DecideContext {
  snapshot: RunSnapshot;
  now: number;
  /** Numbers in [0, 1) for backoff jitter; each retry draws its own. */
  random: () => number;
}

/** Attestations carry the run output only up to this size of JSON (else its size). */
const MAX_ATTESTED_OUTPUT_CHARS = 256 * 1024;

/** The record fields that list what a run still has to clean up (see coordinator/cleanup.ts). */
export type CleanupField = "pending_cancels" | "pending_releases" | "pending_limit_releases";

/**
 * One event's working copy of the run: copy-on-write (a node or invocation
 * object is replaced only when it changes, so storage can write only those),
 * plus the commands the event produces, in order.
 */
export class Draft {
  record: RunRecord;
  nodes: Record<string, NodeRecord>;
  readonly commands: Command[] = [];
  readonly snapshot: RunSnapshot;
  readonly now: number;
  readonly random: () => number;
  /**
   * Whether the event began with the run `running` or `waiting`: every node
   * that was ready then had started (each decision ends by starting what is
   * ready, nodes.ts `startReadyNodes`), so only the nodes whose status this
   * event changes ({@link statusChanged}) and their dependents can be ready now.
   */
  readonly fromActive: boolean;
  /** Nodes whose status this event changed, in order (repeats allowed). */
  readonly statusChanged: string[] = [];
  /** Every node this event replaced (the only way a node changes): what storage writes. */
  readonly changedNodes = new Set<string>();
  /** Nodes whose invocation list this draft has copied and may update in place. */
  private readonly ownedInvocations = new Set<string>();
  /** Dispatch token → invocation of the active nodes, built on first use and kept current by setInvocation. */
  private tokens: Map<string, { nodeId: string; index: number }> | null = null;
  /** The ids of the nodes running or waiting, in the run's order: made on first use, dropped when a status changes. */
  private active: string[] | null = null;
  /**
   * Cleanup (a child to cancel, a container to release) is pending that no
   * call carries yet and this event did not send: only a wake sends cleanup,
   * within its budget, so the run asks for a wake now.
   */
  cleanupDeferred = false;

  constructor(state: RunState, context: DecideContext) {
    this.record = { ...state.record };
    this.nodes = state.nodes; // copied on the first change (setNode), so a quiet event copies nothing
    this.snapshot = context.snapshot;
    this.fromActive = state.record.status === "running" || state.record.status === "waiting";
    this.now = context.now;
    this.random = context.random;
  }

  get workflow() {
    return this.snapshot.workflow.definition;
  }

  /** The run's place in the queues of limits. */
  get priority(): number {
    return this.record.priority ?? DEFAULT_PRIORITY;
  }

  nodeDefinition(nodeId: string): NodeDefinition {
    const node = this.workflow.nodes[nodeId];
    if (!node) {
      throw new Error(`node ${nodeId} is not in the snapshot`);
    }
    return node;
  }

  /** The item an invocation is (its index) in a foreach node; null in any other node. */
  itemOf(nodeId: string, invocation: InvocationRecord): number | null {
    return this.nodeDefinition(nodeId).foreach ? invocation.index : null;
  }

  node(nodeId: string): NodeRecord {
    const node = this.nodes[nodeId];
    if (!node) {
      throw new Error(`node ${nodeId} has no record`);
    }
    return node;
  }

  invocation(nodeId: string, index: number): InvocationRecord | undefined {
    const invocations = this.node(nodeId).invocations;
    const atPosition = invocations[index];
    return atPosition?.index === index ? atPosition : invocations.find((invocation) => invocation.index === index);
  }

  setNode(nodeId: string, patch: Partial<NodeRecord>): NodeRecord {
    const before = this.node(nodeId);
    const next = { ...before, ...patch };
    if (this.changedNodes.size === 0) {
      this.nodes = { ...this.nodes }; // the state this draft came from is never changed
    }
    this.nodes[nodeId] = next;
    this.changedNodes.add(nodeId);
    if (next.status !== before.status) {
      this.statusChanged.push(nodeId);
      this.active = null;
    }
    if (patch.invocations !== undefined) {
      // A list from elsewhere: copy it before changing an item, and re-index its tokens.
      this.ownedInvocations.delete(nodeId);
      this.tokens = null;
    }
    return next;
  }

  /**
   * Replaces one invocation. The node's list is copied once per draft (the
   * state it came from is never changed) and then updated in place, so a
   * burst of a hundred results costs a hundred item copies, not a hundred
   * list copies.
   */
  setInvocation(nodeId: string, index: number, patch: Partial<InvocationRecord>): void {
    const current = this.node(nodeId).invocations;
    const position =
      current[index]?.index === index ? index : current.findIndex((invocation) => invocation.index === index);
    const before = current[position];
    if (before === undefined) {
      return;
    }
    let invocations = current;
    if (!this.ownedInvocations.has(nodeId)) {
      invocations = current.slice();
      this.setNode(nodeId, { invocations });
      this.ownedInvocations.add(nodeId);
    }
    const after = { ...before, ...patch };
    invocations[position] = after;
    if (this.tokens !== null && before.token !== after.token) {
      if (before.token !== null) {
        this.tokens.delete(before.token);
      }
      if (after.token !== null) {
        this.tokens.set(after.token, { nodeId, index });
      }
    }
  }

  /**
   * The ids of the nodes that are running or waiting: only they hold a
   * dispatch in flight or a suspended invocation (a pending node has none
   * yet, a settled one none any more). A decision asks several times, and a
   * long chain has one such node among hundreds.
   */
  activeNodeIds(): readonly string[] {
    this.active ??= Object.keys(this.nodes).filter((id) => {
      const status = this.nodes[id]?.status;
      return status === "running" || status === "waiting";
    });
    return this.active;
  }

  /**
   * The invocation that holds this dispatch token, if any: looked up among the
   * active nodes' tokens first (a result's dispatch is in flight), then among
   * every node's (a completed invocation gives its token up, so a late copy
   * of a result is found in neither).
   */
  findByToken(token: string): { nodeId: string; invocation: InvocationRecord } | undefined {
    if (this.tokens === null) {
      this.tokens = new Map();
      for (const nodeId of this.activeNodeIds()) {
        this.indexTokens(this.tokens, nodeId);
      }
    }
    const found = this.tokens.get(token);
    const invocation = found && this.invocation(found.nodeId, found.index);
    if (found && invocation?.token === token) {
      return { nodeId: found.nodeId, invocation };
    }
    for (const nodeId of Object.keys(this.nodes)) {
      const held = this.node(nodeId).invocations.find((candidate) => candidate.token === token);
      if (held !== undefined) {
        return { nodeId, invocation: held };
      }
    }
    return undefined;
  }

  private indexTokens(tokens: Map<string, { nodeId: string; index: number }>, nodeId: string): void {
    for (const invocation of this.node(nodeId).invocations) {
      if (invocation.token !== null) {
        tokens.set(invocation.token, { nodeId, index: invocation.index });
      }
    }
  }

  /** Appends a journal entry (only a kind of the table in schemas/journal-bodies.ts, with its body); returns its seq. */
  journal<K extends JournalKind>(entryKind: K, body: JournalBody<K>): number {
    const seq = this.record.journal_seq + 1;
    this.record.journal_seq = seq;
    this.commands.push(journalCommand(seq, entryKind, body));
    return seq;
  }

  /** Moves the run to `to`, journaled with the reason and, for a transition a call caused, `by`. */
  transition(to: RunStatus, reason: string, by?: By): number {
    const from = this.record.status;
    assertTransition(from, to);
    this.record.status = to;
    this.record.updated_at = this.now;
    return this.journal("run.status", { from, to, reason, ...(by === undefined ? {} : { by }) });
  }

  /** Ends the run: nodes that never ran are cancelled, and the attestation closes the journal. */
  finish(outcome: "completed" | "failed" | "cancelled", reason: string, error: Failure | null, by?: By): void {
    if (outcome !== "completed") {
      this.cancelOpenNodes(outcome === "cancelled" ? "run cancelled" : "run failed");
    }
    const statusSeq = this.transition(outcome, reason, by);
    this.record.error = error;
    // Containers a parent handed down are the parent's to release, not this run's. They are
    // recorded in the terminal commit and released by wakes until each release() answered.
    const containers = Object.keys(this.workflow.resources ?? {})
      .filter((resource) => this.record.inherited_resources[resource] === undefined)
      .map((resource) => `${this.record.run_id}/${resource}`);
    this.addCleanup("pending_releases", containers);
    releaseRunLimits(this);
    const cited = outcome === "completed" ? settledSeqs(this.nodes) : [...failedSeqs(this.nodes), statusSeq];
    const output = JSON.stringify(this.record.context.output);
    this.journal("attest", {
      outcome,
      reason,
      cited,
      created_by: this.record.created_by,
      workflow: { id: this.record.workflow.id, version: this.record.workflow.version },
      ...(outcome === "completed"
        ? output.length <= MAX_ATTESTED_OUTPUT_CHARS
          ? { output: this.record.context.output }
          : { output_chars: output.length }
        : {}),
      ...(error ? { error: { ...error } } : {}),
    });
    this.notifyParent();
  }

  /**
   * A child run that ended tells its parent (again, until the parent
   * acknowledges) its output: a plan run's is `{ results }`, its ToolResults
   * as its view shows them (a plan run's own `output` holds nothing).
   */
  notifyParent(): void {
    const { parent, status, plan_steps: planSteps, context } = this.record;
    if (parent && !parent.notified && (status === "completed" || status === "failed" || status === "cancelled")) {
      const error = this.record.error ? toErrorSummary(this.record.error) : null;
      const output: Json =
        status !== "completed"
          ? null
          : planSteps
            ? { results: toPlanResults(planSteps, this.nodes, context.state) }
            : context.output;
      this.commands.push({
        kind: "notify_parent",
        parent_run_id: parent.run_id,
        key: parent.key,
        status,
        output,
        error,
      });
    }
  }

  /** Records cleanup to do (once each); a wake sends it. */
  addCleanup(field: CleanupField, values: readonly string[]): void {
    const current = this.record[field] ?? [];
    const known = new Set(current);
    const added = values.filter((value) => !known.has(value));
    if (added.length > 0) {
      this.record[field] = [...current, ...added];
      this.cleanupDeferred = true;
    }
  }

  /** Forgets cleanup that is done (a child confirmed its cancel, a container answered its release). */
  settleCleanup(field: CleanupField, values: readonly string[]): void {
    const current = this.record[field];
    if (current === undefined) {
      return;
    }
    const done = new Set(values);
    const left = current.filter((value) => !done.has(value));
    if (left.length === current.length) {
      return;
    }
    if (left.length > 0) {
      this.record[field] = left;
    } else {
      // Absent rather than empty: a run with nothing pending stores what it always did.
      delete this.record[field];
    }
  }

  /** Abandons every node not settled: dispatches in flight are forgotten, their late results ignored. */
  cancelOpenNodes(reason: string): void {
    for (const [nodeId, node] of Object.entries(this.nodes)) {
      if (node.status === "pending" || node.status === "running" || node.status === "waiting") {
        // First, while the suspensions still say what they wait for: gates close, children are cancelled.
        closeWaits(this, nodeId, reason);
        const invocations = node.invocations.map((invocation) =>
          isOpen(invocation) ? closeInvocation(invocation, "cancelled") : invocation,
        );
        this.setNode(nodeId, { status: "cancelled", invocations, finished_at: this.now });
        this.journal("node.cancelled", { node: nodeId, reason });
      }
    }
  }
}

/**
 * The journal command of one entry. The compiler cannot see that a generic
 * kind and its body pick the same row of the mapped union; the signature here
 * is what ties them, so this is the one place that says so.
 */
function journalCommand<K extends JournalKind>(seq: number, entryKind: K, body: JournalBody<K>): JournalCommand {
  return { kind: "journal", seq, entryKind, body } as JournalCommand;
}

export function isOpen(invocation: InvocationRecord): boolean {
  return (
    invocation.status === "pending" ||
    invocation.status === "running" ||
    invocation.status === "retrying" ||
    invocation.status === "suspended"
  );
}

/** An invocation that will not run again: no token, no timers. */
export function closeInvocation(invocation: InvocationRecord, status: "cancelled" | "failed"): InvocationRecord {
  const { suspension: _suspension, resume: _resume, ...rest } = invocation;
  return { ...rest, status, token: null, retry_at: null, deadline_at: null };
}

function settledSeqs(nodes: Record<string, NodeRecord>): number[] {
  return Object.values(nodes)
    .map((node) => node.settled_seq)
    .filter((seq): seq is number => seq !== null)
    .sort((a, b) => a - b);
}

function failedSeqs(nodes: Record<string, NodeRecord>): number[] {
  return Object.values(nodes)
    .filter((node) => node.status === "failed" && node.settled_seq !== null)
    .map((node) => node.settled_seq as number)
    .sort((a, b) => a - b);
}
