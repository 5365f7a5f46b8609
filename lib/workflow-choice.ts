import { EngineError } from "./errors.ts";
import { selectJsonPath } from "./expr/jsonpath.ts";
import { parseReference, type Json, type WorkflowChoice } from "../schemas/common.ts";
import type { PinnedWorkflow } from "../schemas/resolved.ts";

/**
 * Choosing work at run time (docs/definitions.md, "Choosing work at run
 * time"): a `workflow` node or step names its child with `{ from, allowed }`.
 * When the node (or step) starts, `from` is read from the context, checked
 * against the allowlist and pinned to the version the run resolved when it
 * started. The coordinator (nodes) and the executor (steps) both choose here.
 */

/** What a choice selected and the allowed workflow it names, `id@version`. */
export interface Chosen {
  value: Json;
  workflow: string;
}

/**
 * Resolves a choice over `doc` (the run context, with `item` and `index` for
 * a foreach item). `pinned` are the allowed workflows as the run pinned them,
 * in the order of `choice.allowed`. Throws `workflow.not_allowed` (not
 * retryable) for anything else: nothing selected, not a reference, or a
 * workflow (or version) the allowlist does not name.
 */
export function chooseWorkflow(choice: WorkflowChoice, pinned: readonly PinnedWorkflow[], doc: unknown): Chosen {
  const selected = selectJsonPath(choice.from, doc);
  const value = selected.found ? (selected.value as Json) : null;
  const wanted = (typeof value === "string" ? parseReference(value) : undefined) ?? null;
  const match =
    wanted === null
      ? undefined
      : pinned.find(
          (entry) => entry.id === wanted.id && (wanted.version === undefined || wanted.version === entry.version),
        );
  if (match === undefined) {
    const shown = selected.found ? JSON.stringify(value).slice(0, 200) : "nothing";
    throw EngineError.terminal(
      "workflow.not_allowed",
      `${choice.from} selected ${shown}, which is not one of the allowed workflows: ${choice.allowed.join(", ")}`,
    );
  }
  return { value, workflow: `${match.id}@${match.version}` };
}
