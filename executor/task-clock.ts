import { SYSTEM_CLOCK, type Clock } from "./invoke.ts";

/**
 * The clock a task runs by: the action clock (`now`, `sleep`, `random`) plus
 * the task's own deadline, so a test can end a task's time without waiting
 * for it.
 */
export interface TaskClock extends Clock {
  /** A signal that aborts `ms` from now, as `AbortSignal.timeout` does. */
  timeout(ms: number): AbortSignal;
}

export const SYSTEM_TASK_CLOCK: TaskClock = {
  ...SYSTEM_CLOCK,
  timeout: (ms) => AbortSignal.timeout(ms),
};
