import { DEFAULT_COMPENSATE_POLICY, type CompensatePolicy } from "../schemas/definitions.ts";
import type { RunRecord } from "../schemas/run.ts";
import type { CompensationTrigger } from "./compensation.ts";

/**
 * Why the compensation controls refuse a run beyond its status
 * (coordinator/controls.ts): `compensate` once the undos have started, and
 * `redrive` once they ran (docs/definitions.md, "Undo and compensation").
 */

/** Why a run cannot be compensated by hand now, or null when it can. */
export function compensateRefusal(record: RunRecord): string | null {
  if (record.compensation !== undefined) {
    return `the run's compensation has already ${record.compensation.status === "running" ? "started" : record.compensation.status}`;
  }
  return (record.undos?.length ?? 0) === 0 ? "the run has nothing to undo" : null;
}

/** What a refusal may say of the run's workflow: its `compensate` policy (absent: the default). */
export interface CompensationPolicyOf {
  compensate?: CompensatePolicy;
}

/**
 * Why a run cannot be redriven now, beyond its status, or null. A run whose
 * undos ran to the end is refused: they undid what its steps did, so the
 * results a redrive would keep no longer hold. The refusal says what ran them
 * (the workflow's policy, by name) and how to keep failed runs redrivable.
 */
export function redriveRefusal(record: RunRecord, workflow: CompensationPolicyOf = {}): string | null {
  const compensation = record.compensation;
  if (compensation?.status === "failed") {
    return null;
  }
  if (record.status !== "failed") {
    return `only a failed run can be redriven; this one is ${record.status}`;
  }
  if (compensation === undefined) {
    return null;
  }
  const ran = whatRanUndos(compensation.trigger, workflow.compensate);
  if (compensation.status === "running") {
    return `the run's compensation is running (${ran}); a redrive can only resume it at an undo that fails for good`;
  }
  const remedy =
    compensation.trigger === "on_failure"
      ? `. To keep a failed run redrivable, set the workflow's compensate to "on_cancel" or "never", and undo a ` +
        `failed run with POST /v1/runs/{run_id}/compensate once you decide not to redrive it`
      : "";
  return (
    `the run's compensation completed, so it cannot be redriven: ${ran}, and they undid what its steps did ` +
    `(a redrive would build on results that no longer hold); start a new run to do the work again${remedy}`
  );
}

/** What started the undos, in words: the policy by name (`policy` absent: the workflow says none), or the control. */
function whatRanUndos(trigger: CompensationTrigger, policy: CompensatePolicy | undefined): string {
  switch (trigger) {
    case "on_failure":
    case "on_cancel": {
      const named =
        policy === undefined
          ? `compensate: "${DEFAULT_COMPENSATE_POLICY}" (the default: the workflow sets no policy)`
          : `compensate: "${policy}" (the workflow's policy)`;
      return `${named} ran the undos when the run ${trigger === "on_failure" ? "failed" : "was cancelled"}`;
    }
    case "manual":
      return "POST /v1/runs/{run_id}/compensate ran the undos";
    case "redrive":
      return "a redrive resumed the undos after one had failed";
  }
}
