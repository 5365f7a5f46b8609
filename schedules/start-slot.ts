import type { CreateRunOutcome } from "../coordinator/index.ts";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { buildValue } from "../lib/expr/mapping.ts";
import { MAX_BODY_BYTES } from "../lib/json-limits.ts";
import type { Json } from "../schemas/common.ts";
import type { Schedule, SlotRecord, SlotSource } from "../schemas/schedules.ts";
import type { TriggeredStart } from "../src/start.ts";

/** Starts (or finds) a run through the engine's one typed start. */
export type StartRun = (start: TriggeredStart) => Promise<CreateRunOutcome>;

/** The `schedule` variable a schedule's `input` reads. */
export interface ScheduleVariable {
  id: string;
  version: number;
  scheduled_at: string;
}

/**
 * A slot's run, started through the typed start: its identity is
 * `(schedule, scheduled_at)`, so starting one slot twice (a retried wake, two
 * firings at once, a backfill over a slot that already ran) finds the same
 * run. A start that cannot succeed (unknown workflow, input the workflow
 * refuses, an `input` expression that fails) is recorded as `start_failed`
 * with its code; an infrastructure failure is thrown, for the wake to retry.
 */
export async function startSlot(
  startRun: StartRun,
  schedule: Schedule,
  version: number,
  slot: number,
  source: SlotSource,
): Promise<SlotRecord> {
  const scheduledAt = new Date(slot).toISOString();
  const variable: ScheduleVariable = { id: schedule.id, version, scheduled_at: scheduledAt };
  try {
    const input = scheduleInput(schedule.input, variable);
    const outcome = await startRun({
      workflow: schedule.workflow,
      input,
      trigger: { kind: "schedule", schedule: schedule.id, version, scheduled_at: scheduledAt },
      key: `${schedule.id}\n${scheduledAt}`,
      created_by: `schedule:${schedule.id}`,
    });
    return { scheduled_at: scheduledAt, run_id: outcome.run.run_id, status: outcome.run.status, source };
  } catch (thrown) {
    const error = ensureEngineError(thrown);
    if (error.retryable || error.code === "internal.error") {
      throw error;
    }
    const reason = `${error.code}: ${error.message}`;
    return { scheduled_at: scheduledAt, run_id: null, status: "start_failed", reason, source };
  }
}

/** The run's input: the schedule's `input` with its source leaves evaluated over `{ schedule }`; `{}` without one. */
export function scheduleInput(input: Json | undefined, schedule: ScheduleVariable): Json {
  if (input === undefined) {
    return {};
  }
  const built = buildValue(input, { schedule }, "input", MAX_BODY_BYTES);
  if (!built.found) {
    throw EngineError.terminal("schedule.invalid_input", "the schedule's input selects nothing");
  }
  return built.value;
}
