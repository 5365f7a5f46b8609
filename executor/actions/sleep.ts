import { EngineError } from "../../lib/errors.ts";
import { MAX_SLEEP_MS, SleepUntil } from "../../schemas/actions.ts";
import type { Json } from "../../schemas/common.ts";
import type { ActionHandler, ActionWait } from "./types.ts";

/**
 * `sleep`: the task suspends at the step on a timer, and the coordinator
 * resumes it when the time comes with `{ slept_ms, woke_at }`. The time is
 * the step input's `duration_ms` or `until` when it carries one, else the
 * implementation's; exactly one must be known. A time already past needs no
 * wait: the step runs and continues at once.
 */
export const sleepAction: ActionHandler<"sleep"> = {
  async run() {
    return { slept_ms: 0, woke_at: new Date().toISOString() };
  },
  suspend(action, input) {
    const wait = sleepTime(pick(input) ?? action.implementation, Date.now());
    return wait.until !== undefined && wait.until <= Date.now() ? undefined : wait;
  },
};

type SleepFields = { duration_ms?: unknown; until?: unknown };

/**
 * The input's time fields when it carries either (null counts as absent: an
 * optional mapping that found nothing); else undefined, and the implementation's stand.
 */
function pick(input: Json): SleepFields | undefined {
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    return undefined;
  }
  const fields = { duration_ms: input.duration_ms ?? undefined, until: input.until ?? undefined };
  return fields.duration_ms !== undefined || fields.until !== undefined ? fields : undefined;
}

/** The timer a sleep asks for, or `sleep.invalid` (not retryable): none, both, malformed, or too far ahead. */
function sleepTime({ duration_ms, until }: SleepFields, now: number): Extract<ActionWait, { kind: "timer" }> {
  if ((duration_ms === undefined) === (until === undefined)) {
    throw invalid(
      `a sleep needs exactly one of duration_ms and until; it has ${duration_ms === undefined ? "neither" : "both"}`,
    );
  }
  if (duration_ms !== undefined) {
    if (
      typeof duration_ms !== "number" ||
      !Number.isInteger(duration_ms) ||
      duration_ms < 0 ||
      duration_ms > MAX_SLEEP_MS
    ) {
      throw invalid(
        `duration_ms must be an integer from 0 to ${MAX_SLEEP_MS} (365 days); got ${JSON.stringify(duration_ms)}`,
      );
    }
    return duration_ms === 0 ? { kind: "timer", until: now } : { kind: "timer", duration_ms };
  }
  const parsed = SleepUntil.safeParse(until);
  if (!parsed.success) {
    throw invalid(`until must be ISO-8601 with an offset or epoch milliseconds; got ${JSON.stringify(until)}`);
  }
  const at = typeof parsed.data === "number" ? parsed.data : Date.parse(parsed.data);
  if (at - now > MAX_SLEEP_MS) {
    throw invalid(`until is more than 365 days ahead: ${new Date(at).toISOString()}`);
  }
  return { kind: "timer", until: at };
}

function invalid(message: string): EngineError {
  return EngineError.terminal("sleep.invalid", message);
}
