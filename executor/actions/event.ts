import { handledByTaskRunner } from "./not-implemented.ts";
import type { ActionHandler } from "./types.ts";

/**
 * `event`: the task suspends at the step until an event with one of its names
 * (sent to `POST /v1/events`, or as a signal to this run) matches, or its
 * time runs out. The coordinator matches, and resumes the task with
 * `{ event_id, name, data, received_at, timed_out }`.
 */
export const eventAction: ActionHandler<"event"> = {
  ...handledByTaskRunner("event"),
  suspend(action, input) {
    const { name, match, timeout_ms, lookback_ms, on_timeout } = action.implementation;
    return {
      kind: "event",
      names: typeof name === "string" ? [name] : [...new Set(name)],
      input,
      ...(match === undefined ? {} : { match }),
      ...(timeout_ms === undefined ? {} : { timeout_ms }),
      ...(lookback_ms === undefined ? {} : { lookback_ms }),
      ...(on_timeout === undefined ? {} : { on_timeout }),
    };
  },
};
