/** What tests read to check the platform's per-event invocation cap (kept by call-budget.ts). */
export interface CoordinatorStats {
  /** The most executor calls (Worker invocations) made within one Durable Object event. */
  maxDispatchesPerEvent: number;
  /** The most tasks dispatched within one event (several travel in one call). */
  maxTasksPerEvent: number;
  /** The most tasks in one executor call (the platform lets an invocation wait on six connections at once). */
  maxTasksPerCall: number;
  /** The most child runs started within one event (each is two calls: the catalog and the child). */
  maxChildStartsPerEvent: number;
  /** The most cancels of child runs and releases of containers sent within one event (one call each). */
  maxCleanupCallsPerEvent: number;
  /** Tasks sent to the executor in all. */
  dispatches: number;
  /** Pure tasks the coordinator ran itself (pure-tasks.ts). */
  pureTasks: number;
  /** The most pure tasks run within one event. */
  maxPureTasksPerEvent: number;
  events: number;
}

export function newStats(): CoordinatorStats {
  return {
    maxDispatchesPerEvent: 0,
    maxTasksPerEvent: 0,
    maxTasksPerCall: 0,
    maxChildStartsPerEvent: 0,
    maxCleanupCallsPerEvent: 0,
    dispatches: 0,
    pureTasks: 0,
    maxPureTasksPerEvent: 0,
    events: 0,
  };
}
