/**
 * The read-only `run` variable: which run, node, item and step an expression is
 * evaluated for (docs/definitions.md, "The run variable").
 *
 * Every CEL expression and every Handlebars template evaluated inside a scope sees it
 * as `run`, whatever document the evaluation is given: a step's condition and mappings,
 * its action's templates (`url_template`, `body_template`, prompt messages,
 * `command_template`, …) and CEL (`context`, `metric`), and in the coordinator a node's
 * `when`, `input_mapping`, `output_mapping` and `repeat.until`. The name is reserved: a
 * definition cannot bind or set it, and in a template `{{run.…}}` means this variable
 * even where the data has a field `run` (that field stays readable as `{{this.run}}`).
 *
 * Why a scope and not a parameter: an expression is evaluated in a dozen places (every
 * action kind renders its own templates); the scope reaches each of them the way the
 * work budget does (`work-budget.ts`), so no evaluation can be given a document without
 * its `run`. The scope travels with the code that runs in it (`AsyncLocalStorage`): the
 * tasks of one executor call, interleaved across `await`s, each see their own.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";

/** The name of the variable, reserved in CEL and in templates. */
export const RUN_VARIABLE = "run";

/** What `run` holds wherever it is bound: in the coordinator (a node's expressions) and in a step. */
export interface NodeRunVariables {
  /** The run id, `run_<32 hex digits>`. */
  readonly id: string;
  /** The workflow the run runs, as pinned when it started. */
  readonly workflow: { readonly id: string; readonly version: number };
  /** The node id. */
  readonly node: string;
  /** The foreach item's index, or null outside a foreach. */
  readonly item: number | null;
  /** The node's `repeat` iteration, 1-based (1 for a node without `repeat`). */
  readonly iteration: number;
}

/** What `run` holds inside a step: the node's, plus the task attempt, the step and its idempotency key. */
export interface StepRunVariables extends NodeRunVariables {
  /** The task attempt, 1-based: 2 is the node's first `retry`. A continuation after a gate or a child keeps it. */
  readonly attempt: number;
  /** The step's `ref`. */
  readonly step: string;
  /** The same for every attempt and re-dispatch of this (run, node, item, iteration, task, step). */
  readonly idempotency_key: string;
}

export type RunVariables = NodeRunVariables | StepRunVariables;

/** The fields of `run` in a step; a node's expressions see {@link NODE_RUN_FIELDS}. */
export const STEP_RUN_FIELDS: readonly (keyof StepRunVariables)[] = [
  "id",
  "workflow",
  "node",
  "item",
  "iteration",
  "attempt",
  "step",
  "idempotency_key",
];

/** The fields of `run` in a node's `when`, mappings and `repeat.until` (there is no step or attempt there). */
export const NODE_RUN_FIELDS: readonly (keyof NodeRunVariables)[] = ["id", "workflow", "node", "item", "iteration"];

const scopes = new AsyncLocalStorage<RunVariables>();

/** Runs `work` (sync or async) with `run` bound to `variables` for every expression it evaluates. */
export function withRunVariables<T>(variables: RunVariables, work: () => T): T {
  return scopes.run(variables, work);
}

/** The `run` of the scope running now, if any (none at registration, or in a preview). */
export function currentRunVariables(): RunVariables | undefined {
  return scopes.getStore();
}

/**
 * `run.idempotency_key`: a UUID (RFC 9562 version 8) made of the first 122 bits of
 * SHA-256 of `<run id>/<node>/<item index or ->/<task id>/<step ref>`, followed by
 * `/<iteration>` from a `repeat` node's second iteration on. Nothing in it changes
 * between attempts or dispatches of the same step; the task id keeps an undo's call
 * (task `<task>/<step>/undo`) apart from the step's own.
 */
export function idempotencyKey(
  parts: Pick<NodeRunVariables, "id" | "node" | "item" | "iteration"> & { task: string; step: string },
): string {
  const seed = `${parts.id}/${parts.node}/${parts.item ?? "-"}/${parts.task}/${parts.step}`;
  const text = parts.iteration > 1 ? `${seed}/${parts.iteration}` : seed;
  // Synchronous (node:crypto), so a task of pure computation still runs without an await.
  const hex = createHash("sha256").update(text, "utf8").digest("hex").slice(0, 32);
  // Version 8 in the 13th digit, variant 10 in the two high bits of the 17th.
  const variant = ((Number.parseInt(hex.charAt(16), 16) & 0x3) | 0x8).toString(16);
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-8${hex.slice(13, 16)}-${variant}${hex.slice(17, 20)}-${hex.slice(20, 32)}`;
}
