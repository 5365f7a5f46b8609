/**
 * The read-only `run` variable every CEL expression and template evaluated inside a scope
 * sees: which run, node, item and step (docs/definitions.md, "The run variable"). A scope, not
 * a parameter, because expressions are evaluated in a dozen places (every action kind renders
 * its own templates): as with the work budget (`work-budget.ts`), none can be given a document
 * without its `run`, and the tasks of one executor call, interleaved across `await`s, each see
 * their own (`AsyncLocalStorage`).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { createHash } from "node:crypto";

/** The name of the variable, reserved in CEL and in templates. */
export const RUN_VARIABLE = "run";

/** What `run` holds wherever it is bound: in the coordinator (a node's expressions) and in a step. */
export interface NodeRunVariables {
  readonly id: string;
  readonly workflow: { readonly id: string; readonly version: number };
  readonly node: string;
  /** null outside a foreach. */
  readonly item: number | null;
  /** 1-based, 1 for a node without `repeat`. */
  readonly iteration: number;
}

/** What `run` holds inside a step: the node's, the task attempt (1-based), the step's `ref` and its idempotency key. */
export interface StepRunVariables extends NodeRunVariables {
  readonly attempt: number;
  readonly step: string;
  readonly idempotency_key: string;
}

export type RunVariables = NodeRunVariables | StepRunVariables;

/** The fields of `run` in a node's `when`, mappings and `repeat.until` (there is no step or attempt there). */
export const NODE_RUN_FIELDS: readonly (keyof NodeRunVariables)[] = ["id", "workflow", "node", "item", "iteration"];

/** The fields of `run` in a step. */
export const STEP_RUN_FIELDS: readonly (keyof StepRunVariables)[] = [
  ...NODE_RUN_FIELDS,
  "attempt",
  "step",
  "idempotency_key",
];

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
 * `run.idempotency_key` (docs/definitions.md): a UUID version 8 made of the first 122 bits of
 * SHA-256 of the step's place in the run, the same for every attempt and dispatch of it.
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
