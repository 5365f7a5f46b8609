import type { BackfillAnswer, DefinitionList, ScheduleStatus, SlotRecord } from "../schemas/index.ts";
import { CliError } from "./api.ts";
import { awaitRun, type Exit, type Io } from "./commands.ts";

/** `trellis schedule <id> <action>`: the schedule controls (docs/api.md, "Schedules"). */
export const SCHEDULE_ACTIONS = ["pause", "resume", "trigger", "backfill"] as const;
export type ScheduleAction = (typeof SCHEDULE_ACTIONS)[number];

export interface ScheduleOptions {
  from?: string;
  to?: string;
  overlap?: string;
  follow?: boolean;
  wait?: boolean;
}

const schedulePath = (id: string) => `/v1/schedules/${encodeURIComponent(id)}`;

/** `trellis schedules`: every schedule, whether it is paused, its next slot and what its latest slot did. */
export async function schedulesCommand(io: Io): Promise<Exit> {
  const list = await io.api.json<DefinitionList>("GET", "/v1/schedules?limit=100");
  const statuses = await Promise.all(
    list.definitions.map((definition) => io.api.json<ScheduleStatus>("GET", `${schedulePath(definition.id)}/status`)),
  );
  if (io.json) {
    io.out.write(`${JSON.stringify({ schedules: statuses }, null, 2)}\n`);
  } else if (statuses.length === 0) {
    io.out.write("no schedules\n");
  } else {
    io.out.write(`${statuses.map(statusLine).join("\n")}\n`);
  }
  return 0;
}

/** One schedule in one line: `nightly@2  active  next 2026-03-03T01:30:00.000Z  last 2026-03-02T01:30:00.000Z completed`. */
export function statusLine(status: ScheduleStatus): string {
  const next = status.next[0] === undefined ? "next -" : `next ${status.next[0]}`;
  const last = status.recent[0];
  const latest = last === undefined ? "" : `  last ${last.scheduled_at} ${last.status}`;
  return `${`${status.id}@${status.version}`.padEnd(24)} ${status.paused ? "paused" : "active"}  ${next}${latest}`;
}

/** `trellis schedule <id> pause|resume|trigger|backfill`; `trigger --follow` watches the run it started. */
export async function scheduleCommand(
  io: Io,
  id: string,
  action: ScheduleAction,
  options: ScheduleOptions,
): Promise<Exit> {
  const path = `${schedulePath(id)}/${action}`;
  if (action === "backfill") {
    const answer = await io.api.json<BackfillAnswer>("POST", path, { body: backfillBody(options) });
    print(io, answer, () =>
      answer.slots === 0 ? "no slot in that range" : `queued ${answer.slots} slot(s): ${answer.first} … ${answer.last}`,
    );
    return 0;
  }
  if (action === "trigger") {
    const slot = await io.api.json<SlotRecord>("POST", path);
    if (slot.run_id !== null && (options.follow === true || options.wait === true)) {
      return awaitRun(io, slot.run_id, options);
    }
    print(io, slot, () => `${slot.scheduled_at}  ${slot.run_id ?? "-"}  ${slot.status}${reasonOf(slot)}`);
    return slot.run_id === null ? 1 : 0;
  }
  const status = await io.api.json<ScheduleStatus>("POST", path);
  print(io, status, () => statusLine(status));
  return 0;
}

function backfillBody(options: ScheduleOptions): Record<string, string> {
  if (options.from === undefined || options.to === undefined) {
    throw new CliError(
      "cli.invalid_backfill",
      "backfill needs --from and --to (ISO 8601 times, e.g. 2026-03-01T00:00:00Z)",
    );
  }
  return { from: options.from, to: options.to, ...(options.overlap === undefined ? {} : { overlap: options.overlap }) };
}

const reasonOf = (slot: SlotRecord) => (slot.reason === undefined ? "" : `  ${slot.reason}`);

function print(io: Io, value: unknown, text: () => string): void {
  io.out.write(`${io.json ? JSON.stringify(value, null, 2) : text()}\n`);
}
