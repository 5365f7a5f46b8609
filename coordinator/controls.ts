import { EngineError } from "../lib/errors.ts";
import type { By } from "../schemas/auth.ts";
import { RUN_STATUS_REASONS } from "../schemas/journal-bodies.ts";
import type { RunRecord, RunStatus } from "../schemas/run.ts";
import { compensateRefusal, redriveRefusal, type CompensationPolicyOf } from "./compensation-refusals.ts";
import type { RunEvent } from "./events.ts";
import { CONTROL_STATUSES, RUN_CONTROLS, statusAllows, type RunControl } from "./control-statuses.ts";
import { isTerminal } from "./lifecycle.ts";

/**
 * One row per run control: the statuses that allow it, the event it applies,
 * what a refusal says (followed by the run's status) and whether the control
 * is an event of its own that wakes the run (so it may dispatch at once).
 * The Durable Object refuses a control here with a 409 before applying it,
 * and `decide` checks the same row again when the event arrives, so the two
 * can never disagree. A new control is a row here (its HTTP route
 * `POST /v1/runs/{id}/{control}` and the service call follow from the row)
 * and, when it applies a new event, that event in coordinator/events.ts with
 * its handler in `decide`.
 */
interface ControlRow {
  readonly statuses: readonly RunStatus[];
  /** The event the control applies; `by` is who asked (absent: the engine). */
  readonly event: (reason: string | undefined, by: By | undefined) => RunEvent;
  readonly refusal: string;
  readonly wakes: boolean;
  /** A refusal that depends on more than the status (null: allowed). */
  readonly guard?: (record: RunRecord, workflow?: CompensationPolicyOf) => string | null;
}

export const CONTROLS = {
  /** No new dispatches, in-flight work abandoned, late results ignored. */
  cancel: {
    statuses: CONTROL_STATUSES.cancel,
    event: (reason, by) => ({ type: "cancel", reason: reason ?? RUN_STATUS_REASONS.cancelled, ...withBy(by) }),
    refusal: "the run is already",
    wakes: false,
  },
  /** Stops new dispatches; what is in flight finishes. */
  pause: {
    statuses: CONTROL_STATUSES.pause,
    event: (_reason, by) => ({ type: "pause", ...withBy(by) }),
    refusal: "only a queued, running or waiting run can be paused; this one is",
    wakes: false,
  },
  resume: {
    statuses: CONTROL_STATUSES.resume,
    event: (_reason, by) => ({ type: "resume", ...withBy(by) }),
    refusal: "only a paused run can be resumed; this one is",
    wakes: false,
  },
  /**
   * Re-runs a failed run from its failed nodes, keeping completed results, in
   * the same journal; or, when the run's compensation failed (a failed or a
   * cancelled run), resumes the compensation at the undo that failed.
   */
  redrive: {
    statuses: CONTROL_STATUSES.redrive,
    event: (_reason, by) => ({ type: "redrive", ...withBy(by) }),
    refusal: "only a failed run can be redriven; this one is",
    wakes: false,
    guard: redriveRefusal,
  },
  /** Runs the undos of a failed or cancelled run that has not compensated (docs/definitions.md). */
  compensate: {
    statuses: CONTROL_STATUSES.compensate,
    event: (_reason, by) => ({ type: "compensate", ...withBy(by) }),
    refusal: "only a failed or cancelled run can be compensated; this one is",
    wakes: true,
    guard: compensateRefusal,
  },
  /** Starts a run created with `mode: "approval"` (the `start` event an auto run applies on creation). */
  approve: {
    statuses: CONTROL_STATUSES.approve,
    event: (_reason, by) => ({ type: "start", ...withBy(by) }),
    refusal: "only a run waiting in drafting can be approved; this one is",
    wakes: true,
  },
} as const satisfies Record<RunControl, ControlRow>;

export { RUN_CONTROLS, statusAllows, type RunControl };

/** Each control as a refusal of an erased run names it. */
const PAST: Record<RunControl, string> = {
  cancel: "cancelled",
  pause: "paused",
  resume: "resumed",
  redrive: "redriven",
  compensate: "compensated",
  approve: "approved",
};

/** `{ by }` when a caller is known, else nothing (the body's `by` is optional, never null). */
export function withBy(by: By | undefined): { by?: By } {
  return by === undefined ? {} : { by };
}

/** Whether a value (from an RPC call) names a run control. */
export function isRunControl(name: unknown): name is RunControl {
  return typeof name === "string" && Object.hasOwn(CONTROLS, name);
}

/** Whether the run accepts `control`: its status is one of the row's, and the row's guard (if any) finds nothing against. */
export function allows(control: RunControl, record: RunRecord): boolean {
  return refusalOf(control, record) === null;
}

function refusalOf(
  control: RunControl,
  record: RunRecord,
  workflow?: CompensationPolicyOf,
): { code: string; message: string } | null {
  const row: ControlRow = CONTROLS[control];
  const code = isTerminal(record.status) ? "run.terminal" : "run.conflict";
  if (!row.statuses.includes(record.status)) {
    return { code, message: `${row.refusal} ${record.status}` };
  }
  if (record.erased !== undefined) {
    // Its inputs, results and undo inputs are gone: nothing can run again (docs/security.md, "Erasure").
    return { code: "run.erased", message: `the run was erased; it cannot be ${PAST[control]}` };
  }
  const guarded = row.guard?.(record, workflow) ?? null;
  return guarded === null ? null : { code, message: guarded };
}

/**
 * Throws the control's refusal (`run.terminal` for an ended run, else
 * `run.conflict`, and `run.erased` for one an erased run's status would allow) unless the run allows it; `workflow` lets a refusal name the
 * run's compensate policy (absent: the default).
 */
export function assertAllowed(control: RunControl, record: RunRecord, workflow?: CompensationPolicyOf): void {
  const refusal = refusalOf(control, record, workflow);
  if (refusal !== null) {
    throw EngineError.terminal(refusal.code, refusal.message);
  }
}
