import { RUN_STATUSES, type RunControlName, type RunStatus } from "../schemas/run.ts";
import { isTerminal } from "./lifecycle.ts";

/**
 * The statuses that allow each run control: the part of the control table
 * (coordinator/controls.ts) that a client holding only a run view can use,
 * in a module that imports nothing of the coordinator's machinery, so the
 * web console can bundle it. The coordinator also applies each row's guard.
 */
export const CONTROL_STATUSES = {
  cancel: RUN_STATUSES.filter((status) => !isTerminal(status)),
  pause: ["queued", "running", "waiting"],
  resume: ["paused"],
  redrive: ["failed", "cancelled"],
  compensate: ["failed", "cancelled"],
  approve: ["drafting"],
} as const satisfies Record<RunControlName, readonly RunStatus[]>;

export type RunControl = keyof typeof CONTROL_STATUSES;

/** Every run control, in the table's order (the HTTP routes `POST /v1/runs/{id}/{control}`). */
export const RUN_CONTROLS = Object.keys(CONTROL_STATUSES) as RunControl[];

/**
 * Whether a run in `status` may accept `control`, before any guard: what a
 * client that sees only the run view (the console's buttons) can know. The
 * coordinator still applies the guard, and refuses with 409 where it objects.
 */
export function statusAllows(control: RunControl, status: RunStatus): boolean {
  return (CONTROL_STATUSES[control] as readonly RunStatus[]).includes(status);
}
