/**
 * `/schedules`: every schedule (`GET /v1/schedules`) with its status
 * (`GET /v1/schedules/{id}/status`): paused or not, its next slots, its recent
 * slots with their runs, and the controls pause, resume and trigger now.
 * Fetched again every few seconds, and at once after a control.
 */
import { useState } from "preact/hooks";
import { DefinitionList } from "../../schemas/api.ts";
import { ScheduleStatus, SlotRecord } from "../../schemas/schedules.ts";
import { apiJson, encodeSegment, postJson } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { useMayAny } from "./principal.tsx";
import { Link } from "./router.tsx";
import { ErrorNote, Section, StatusBadge, Time } from "./ui.tsx";

/** How often the schedules are fetched again while the tab is visible. */
export const SCHEDULES_REFRESH_MS = 5_000;
/** The recent slots shown per schedule (the status keeps 50). */
const RECENT_SHOWN = 5;

const statusPath = (id: string): string => `/v1/schedules/${encodeSegment(id)}/status`;

/** Every schedule's status, in the listing's order (newest definition first). */
async function loadSchedules(): Promise<ScheduleStatus[]> {
  const list = await apiJson(DefinitionList, "/v1/schedules?limit=100");
  return Promise.all(list.definitions.map((definition) => apiJson(ScheduleStatus, statusPath(definition.id))));
}

export function SchedulesPage() {
  const loaded = useLoad(loadSchedules, [], SCHEDULES_REFRESH_MS);
  const schedules = loaded.data ?? [];
  return (
    <Section title="Schedules">
      <ErrorNote error={loaded.error} />
      {loaded.data === undefined && loaded.error === null ? <p class="muted">Loading…</p> : null}
      {loaded.data !== undefined && schedules.length === 0 ? <p class="muted">No schedules.</p> : null}
      <ul class="schedules">
        {schedules.map((schedule) => (
          <ScheduleCard key={schedule.id} schedule={schedule} onDone={loaded.reload} />
        ))}
      </ul>
    </Section>
  );
}

function ScheduleCard(props: { schedule: ScheduleStatus; onDone: () => void }) {
  const { schedule } = props;
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const may = useMayAny();
  const control = async (name: "pause" | "resume" | "trigger"): Promise<void> => {
    setBusy(true);
    try {
      const path = `/v1/schedules/${encodeSegment(schedule.id)}/${name}`;
      await (name === "trigger" ? postJson(SlotRecord, path, {}) : postJson(ScheduleStatus, path, {}));
      setError(null);
      props.onDone();
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
    }
  };
  return (
    <li class="schedule" data-schedule={schedule.id}>
      <header class="schedule-head">
        <span class="mono schedule-id">
          {schedule.id}@{schedule.version}
        </span>
        <StatusBadge status={schedule.paused ? "paused" : "active"} />
        <span class="schedule-actions">
          {!may(schedule.paused ? "resumeSchedule" : "pauseSchedule") ? null : schedule.paused ? (
            <button type="button" disabled={busy} onClick={() => void control("resume")}>
              Resume
            </button>
          ) : (
            <button type="button" disabled={busy} onClick={() => void control("pause")}>
              Pause
            </button>
          )}
          {may("triggerSchedule") ? (
            <button type="button" disabled={busy} onClick={() => void control("trigger")}>
              Trigger now
            </button>
          ) : null}
        </span>
      </header>
      <ErrorNote error={error} />
      <div class="schedule-next">
        next:{" "}
        {schedule.next.length === 0 ? (
          <span class="muted">none</span>
        ) : (
          schedule.next.map((at) => <Time key={at} at={at} />)
        )}
      </div>
      <RecentSlots recent={schedule.recent.slice(0, RECENT_SHOWN)} />
    </li>
  );
}

function RecentSlots(props: { recent: SlotRecord[] }) {
  if (props.recent.length === 0) {
    return <p class="muted">No slot yet.</p>;
  }
  return (
    <table class="slots">
      <thead>
        <tr>
          <th>slot</th>
          <th>run</th>
          <th>status</th>
          <th>from</th>
        </tr>
      </thead>
      <tbody>
        {props.recent.map((slot) => (
          <tr key={slot.scheduled_at} data-slot={slot.scheduled_at}>
            <td>
              <Time at={slot.scheduled_at} />
            </td>
            <td>
              {slot.run_id === null ? (
                <span class="muted">–</span>
              ) : (
                <Link href={`/runs/${slot.run_id}`} class="mono">
                  {slot.run_id}
                </Link>
              )}
            </td>
            <td title={slot.reason}>
              <StatusBadge status={slot.status} />
              {slot.reason === undefined ? null : <span class="muted slot-reason"> {slot.reason}</span>}
            </td>
            <td>{slot.source}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
