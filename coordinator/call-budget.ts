import { FULL_WAKE_BUDGET } from "./dispatch.ts";
import { PureTaskBudget } from "./pure-tasks.ts";
import type { Command } from "./draft.ts";
import type { WakeBudget } from "./events.ts";
import type { CoordinatorStats } from "./stats.ts";

/**
 * The calls one Durable Object event (an RPC call into the object, an alarm)
 * may still make. The platform caps the calls of an event, not of a
 * decision: the results of an executor call stream back inside the event
 * that made it, and the wake that follows them there (Coordinator.applyNow)
 * spends what this budget has left. Once it is spent, ready work waits for a
 * fresh event (a self-wake or the alarm), as before.
 */
export class CallBudget {
  /** The pure tasks the event runs itself (pure-tasks.ts): they make no call, but count all the same. */
  readonly pure = new PureTaskBudget();
  private executorCalls = 0;
  private tasks = 0;
  private childStarts = 0;
  private cleanupCalls = 0;

  /** What a wake in this event may still spend. */
  left(): WakeBudget {
    return {
      executorCalls: Math.max(0, FULL_WAKE_BUDGET.executorCalls - this.executorCalls),
      otherCalls: Math.max(0, FULL_WAKE_BUDGET.otherCalls - 2 * this.childStarts - this.cleanupCalls),
    };
  }

  /** Counts a decision's calls against this event, and keeps the per-event maxima tests read. */
  spend(groups: readonly (readonly unknown[])[], commands: readonly Command[], stats: CoordinatorStats): void {
    this.executorCalls += groups.length;
    for (const group of groups) {
      this.tasks += group.length;
      stats.maxTasksPerCall = Math.max(stats.maxTasksPerCall, group.length);
    }
    for (const command of commands) {
      if (command.kind === "start_child") {
        this.childStarts += 1;
      } else if (command.kind === "cancel_children") {
        this.cleanupCalls += command.keys.length;
      } else if (command.kind === "release_resources") {
        this.cleanupCalls += command.containers.length;
      } else if (command.kind === "register_event_wait" || command.kind === "unregister_event_wait") {
        // One call per name, each to that name's hub.
        this.cleanupCalls +=
          command.kind === "register_event_wait" ? command.registration.names.length : command.names.length;
      }
    }
    stats.maxDispatchesPerEvent = Math.max(stats.maxDispatchesPerEvent, this.executorCalls);
    stats.maxTasksPerEvent = Math.max(stats.maxTasksPerEvent, this.tasks);
    stats.maxChildStartsPerEvent = Math.max(stats.maxChildStartsPerEvent, this.childStarts);
    stats.maxCleanupCallsPerEvent = Math.max(stats.maxCleanupCallsPerEvent, this.cleanupCalls);
  }
}
