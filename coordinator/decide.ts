import { ensureEngineError } from "../lib/errors.ts";
import { evalCelBool } from "../lib/expr/cel.ts";
import { selectJsonPath } from "../lib/expr/jsonpath.ts";
import { applyOutputMapping, buildInput, type Json, type JsonRecord } from "../lib/expr/mapping.ts";
import { validateJson } from "../lib/json-schema.ts";
import { resolveRetryPolicy, retryDelayMs } from "../lib/retry.ts";
import type {
  Failure,
  InvocationRecord,
  JsonObject,
  NodeRecord,
  Node as NodeDefinition,
  RunRecord,
  RunSnapshot,
  RunStatus,
  TaskPayload,
  TaskResult,
} from "../schemas/index.ts";
import { assertTransition, isTerminal } from "./lifecycle.ts";

/**
 * The coordinator's brain: `decide(state, event, clock)` returns the next
 * state and the commands that carry it out. No storage, no I/O, no clock or
 * randomness of its own: the Durable Object persists the state and journal
 * entries in one transaction, then performs the dispatches.
 *
 * Dispatches happen only on `wake` (the alarm), at most
 * {@link MAX_DISPATCHES_PER_EVENT} per event: each is one Worker invocation,
 * and the platform allows a Durable Object event 32. Results never dispatch
 * inline; they ask for a wake instead, which is a fresh event.
 */

/** At most this many executor calls per Durable Object event (the platform's cap is 32). */
export const MAX_DISPATCHES_PER_EVENT = 24;
/** In-flight tasks per run when the workflow sets no `max_parallel`. */
export const DEFAULT_MAX_PARALLEL = 32;
/** A task attempt's bound when its node sets no `timeout_ms`: 15 minutes. */
export const DEFAULT_TASK_TIMEOUT_MS = 15 * 60_000;

export interface RunState {
  record: RunRecord;
  nodes: Record<string, NodeRecord>;
}

export type RunEvent =
  /** Leave `drafting`: the run is queued and will start on the next wake. */
  | { type: "start" }
  /** The alarm: fire due timers, find lost dispatches, dispatch ready work. */
  | { type: "wake"; live: readonly string[] }
  | { type: "task_result"; result: TaskResult }
  | { type: "cancel"; reason: string };

export type Command =
  | { kind: "dispatch"; payload: TaskPayload }
  | { kind: "journal"; seq: number; entryKind: string; body: JsonObject };

export interface Decision {
  state: RunState;
  commands: Command[];
  /** When the alarm should next fire, or null for never. */
  wakeAt: number | null;
}

export interface DecideContext {
  snapshot: RunSnapshot;
  now: number;
  /** A number in [0, 1) for backoff jitter. */
  random: number;
}

type Handlers = { [K in RunEvent["type"]]: (draft: Draft, event: Extract<RunEvent, { type: K }>) => void };

const HANDLERS: Handlers = {
  start: (draft) => {
    if (draft.record.status === "drafting") {
      draft.transition("queued", "started");
    }
  },
  wake: (draft, event) => onWake(draft, new Set(event.live)),
  task_result: (draft, event) => onTaskResult(draft, event.result),
  cancel: (draft, event) => {
    if (!isTerminal(draft.record.status)) {
      draft.cancelInFlight("run cancelled");
      draft.finish("cancelled", event.reason, null);
    }
  },
};

export function decide(state: RunState, event: RunEvent, context: DecideContext): Decision {
  const draft = new Draft(state, context);
  HANDLERS[event.type](draft as never, event as never);
  if (!isTerminal(draft.record.status) && draft.record.status !== "drafting" && event.type !== "cancel") {
    advance(draft);
  }
  return draft.toDecision();
}

// ─── The draft: copy-on-write state plus the commands it produces ────────────

class Draft {
  record: RunRecord;
  nodes: Record<string, NodeRecord>;
  readonly commands: Command[] = [];
  readonly snapshot: RunSnapshot;
  readonly now: number;
  readonly random: number;

  constructor(state: RunState, context: DecideContext) {
    this.record = { ...state.record };
    this.nodes = { ...state.nodes };
    this.snapshot = context.snapshot;
    this.now = context.now;
    this.random = context.random;
  }

  get workflow() {
    return this.snapshot.workflow.definition;
  }

  nodeDefinition(nodeId: string): NodeDefinition {
    const node = this.workflow.nodes[nodeId];
    if (!node) {
      throw new Error(`node ${nodeId} is not in the snapshot`);
    }
    return node;
  }

  node(nodeId: string): NodeRecord {
    const node = this.nodes[nodeId];
    if (!node) {
      throw new Error(`node ${nodeId} has no record`);
    }
    return node;
  }

  /** Replaces a node record: new objects only for what changed, so storage writes only those. */
  setNode(nodeId: string, patch: Partial<NodeRecord>): NodeRecord {
    const next = { ...this.node(nodeId), ...patch };
    this.nodes[nodeId] = next;
    return next;
  }

  setInvocation(nodeId: string, index: number, patch: Partial<InvocationRecord>): void {
    const node = this.node(nodeId);
    const invocations = node.invocations.map((invocation) => (invocation.index === index ? { ...invocation, ...patch } : invocation));
    this.setNode(nodeId, { invocations });
  }

  /** Appends a journal entry; returns its seq. */
  journal(entryKind: string, body: JsonObject): number {
    const seq = this.record.journal_seq + 1;
    this.record.journal_seq = seq;
    this.commands.push({ kind: "journal", seq, entryKind, body });
    return seq;
  }

  transition(to: RunStatus, reason: string): number {
    const from = this.record.status;
    assertTransition(from, to);
    this.record.status = to;
    this.record.updated_at = this.now;
    return this.journal("run.status", { from, to, reason });
  }

  /** Ends the run and signs the attestation that closes its journal. */
  finish(outcome: "completed" | "failed" | "cancelled", reason: string, error: Failure | null): void {
    const statusSeq = this.transition(outcome, reason);
    this.record.error = error;
    const cited = outcome === "completed" ? settledSeqs(this.nodes) : [...failedSeqs(this.nodes), statusSeq];
    this.journal("attest", {
      outcome,
      reason,
      cited,
      created_by: "trellis/coordinator",
      workflow: { id: this.record.workflow.id, version: this.record.workflow.version },
      ...(outcome === "completed" ? { output: this.record.context.output } : {}),
      ...(error ? { error: { ...error } } : {}),
    });
  }

  /** Abandons every dispatch in flight: their late results will be ignored. */
  cancelInFlight(reason: string): void {
    for (const [nodeId, node] of Object.entries(this.nodes)) {
      if (node.status === "pending" || node.status === "running" || node.status === "waiting") {
        const invocations = node.invocations.map((invocation) =>
          isOpen(invocation) ? { ...invocation, status: "cancelled" as const, token: null, retry_at: null, deadline_at: null } : invocation,
        );
        this.setNode(nodeId, { status: "cancelled", invocations, finished_at: this.now });
        this.journal("node.cancelled", { node: nodeId, reason });
      }
    }
  }

  toDecision(): Decision {
    return { state: { record: this.record, nodes: this.nodes }, commands: this.commands, wakeAt: nextWakeAt(this) };
  }
}

function isOpen(invocation: InvocationRecord): boolean {
  return invocation.status === "pending" || invocation.status === "running" || invocation.status === "retrying";
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

// ─── Events ──────────────────────────────────────────────────────────────────

function onWake(draft: Draft, live: ReadonlySet<string>): void {
  const status = draft.record.status;
  if (status === "drafting" || status === "paused" || isTerminal(status)) {
    return;
  }
  if (status === "queued") {
    draft.transition("running", "dispatching");
  }
  if (draft.record.deadline_at !== null && draft.now >= draft.record.deadline_at) {
    draft.cancelInFlight("run timed out");
    draft.finish("failed", "run timed out", { code: "run.timeout", message: `the run exceeded its timeout_ms` });
    return;
  }
  for (const nodeId of Object.keys(draft.nodes)) {
    for (const { index } of draft.node(nodeId).invocations) {
      // Re-read each invocation: an earlier timeout in this loop may have failed its
      // node or, with fail_fast, cancelled it, and a stale copy would be acted on twice.
      const invocation = draft.node(nodeId).invocations.find((candidate) => candidate.index === index);
      if (invocation) {
        checkInvocationTimers(draft, nodeId, invocation, live);
      }
    }
  }
  if (!isTerminal(draft.record.status)) {
    startReadyNodes(draft);
    dispatchReady(draft);
  }
}

/** Timeouts, lost dispatches and due retries of one invocation. */
function checkInvocationTimers(draft: Draft, nodeId: string, invocation: InvocationRecord, live: ReadonlySet<string>): void {
  if (invocation.status === "running" && invocation.token !== null) {
    if (invocation.deadline_at !== null && draft.now >= invocation.deadline_at) {
      draft.journal("task.timeout", { node: nodeId, item: itemOf(draft, nodeId, invocation), token: invocation.token, attempt: invocation.attempts });
      failInvocation(draft, nodeId, invocation, {
        type: "task.timeout",
        message: `attempt ${invocation.attempts} exceeded its timeout`,
        retryable: true,
        stepRef: null,
      });
    } else if (!live.has(invocation.token)) {
      // The coordinator restarted while this dispatch was in flight: its result can never arrive.
      draft.journal("task.lost", { node: nodeId, item: itemOf(draft, nodeId, invocation), token: invocation.token, attempt: invocation.attempts });
      draft.setInvocation(nodeId, invocation.index, { status: "pending", token: null, deadline_at: null, attempts: invocation.attempts - 1 });
    }
  } else if (invocation.status === "retrying" && invocation.retry_at !== null && draft.now >= invocation.retry_at) {
    draft.setInvocation(nodeId, invocation.index, { status: "pending", retry_at: null });
  }
}

function onTaskResult(draft: Draft, result: TaskResult): void {
  const found = findInvocation(draft, result.token_id);
  if (isTerminal(draft.record.status)) {
    return; // The journal is closed by its attestation; nothing may follow it.
  }
  if (!found || found.invocation.status !== "running") {
    draft.journal("task.result_ignored", {
      token: result.token_id,
      reason: found ? `the invocation is ${found.invocation.status}` : "no dispatch in flight has this token",
      success: result.success,
    });
    return;
  }
  const { nodeId, invocation } = found;
  if (result.success) {
    completeInvocation(draft, nodeId, invocation, (result.output ?? null) as Json, result.metrics.duration_ms);
  } else {
    const error = result.error;
    failInvocation(draft, nodeId, invocation, {
      type: error?.type ?? "task.failed",
      message: error?.message ?? "the task failed",
      retryable: error?.retryable ?? false,
      retryAfterMs: error?.retry_after_ms,
      stepRef: error?.step_ref ?? null,
    });
  }
}

function findInvocation(draft: Draft, token: string): { nodeId: string; invocation: InvocationRecord } | undefined {
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    const invocation = node.invocations.find((candidate) => candidate.token === token);
    if (invocation) {
      return { nodeId, invocation };
    }
  }
  return undefined;
}

function itemOf(draft: Draft, nodeId: string, invocation: InvocationRecord): number | null {
  return draft.nodeDefinition(nodeId).foreach ? invocation.index : null;
}

function completeInvocation(draft: Draft, nodeId: string, invocation: InvocationRecord, output: Json, durationMs: number): void {
  draft.journal("task.completed", {
    node: nodeId,
    item: itemOf(draft, nodeId, invocation),
    token: invocation.token,
    attempt: invocation.attempts,
    duration_ms: durationMs,
    output,
  });
  draft.setInvocation(nodeId, invocation.index, { status: "completed", token: null, deadline_at: null, output, error: null });
  const node = draft.node(nodeId);
  if (node.invocations.every((candidate) => candidate.status === "completed")) {
    completeNode(draft, nodeId);
  }
}

interface TaskFailure {
  type: string;
  message: string;
  retryable: boolean;
  retryAfterMs?: number | undefined;
  stepRef: string | null;
}

function failInvocation(draft: Draft, nodeId: string, invocation: InvocationRecord, failure: TaskFailure): void {
  const definition = draft.nodeDefinition(nodeId);
  const policy = resolveRetryPolicy(definition.retry);
  const error: Failure = { code: failure.type, message: failure.message, node: nodeId, retryable: failure.retryable, ...(failure.stepRef ? { step: failure.stepRef } : {}) };
  const item = itemOf(draft, nodeId, invocation);
  if (failure.type !== "task.timeout") {
    draft.journal("task.failed", { node: nodeId, item, token: invocation.token, attempt: invocation.attempts, error: { ...error } });
  }
  if (failure.retryable && invocation.attempts < policy.maxAttempts) {
    const retryAt = draft.now + retryDelayMs(policy, invocation.attempts, draft.random, failure.retryAfterMs);
    draft.journal("task.retry_scheduled", { node: nodeId, item, attempt: invocation.attempts + 1, at: new Date(retryAt).toISOString() });
    draft.setInvocation(nodeId, invocation.index, { status: "retrying", token: null, deadline_at: null, retry_at: retryAt, error });
    return;
  }
  draft.setInvocation(nodeId, invocation.index, { status: "failed", token: null, deadline_at: null, error });
  failNode(draft, nodeId, error);
}

// ─── Nodes ───────────────────────────────────────────────────────────────────

function completeNode(draft: Draft, nodeId: string): void {
  const definition = draft.nodeDefinition(nodeId);
  const node = draft.node(nodeId);
  const outputs = node.invocations.map((invocation) => (invocation.output ?? null) as Json);
  try {
    writeNodeOutput(draft, nodeId, definition, definition.foreach ? outputs : (outputs[0] ?? null));
  } catch (thrown) {
    const error = ensureEngineError(thrown, "mapping.failed");
    failNode(draft, nodeId, { code: error.code, message: error.message, node: nodeId });
    return;
  }
  const seq = draft.journal("node.completed", { node: nodeId, invocations: node.invocations.length });
  draft.setNode(nodeId, { status: "completed", finished_at: draft.now, settled_seq: seq, error: null });
}

/**
 * Writes a node's task output into the run context: by its output mapping, or
 * at `state.<node id>`. A foreach node's output is the array of its item
 * outputs in item order, and each mapping target receives the array of what
 * its source selects from each item.
 */
function writeNodeOutput(draft: Draft, nodeId: string, definition: NodeDefinition, output: Json): void {
  const context = draft.record.context;
  const target = { state: context.state as JsonRecord, output: context.output as JsonRecord };
  let next;
  if (!definition.output_mapping) {
    next = { ...target, state: { ...target.state, [nodeId]: output } };
  } else if (definition.foreach && Array.isArray(output)) {
    next = target;
    for (const [path, source] of Object.entries(definition.output_mapping)) {
      const values = output.map((itemOutput) => {
        const mapped = applyOutputMapping({ "state.v": source }, itemOutput, { state: {}, output: {} });
        return (mapped.state.v ?? null) as Json;
      });
      next = applyOutputMapping({ [path]: values }, null, next);
    }
  } else {
    next = applyOutputMapping(definition.output_mapping, output, target);
  }
  draft.record.context = { ...context, state: next.state, output: next.output };
}

function failNode(draft: Draft, nodeId: string, error: Failure): void {
  const definition = draft.nodeDefinition(nodeId);
  // Other items of a failed foreach node will not be needed.
  const invocations = draft.node(nodeId).invocations.map((invocation) =>
    isOpen(invocation) ? { ...invocation, status: "cancelled" as const, token: null, retry_at: null, deadline_at: null } : invocation,
  );
  const seq = draft.journal("node.failed", { node: nodeId, error: { ...error }, on_failure: definition.on_failure ?? "fail" });
  draft.setNode(nodeId, { status: "failed", finished_at: draft.now, error, settled_seq: seq, invocations });
  if (definition.on_failure === "continue") {
    const state = draft.record.context.state;
    const errors = Array.isArray(state._errors) ? state._errors : [];
    draft.record.context = {
      ...draft.record.context,
      state: { ...state, _errors: [...errors, { node: nodeId, error: { code: error.code, message: error.message } }] },
    };
    return;
  }
  if (draft.record.error === null) {
    draft.record.error = error;
  }
  if (draft.workflow.fail_fast ?? true) {
    draft.cancelInFlight(`node ${nodeId} failed (fail_fast)`);
  }
}

/** A node is settled when nothing more will happen to it. */
function isSettled(node: NodeRecord, definition: NodeDefinition): boolean {
  return (
    node.status === "completed" ||
    node.status === "skipped" ||
    node.status === "cancelled" ||
    (node.status === "failed" && definition.on_failure === "continue")
  );
}

/**
 * Join semantics: a node is considered once every dependency is settled
 * (completed, skipped, or failed with `on_failure: "continue"`). If it has
 * dependencies and all of them were skipped, it is skipped too; otherwise its
 * `when` decides. A dependency that failed the run stops everything after it.
 */
function startReadyNodes(draft: Draft): void {
  let changed = true;
  // Skips cascade: repeat until no node changes.
  while (changed && draft.record.error === null) {
    changed = false;
    for (const [nodeId, definition] of Object.entries(draft.workflow.nodes)) {
      const node = draft.node(nodeId);
      if (node.status !== "pending" || node.invocations.length > 0) {
        continue;
      }
      const dependencies = (definition.depends_on ?? []).map((id) => ({ id, node: draft.node(id), definition: draft.nodeDefinition(id) }));
      if (!dependencies.every((dependency) => isSettled(dependency.node, dependency.definition))) {
        continue;
      }
      changed = true;
      if (dependencies.length > 0 && dependencies.every((dependency) => dependency.node.status === "skipped")) {
        skipNode(draft, nodeId, "all dependencies were skipped");
      } else {
        startNode(draft, nodeId, definition);
      }
    }
  }
}

function skipNode(draft: Draft, nodeId: string, reason: string): void {
  const seq = draft.journal("node.skipped", { node: nodeId, reason });
  draft.setNode(nodeId, { status: "skipped", finished_at: draft.now, settled_seq: seq });
}

function contextDocument(draft: Draft): Record<string, unknown> {
  const { input, state, output } = draft.record.context;
  return { input, state, output };
}

function startNode(draft: Draft, nodeId: string, definition: NodeDefinition): void {
  try {
    if (definition.when !== undefined && !evalCelBool(definition.when, contextDocument(draft))) {
      skipNode(draft, nodeId, `when is false: ${definition.when}`);
      return;
    }
    const count = definition.foreach ? foreachItems(draft, definition.foreach.items).length : 1;
    const invocations = Array.from({ length: count }, (_, index) => newInvocation(index));
    draft.setNode(nodeId, { invocations, started_at: draft.now });
    if (count === 0) {
      completeNode(draft, nodeId);
    }
  } catch (thrown) {
    const error = ensureEngineError(thrown, "node.start_failed");
    draft.setNode(nodeId, { started_at: draft.now });
    failNode(draft, nodeId, { code: error.code, message: error.message, node: nodeId });
  }
}

function foreachItems(draft: Draft, itemsPath: string): Json[] {
  const selected = selectJsonPath(itemsPath, contextDocument(draft));
  const items = selected.found ? selected.value : undefined;
  if (!Array.isArray(items)) {
    throw ensureEngineError(new Error(`foreach.items ${itemsPath} did not select an array`), "node.foreach_not_array");
  }
  return items as Json[];
}

function newInvocation(index: number): InvocationRecord {
  return { index, status: "pending", attempts: 0, token: null, dispatched_at: null, deadline_at: null, retry_at: null, error: null };
}

// ─── Dispatch ────────────────────────────────────────────────────────────────

function inFlightCount(draft: Draft): number {
  let count = 0;
  for (const node of Object.values(draft.nodes)) {
    count += node.invocations.filter((invocation) => invocation.status === "running").length;
  }
  return count;
}

/** The invocations that may be dispatched now, in node then item order, within every limit. */
function dispatchable(draft: Draft, budget: number): { nodeId: string; index: number }[] {
  if (draft.record.error !== null || draft.record.status === "paused") {
    return [];
  }
  const runLimit = draft.workflow.max_parallel ?? DEFAULT_MAX_PARALLEL;
  let room = Math.min(budget, runLimit - inFlightCount(draft));
  const picked: { nodeId: string; index: number }[] = [];
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    if (room <= 0) {
      break;
    }
    const definition = draft.nodeDefinition(nodeId);
    if (!definition.task) {
      continue; // Node-level sub-workflows arrive with gates and children.
    }
    const nodeLimit = definition.foreach?.max_parallel ?? Number.POSITIVE_INFINITY;
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

function dispatchReady(draft: Draft): void {
  for (const { nodeId, index } of dispatchable(draft, MAX_DISPATCHES_PER_EVENT)) {
    const node = draft.node(nodeId);
    const invocation = node.invocations[index];
    if (invocation && invocation.status === "pending" && node.status !== "failed") {
      dispatchInvocation(draft, nodeId, invocation);
    }
  }
}

function dispatchInvocation(draft: Draft, nodeId: string, invocation: InvocationRecord): void {
  const definition = draft.nodeDefinition(nodeId);
  const task = draft.snapshot.tasks[nodeId];
  if (!task) {
    failNode(draft, nodeId, { code: "node.no_task", message: `node ${nodeId} has no resolved task`, node: nodeId });
    return;
  }
  let input: Json;
  try {
    input = invocationInput(draft, definition, invocation.index);
  } catch (thrown) {
    const error = ensureEngineError(thrown, "mapping.failed");
    draft.setInvocation(nodeId, invocation.index, { status: "failed", error: { code: error.code, message: error.message, node: nodeId } });
    failNode(draft, nodeId, { code: error.code, message: error.message, node: nodeId });
    return;
  }
  draft.record.dispatch_count += 1;
  const attempt = invocation.attempts + 1;
  const token = `${draft.record.run_id}.${draft.record.dispatch_count}`;
  const timeoutMs = definition.timeout_ms ?? DEFAULT_TASK_TIMEOUT_MS;
  draft.setInvocation(nodeId, invocation.index, {
    status: "running",
    attempts: attempt,
    token,
    dispatched_at: draft.now,
    deadline_at: draft.now + timeoutMs,
    retry_at: null,
    input,
  });
  const node = draft.node(nodeId);
  draft.setNode(nodeId, { status: "running", attempts: node.invocations.reduce((sum, candidate) => sum + candidate.attempts, 0) });
  const item = definition.foreach ? invocation.index : null;
  draft.journal("task.dispatched", { node: nodeId, item, token, attempt, task: { id: task.id, version: task.version } });
  draft.commands.push({
    kind: "dispatch",
    payload: {
      token_id: token,
      workflow_run_id: draft.record.run_id,
      node_id: nodeId,
      item_index: item,
      task_id: task.id,
      task_version: task.version,
      task,
      input,
      resources: {},
      timeout_ms: timeoutMs,
      retry_attempt: attempt - 1,
      tools: draft.workflow.tools ?? [],
    },
  });
}

/** A task's input: its node's input mapping over the run context (plus `item`, `index`), or by default the run input (the item for foreach). */
function invocationInput(draft: Draft, definition: NodeDefinition, index: number): Json {
  const doc = contextDocument(draft);
  if (definition.foreach) {
    const items = foreachItems(draft, definition.foreach.items);
    const item = items[index] ?? null;
    return definition.input_mapping ? buildInput(definition.input_mapping, { ...doc, item, index }) : item;
  }
  return definition.input_mapping ? buildInput(definition.input_mapping, doc) : (draft.record.context.input as Json);
}

// ─── After every event ───────────────────────────────────────────────────────

/** Settles the run when its nodes are done, and keeps `running` / `waiting` truthful. */
function advance(draft: Draft): void {
  if (draft.record.status === "queued" || isTerminal(draft.record.status)) {
    return;
  }
  startReadyNodes(draft);
  if (isTerminal(draft.record.status)) {
    return;
  }
  const inFlight = inFlightCount(draft);
  if (draft.record.error !== null) {
    if (inFlight === 0 && !Object.values(draft.nodes).some((node) => node.invocations.some((invocation) => invocation.status === "retrying"))) {
      draft.finish("failed", draft.record.error.message, draft.record.error);
    }
    return;
  }
  const allSettled = Object.entries(draft.nodes).every(([nodeId, node]) => isSettled(node, draft.nodeDefinition(nodeId)) || node.status === "failed");
  if (allSettled) {
    const problems = validateJson(draft.workflow.output_schema, draft.record.context.output, "output");
    if (problems.length > 0) {
      draft.finish("failed", "the run output does not match output_schema", {
        code: "run.invalid_output",
        message: problems.map((problem) => `${problem.path}: ${problem.message}`).join("; "),
      });
    } else {
      draft.finish("completed", "all nodes settled", null);
    }
    return;
  }
  refreshActivity(draft, inFlight);
}

/** `running` while something executes or is ready to; `waiting` while only timers are pending. */
function refreshActivity(draft: Draft, inFlight: number): void {
  if (draft.record.status !== "running" && draft.record.status !== "waiting") {
    return;
  }
  const ready = dispatchable(draft, 1).length > 0;
  const next: RunStatus = inFlight > 0 || ready ? "running" : "waiting";
  if (next !== draft.record.status) {
    draft.transition(next, next === "waiting" ? "only timers are pending" : "work resumed");
  }
  for (const [nodeId, node] of Object.entries(draft.nodes)) {
    const open = node.invocations.filter(isOpen);
    if (node.status === "running" || node.status === "waiting") {
      const nodeStatus = open.some((invocation) => invocation.status === "running" || invocation.status === "pending") ? "running" : "waiting";
      if (nodeStatus !== node.status) {
        draft.setNode(nodeId, { status: nodeStatus });
      }
    }
  }
}

function nextWakeAt(draft: Draft): number | null {
  const status = draft.record.status;
  if (isTerminal(status) || status === "drafting") {
    return null;
  }
  if (status === "queued" || (status !== "paused" && dispatchable(draft, 1).length > 0)) {
    return draft.now;
  }
  let wakeAt = draft.record.deadline_at ?? Number.POSITIVE_INFINITY;
  for (const node of Object.values(draft.nodes)) {
    for (const invocation of node.invocations) {
      if (invocation.status === "running" && invocation.deadline_at !== null) {
        wakeAt = Math.min(wakeAt, invocation.deadline_at);
      } else if (invocation.status === "retrying" && invocation.retry_at !== null) {
        wakeAt = Math.min(wakeAt, invocation.retry_at);
      }
    }
  }
  return Number.isFinite(wakeAt) ? wakeAt : null;
}
