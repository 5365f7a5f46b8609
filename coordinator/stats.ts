import type { TaskPayload } from "../schemas/index.ts";
import type { Command } from "./draft.ts";

/** What tests read to check the platform's per-event invocation cap. */
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
  /** Tasks dispatched in all. */
  dispatches: number;
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
    events: 0,
  };
}

/** Counters for tests: executor calls, tasks and child starts of one event. */
export function countEvent(
  stats: CoordinatorStats,
  events: number,
  groups: readonly TaskPayload[][],
  commands: readonly Command[],
): void {
  stats.events += events;
  stats.maxDispatchesPerEvent = Math.max(stats.maxDispatchesPerEvent, groups.length);
  stats.maxTasksPerEvent = Math.max(
    stats.maxTasksPerEvent,
    groups.reduce((sum, group) => sum + group.length, 0),
  );
  stats.maxTasksPerCall = Math.max(stats.maxTasksPerCall, ...groups.map((group) => group.length), 0);
  stats.maxChildStartsPerEvent = Math.max(
    stats.maxChildStartsPerEvent,
    commands.filter((command) => command.kind === "start_child").length,
  );
  const cleanupCalls = commands.reduce(
    (sum, command) =>
      sum +
      (command.kind === "cancel_children"
        ? command.keys.length
        : command.kind === "release_resources"
          ? command.containers.length
          : 0),
    0,
  );
  stats.maxCleanupCallsPerEvent = Math.max(stats.maxCleanupCallsPerEvent, cleanupCalls);
}
