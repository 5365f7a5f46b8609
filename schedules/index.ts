/** Schedules: one Durable Object per schedule starts its slots' runs (docs/architecture.md, "Schedules"). */
// The ScheduleHub class itself (schedules/hub.ts) is exported by src/index.ts only: it starts runs through
// src/start.ts, which the API's modules import, and these modules are imported by the API.
export { BUFFER_POLL_MS, decideOverlap, dueSlots, MAX_SLOTS_PER_WAKE, RECENT_SLOTS, withRecord } from "./decide.ts";
export { scheduleInput, startSlot, type StartRun } from "./start-slot.ts";
export {
  armSchedules,
  backfillSchedule,
  pauseSchedule,
  resumeSchedule,
  scheduleHub,
  scheduleStatus,
  SCHEDULE_CONTROL_CALLS,
  SCHEDULE_CONTROLS,
  triggerSchedule,
  type ScheduleControl,
  type ScheduleHubApi,
} from "./route.ts";
