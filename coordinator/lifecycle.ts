import { EngineError } from "../lib/errors.ts";
import type { RunRecord, RunStatus } from "../schemas/run.ts";

/**
 * The run lifecycle (docs/api.md, `GET /v1/runs/{run_id}`: the statuses and
 * their moves): every legal move, and nothing else. A status
 * changes only through {@link assertTransition}, so an illegal transition is
 * a bug that fails loudly, never a state a run can reach.
 */
export const TRANSITIONS = {
  drafting: ["queued", "cancelled"],
  queued: ["running", "paused", "cancelled", "failed"],
  running: ["waiting", "paused", "completed", "failed", "cancelled"],
  waiting: ["running", "paused", "completed", "failed", "cancelled"],
  // A paused run dispatches nothing new, but what is in flight may still finish it.
  // `paused → queued`: resumed before its delayed start is due.
  paused: ["queued", "running", "waiting", "completed", "failed", "cancelled"],
  // Terminal. `failed → queued` is the one way back: a redrive.
  completed: [],
  failed: ["queued"],
  cancelled: [],
} as const satisfies Record<RunStatus, readonly RunStatus[]>;

export const TERMINAL_STATUSES: ReadonlySet<RunStatus> = new Set(["completed", "failed", "cancelled"]);

export function isTerminal(status: RunStatus): boolean {
  return TERMINAL_STATUSES.has(status);
}

/** Whether a queued run may start now: it has no delayed start, or its `start_at` has come. */
export function isStartDue(record: Pick<RunRecord, "start_at">, now: number): boolean {
  return record.start_at === undefined || record.start_at <= now;
}

export function canTransition(from: RunStatus, to: RunStatus): boolean {
  return (TRANSITIONS[from] as readonly RunStatus[]).includes(to);
}

export function assertTransition(from: RunStatus, to: RunStatus): void {
  if (!canTransition(from, to)) {
    throw EngineError.terminal("run.illegal_transition", `a run cannot go from ${from} to ${to}`);
  }
}
