import { ensureEngineError, EngineError } from "../lib/errors.ts";
import { evalCelBool } from "../lib/expr/cel.ts";
import { selectJsonPath } from "../lib/expr/jsonpath.ts";
import { applyOutputMapping, buildInput, selectOutput, setTargetPath, type Writable } from "../lib/expr/mapping.ts";
import { resolveRetryPolicy, retryDelayMs } from "../lib/retry.ts";
import { chooseWorkflow, type Chosen } from "../lib/workflow-choice.ts";
import type { Json } from "../schemas/common.ts";
import type { Node as NodeDefinition } from "../schemas/definitions.ts";
import { toErrorSummary, toFailure, type AttemptError, type Failure } from "../schemas/errors.ts";
import type { StepRecord } from "../schemas/payload.ts";
import type { InvocationRecord, NodeRecord } from "../schemas/run.ts";
import { journalChoices } from "./choices.ts";
import { closeInvocation, isOpen, type Draft } from "./draft.ts";
import { inNodeScope } from "./node-context.ts";
import { topologyOf } from "./topology.ts";
import { closeWaits } from "./wait-kinds.ts";

/**
 * A node's life: started when its dependencies settle (or skipped), one task
 * invocation per foreach item (or one), retried by its policy, repeated until
 * its `repeat.until` holds, then completed — its output written into the run
 * context — or failed.
 */

/** A node is settled when nothing more will happen to it. */
export function isSettled(node: NodeRecord, definition: NodeDefinition): boolean {
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
 * `when` decides. Once the run is failing, nothing new starts.
 */
export function startReadyNodes(draft: Draft): void {
  const { order, index, dependents } = topologyOf(draft.workflow);
  let pass = new Uint8Array(order.length);
  if (draft.fromActive) {
    // Only what this event changed can be ready (Draft.fromActive): those nodes and their dependents.
    for (const nodeId of draft.statusChanged) {
      for (const candidate of [index.get(nodeId), ...(dependents.get(nodeId) ?? [])]) {
        if (candidate !== undefined) {
          pass[candidate] = 1;
        }
      }
    }
  } else {
    pass.fill(1);
  }
  // Passes in definition order: a node that settles as it starts (skipped, or
  // nothing to run) may make others ready, later in this pass or in the next.
  while (pass.includes(1) && draft.record.error === null) {
    const next = new Uint8Array(order.length);
    for (let position = 0; position < order.length; position += 1) {
      const entry = order[position];
      if (pass[position] === 0 || entry === undefined) {
        continue;
      }
      const [nodeId, definition, dependencies] = entry;
      if (startIfReady(draft, nodeId, definition, dependencies)) {
        for (const dependent of dependents.get(nodeId) ?? []) {
          (dependent > position ? pass : next)[dependent] = 1;
        }
      }
    }
    pass = next;
  }
}

/** Starts (or skips) the node if it is ready; returns whether it settled doing so. */
function startIfReady(
  draft: Draft,
  nodeId: string,
  definition: NodeDefinition,
  dependencies: readonly string[],
): boolean {
  const node = draft.nodes[nodeId];
  if (node?.status !== "pending" || node.iterations > 0 || !allSettled(draft, dependencies)) {
    return false;
  }
  if (dependencies.length > 0 && dependencies.every((id) => draft.nodes[id]?.status === "skipped")) {
    skipNode(draft, nodeId, "all dependencies were skipped");
  } else {
    draft.setNode(nodeId, { started_at: draft.now });
    if (startIteration(draft, nodeId, definition)) {
      completeIteration(draft, nodeId);
    }
  }
  return isSettled(draft.node(nodeId), definition);
}

function allSettled(draft: Draft, nodeIds: readonly string[]): boolean {
  for (const id of nodeIds) {
    if (!isSettled(draft.node(id), draft.nodeDefinition(id))) {
      return false;
    }
  }
  return true;
}

function skipNode(draft: Draft, nodeId: string, reason: string): void {
  const seq = draft.journal("node.skipped", { node: nodeId, reason });
  draft.setNode(nodeId, { status: "skipped", finished_at: draft.now, settled_seq: seq });
}

/**
 * Starts one iteration: evaluates `when` (per item for foreach, with `item`
 * and `index`) and fixes every invocation's input now, so retries get the
 * same input whatever happens to the run context meanwhile. Returns true when
 * the iteration started with nothing to run (no items, or every item
 * skipped): the caller completes it at once.
 */
function startIteration(draft: Draft, nodeId: string, definition: NodeDefinition): boolean {
  const iteration = draft.node(nodeId).iterations + 1;
  try {
    // What a node's expressions read: the run context (`input`, `state`, `output`), and `item`, `index` in a foreach.
    const doc = draft.record.context;
    const items: { vars: Record<string, unknown>; fallback: Json }[] = definition.foreach
      ? foreachItems(draft, definition.foreach.items).map((item, index) => ({
          vars: { ...doc, item, index },
          fallback: item,
        }))
      : [{ vars: doc, fallback: draft.record.context.input }];
    const chosen: (Chosen | undefined)[] = [];
    const invocations = items.map(({ vars, fallback }, index): InvocationRecord => {
      const at = { node: nodeId, item: definition.foreach ? index : null, iteration };
      const { runs, input } = inNodeScope(draft, at, () => {
        const holds = definition.when === undefined || evalCelBool(definition.when, vars);
        const choice = typeof definition.workflow === "object" && holds ? definition.workflow : undefined;
        chosen[index] = choice && chooseWorkflow(choice, draft.snapshot.choices?.[nodeId] ?? [], vars);
        if (!holds) {
          return { runs: false, input: null };
        }
        return { runs: true, input: definition.input_mapping ? buildInput(definition.input_mapping, vars) : fallback };
      });
      return {
        ...(chosen[index] ? { workflow: chosen[index].workflow } : {}),
        index,
        status: runs ? "pending" : "skipped",
        attempts: 0,
        token: null,
        dispatched_at: null,
        deadline_at: null,
        retry_at: null,
        input,
        error: null,
      };
    });
    if (
      invocations.length > 0 &&
      invocations.every((invocation) => invocation.status === "skipped") &&
      iteration === 1
    ) {
      skipNode(draft, nodeId, `when is false: ${definition.when ?? ""}`);
      return false;
    }
    draft.setNode(nodeId, { invocations, iterations: iteration });
    draft.journal("node.started", {
      node: nodeId,
      iteration,
      invocations: invocations.length,
      skipped: invocations.filter((invocation) => invocation.status === "skipped").length,
    });
    journalChoices(draft, nodeId, definition, chosen);
    return !invocations.some(isOpen);
  } catch (thrown) {
    draft.setNode(nodeId, { iterations: iteration });
    failNode(draft, nodeId, nodeFailure(thrown, "node.start_failed", nodeId));
    return false;
  }
}

/**
 * The most items one foreach iteration may fan out over. Each item is an
 * invocation row the coordinator keeps, checks and journals; items come from
 * run input or a peer's answer, so without a bound a hostile list could make
 * one run's state, and every event that touches it, as large as it likes.
 */
export const MAX_FOREACH_ITEMS = 10_000;

function foreachItems(draft: Draft, itemsPath: string): Json[] {
  const selected = selectJsonPath(itemsPath, draft.record.context);
  const items = selected.found ? selected.value : undefined;
  if (!Array.isArray(items)) {
    throw EngineError.terminal("node.foreach_not_array", `foreach.items ${itemsPath} did not select an array`);
  }
  if (items.length > MAX_FOREACH_ITEMS) {
    throw EngineError.terminal(
      "node.foreach_too_large",
      `foreach.items ${itemsPath} selected ${items.length} items; a foreach may have at most ${MAX_FOREACH_ITEMS} (split the list, or nest a workflow that takes a slice)`,
    );
  }
  return items as Json[];
}

/** Where in the node an invocation sits, for journal bodies: the item index of a foreach, else null. */

export function completeInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  output: Json,
  durationMs: number,
  steps?: StepRecord[],
): void {
  draft.journal("task.completed", {
    node: nodeId,
    item: draft.itemOf(nodeId, invocation),
    token: invocation.token,
    attempt: invocation.attempts,
    duration_ms: durationMs,
    output,
    ...(steps === undefined ? {} : { steps }),
  });
  draft.setInvocation(nodeId, invocation.index, {
    status: "completed",
    token: null,
    deadline_at: null,
    output,
    error: null,
  });
  if (allDone(draft.node(nodeId).invocations)) {
    completeIteration(draft, nodeId);
  }
}

/**
 * Whether every invocation completed or was skipped. Scans from the end:
 * items finish roughly in order, so what is still open sits at the back, and
 * a wave of n results costs about n steps here, not n².
 */
function allDone(invocations: readonly InvocationRecord[]): boolean {
  for (let index = invocations.length - 1; index >= 0; index -= 1) {
    const status = invocations[index]?.status;
    if (status !== "completed" && status !== "skipped") {
      return false;
    }
  }
  return true;
}

/** A failed attempt: retried by the node's policy when retryable, else the node fails. */
export function failInvocation(
  draft: Draft,
  nodeId: string,
  invocation: InvocationRecord,
  failure: AttemptError,
  steps?: StepRecord[],
): void {
  const policy = resolveRetryPolicy(draft.nodeDefinition(nodeId).retry);
  const error = toFailure(failure, nodeId);
  const item = draft.itemOf(nodeId, invocation);
  draft.journal("task.failed", {
    node: nodeId,
    item,
    token: invocation.token,
    attempt: invocation.attempts,
    error: { ...error },
    ...(steps === undefined ? {} : { steps }),
  });
  if (failure.retryable && invocation.attempts < policy.maxAttempts) {
    const retryAt = draft.now + retryDelayMs(policy, invocation.attempts, draft.random(), failure.retry_after_ms);
    draft.journal("task.retry_scheduled", {
      node: nodeId,
      item,
      attempt: invocation.attempts + 1,
      at: new Date(retryAt).toISOString(),
    });
    // A retry starts the task over with a fresh context: nothing of a suspension carries over.
    draft.setInvocation(nodeId, invocation.index, {
      status: "retrying",
      token: null,
      deadline_at: null,
      retry_at: retryAt,
      error,
      resume: undefined,
      suspension: undefined,
    });
    return;
  }
  draft.setInvocation(nodeId, invocation.index, { ...closeInvocation(invocation, "failed"), error });
  failNode(draft, nodeId, error);
}

/**
 * Every invocation of an iteration is done: write the output, then repeat or
 * complete. Iterations with nothing to run complete here in a loop, not by
 * recursion, so a long `repeat` of them cannot exhaust the stack.
 */
function completeIteration(draft: Draft, nodeId: string): void {
  const definition = draft.nodeDefinition(nodeId);
  for (;;) {
    const node = draft.node(nodeId);
    try {
      const context = draft.record.context;
      const iteration = node.iterations;
      const next = writeNodeOutput(nodeId, definition, node.invocations, context, (item, work) =>
        inNodeScope(draft, { node: nodeId, item, iteration }, work),
      );
      draft.record.context = { ...context, state: next.state, output: next.output };
      const repeat = definition.repeat;
      const at = { node: nodeId, item: null, iteration };
      if (repeat && !inNodeScope(draft, at, () => evalCelBool(repeat.until, draft.record.context))) {
        if (node.iterations < repeat.max_iterations) {
          draft.journal("node.repeat", { node: nodeId, iteration: node.iterations, until: repeat.until });
          if (startIteration(draft, nodeId, definition)) {
            continue;
          }
          return;
        }
        throw EngineError.terminal(
          "node.repeat_exhausted",
          `repeat.until (${repeat.until}) still false after ${node.iterations} iterations`,
        );
      }
    } catch (thrown) {
      failNode(draft, nodeId, nodeFailure(thrown, "mapping.failed", nodeId));
      return;
    }
    const seq = draft.journal("node.completed", {
      node: nodeId,
      invocations: node.invocations.length,
      iterations: node.iterations,
    });
    draft.setNode(nodeId, { status: "completed", finished_at: draft.now, settled_seq: seq, error: null });
    return;
  }
}

/**
 * A node that could not start or settle (its `when`, items or mappings, an
 * exhausted `repeat`): not an attempt's failure, so it says nothing of retrying.
 */
function nodeFailure(thrown: unknown, fallbackCode: string, nodeId: string): Failure {
  const { code, message } = ensureEngineError(thrown, fallbackCode);
  return toFailure({ code, message }, nodeId);
}

/** The node fails: with `continue` the run goes on (the error lands in `state._errors`), else the run is failing. */
export function failNode(draft: Draft, nodeId: string, error: Failure): void {
  const definition = draft.nodeDefinition(nodeId);
  // Its other invocations close here, and what they wait for with them: gates close, children are cancelled.
  closeWaits(draft, nodeId, `node ${nodeId} failed`);
  const invocations = draft
    .node(nodeId)
    .invocations.map((invocation) => (isOpen(invocation) ? closeInvocation(invocation, "cancelled") : invocation));
  const seq = draft.journal("node.failed", {
    node: nodeId,
    error: { ...error },
    on_failure: definition.on_failure ?? "fail",
  });
  draft.setNode(nodeId, { status: "failed", finished_at: draft.now, error, settled_seq: seq, invocations });
  if (definition.on_failure === "continue") {
    const state = draft.record.context.state;
    const errors = Array.isArray(state._errors) ? state._errors : [];
    const entry = { node: nodeId, error: toErrorSummary(error) };
    draft.record.context = { ...draft.record.context, state: { ...state, _errors: [...errors, entry] } };
    return;
  }
  if (draft.record.error === null) {
    draft.record.error = error;
  }
  if (draft.workflow.fail_fast ?? true) {
    draft.cancelOpenNodes(`node ${nodeId} failed (fail_fast)`);
  }
}

/** Runs `work` with the `run` variable of a foreach item (or of the node, for null). */
export type InItemScope = <T>(item: number | null, work: () => T) => T;

/**
 * Where a node's task output goes in the run context (docs/definitions.md,
 * "Node" and "foreach"): by its output mapping, or at `state.<node id>`. A
 * foreach node's output is the array of its item outputs in item order, and
 * each mapping target receives the array of what its source gives for each
 * item. An item (or a repeat iteration) that was skipped has no output to map:
 * its place is `null`. A bare `$` path that selects nothing from an output
 * that exists fails with `mapping.unresolved` (naming the item in a foreach);
 * one marked optional gives its default, or `null` in a foreach's array and no
 * write otherwise. `inScope` runs each evaluation with the `run` variable of
 * its item (null outside a foreach; coordinator/node-context.ts).
 */
export function writeNodeOutput(
  nodeId: string,
  definition: NodeDefinition,
  invocations: readonly InvocationRecord[],
  target: Writable,
  inScope: InItemScope = (_item, work) => work(),
): Writable {
  const outputs = invocations.map((invocation) => invocation.output ?? null);
  const mapping = definition.output_mapping;
  if (mapping === undefined) {
    return setTargetPath(target, `state.${nodeId}`, definition.foreach ? outputs : (outputs[0] ?? null));
  }
  if (!definition.foreach) {
    const only = invocations[0];
    return only === undefined || only.status === "skipped"
      ? Object.keys(mapping).reduce((next, path) => setTargetPath(next, path, null), target)
      : inScope(null, () => applyOutputMapping(mapping, only.output ?? null, target));
  }
  let next = target;
  for (const [path, source] of Object.entries(mapping)) {
    const values = invocations.map((invocation, index): Json => {
      if (invocation.status === "skipped") {
        return null;
      }
      const selected = inScope(index, () => selectOutput(path, source, invocation.output ?? null, index));
      return selected.found ? selected.value : null;
    });
    next = setTargetPath(next, path, values);
  }
  return next;
}
