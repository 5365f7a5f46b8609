import { EngineError } from "../lib/errors.ts";
import { unwrap } from "../lib/result.ts";
import { DEFINITION_ID_PATTERN } from "../schemas/common.ts";
import type { BackfillAnswer, ScheduleStatus, SlotRecord } from "../schemas/schedules.ts";
import type { ScheduleHub } from "./hub.ts";

/** The controls `POST /v1/schedules/{id}/<control>` (docs/api.md, "Schedules"). */
export const SCHEDULE_CONTROLS = ["pause", "resume", "trigger", "backfill"] as const;
export type ScheduleControl = (typeof SCHEDULE_CONTROLS)[number];

/** The schedule object's methods (its stub's generated types are too deep for tsc; the methods answer plain Results). */
export type ScheduleHubApi = Pick<ScheduleHub, "arm" | "status" | "pause" | "resume" | "trigger" | "backfill">;

/** The object of schedule `id` (one per schedule, named by its id). */
export function scheduleHub(env: Env, id: string): ScheduleHubApi {
  if (!DEFINITION_ID_PATTERN.test(id)) {
    throw EngineError.terminal("schedule.not_found", `no schedule "${id}"`);
  }
  return env.SCHEDULE_HUB.get(env.SCHEDULE_HUB.idFromName(id)) as unknown as ScheduleHubApi;
}

/** `GET /v1/schedules/{id}/status`. */
export async function scheduleStatus(env: Env, id: string): Promise<ScheduleStatus> {
  return unwrap(await scheduleHub(env, id).status(id));
}

export async function pauseSchedule(env: Env, id: string): Promise<ScheduleStatus> {
  return unwrap(await scheduleHub(env, id).pause(id));
}

export async function resumeSchedule(env: Env, id: string): Promise<ScheduleStatus> {
  return unwrap(await scheduleHub(env, id).resume(id));
}

export async function triggerSchedule(env: Env, id: string): Promise<SlotRecord> {
  return unwrap(await scheduleHub(env, id).trigger(id));
}

export async function backfillSchedule(env: Env, id: string, body: unknown): Promise<BackfillAnswer> {
  return unwrap(await scheduleHub(env, id).backfill(id, body));
}

/** `POST /v1/schedules/{id}/<control>`, one row per control; only a backfill reads a body. */
export const SCHEDULE_CONTROL_CALLS: {
  [C in ScheduleControl]: (
    env: Env,
    id: string,
    body: unknown,
  ) => Promise<ScheduleStatus | SlotRecord | BackfillAnswer>;
} = {
  pause: (env, id) => pauseSchedule(env, id),
  resume: (env, id) => resumeSchedule(env, id),
  trigger: (env, id) => triggerSchedule(env, id),
  backfill: backfillSchedule,
};

/**
 * Tells each registered schedule's object which version is now registered,
 * after the catalog committed it (also for a registration that found its
 * content stored already, so retrying a registration whose notice was lost
 * arms the schedule): the object adopts it when it is newer than its own.
 */
export async function armSchedules(
  env: Env,
  created: readonly { kind: string; id: string; version: number }[],
): Promise<void> {
  const schedules = created.filter((definition) => definition.kind === "schedules");
  await Promise.all(schedules.map(async ({ id, version }) => unwrap(await scheduleHub(env, id).arm(id, version))));
}
