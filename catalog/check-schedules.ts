import type { Schedule } from "../schemas/schedules.ts";
import { compileSchedule, nextSlot } from "../lib/cron.ts";
import { CEL_SCOPES, checkReference, checkSourceLeaves, type CheckContext } from "./checks.ts";

/**
 * A schedule's checks beyond its schema: the workflow it starts is
 * registered, its cron expression parses (five fields) in a time zone that
 * exists, it names at least one time (between `start_at` and `end_at`), and
 * the sources in its `input` parse, reading only `schedule`.
 */
export function checkSchedule(schedule: Schedule, path: string, check: CheckContext): void {
  checkReference("workflows", schedule.workflow, `${path}.workflow`, check.lookup, check.report);
  const compiled = compileSchedule(schedule);
  if (!compiled.ok) {
    const code = compiled.field === "cron" ? "definition.invalid_cron" : "definition.invalid_timezone";
    check.report(`${path}.${compiled.field}`, compiled.message, code);
  } else if (nextSlot(compiled.spec, (compiled.spec.startAt ?? 0) - 1) === null) {
    const when = schedule.end_at === undefined ? "" : " before end_at";
    check.report(
      `${path}.cron`,
      `"${schedule.cron}" names no time${when}: it would never start a run`,
      "definition.invalid_cron",
    );
  }
  if (schedule.input !== undefined) {
    checkSourceLeaves(schedule.input, `${path}.input`, check.report, CEL_SCOPES.schedule);
  }
}
