/**
 * Parts of the run page: the header (status, workflow, how it started, times, the
 * error, the cancel reason, the run's LLM usage, its workflow's limits and its
 * priority), the compensation as a
 * panel, and the nodes' durations as bars on a time axis.
 */
import { isTerminal } from "../../coordinator/lifecycle.ts";
import type { CompensationView, RunView } from "../../schemas/api.ts";
import { keyText } from "../../lib/limit-text.ts";
import { formatMs, formatUsd } from "./calls.ts";
import { Link } from "./router.tsx";
import { limitHref } from "./routes.ts";
import { scaleBars } from "./time-axis.ts";
import { StatusBadge, Time } from "./ui.tsx";

export function RunHeader(props: { view: RunView; cancelReason: string | null }) {
  const { view } = props;
  return (
    <header class="run-head">
      <h1 class="mono run-id">{view.run_id}</h1>
      <p>
        <StatusBadge status={view.status} /> {view.mode} run of{" "}
        <Link href={`/workflows/${encodeURIComponent(view.workflow.id)}`}>
          {view.workflow.id}@{view.workflow.version}
        </Link>
        {view.parent === null ? null : (
          <>
            {" "}
            · child of <Link href={`/runs/${view.parent.run_id}`}>{view.parent.run_id}</Link> (node {view.parent.node}
            {view.parent.step === null ? "" : `, step ${view.parent.step}`})
          </>
        )}
      </p>
      <p class="muted">
        <TriggerLine trigger={view.trigger} /> · created <Time at={view.created_at} /> · updated{" "}
        <Time at={view.updated_at} />
        {view.start_at === null ? null : (
          <span data-start-at>
            {" "}
            · {view.status === "queued" ? "starts" : "start due"} <Time at={view.start_at} />
          </span>
        )}
        {isTerminal(view.status) ? "" : " · live"}
      </p>
      <p class="usage" data-usage>
        LLM usage: {view.usage.input_tokens} tokens in · {view.usage.output_tokens} tokens out ·{" "}
        {formatUsd(view.usage.cost_usd)}
      </p>
      <RunLimits view={view} />
      {view.status === "cancelled" && props.cancelReason !== null ? (
        <p class="cancel-reason">Cancelled: {props.cancelReason}</p>
      ) : null}
      {view.error === null ? null : (
        <p class="error">
          {view.error.code}: {view.error.message}
        </p>
      )}
    </header>
  );
}

/**
 * The run's place in the queues of limits: its priority, shown when a limit
 * concerns it (its workflow names limits, or a step waits for one), and each
 * of its workflow's limits with the key, `held` or `waiting` and since when.
 */
function RunLimits(props: { view: RunView }) {
  const { view } = props;
  const uses = view.limits ?? [];
  if (uses.length === 0 && !view.waiting_for.some((wait) => wait.kind === "limit")) {
    return null;
  }
  return (
    <p class="run-limits" data-run-limits>
      priority <strong data-priority>{view.priority}</strong>
      {uses.map((use) => (
        <span key={use.limit} data-run-limit={use.limit} data-status={use.status}>
          {" "}
          · limit{" "}
          <Link href={limitHref(use.limit, use.key)} class="mono">
            {use.limit}
          </Link>{" "}
          key <span class="mono">{keyText(use.key)}</span> <StatusBadge status={use.status} /> since{" "}
          <Time at={use.since} />
        </span>
      ))}
    </p>
  );
}

/** How the run was started: the API, a plan, its parent, a schedule's slot, an event or a webhook. */
function TriggerLine(props: { trigger: RunView["trigger"] }) {
  const { trigger } = props;
  switch (trigger.kind) {
    case "api":
      return <span data-trigger="api">started by the API</span>;
    case "plan":
      return <span data-trigger="plan">an agent plan</span>;
    case "parent":
      return <span data-trigger="parent">started by its parent</span>;
    case "schedule":
      return (
        <span data-trigger="schedule">
          slot <Time at={trigger.scheduled_at} /> of schedule <span class="mono">{trigger.schedule}</span>@
          {trigger.version}
        </span>
      );
    case "event":
      return (
        <span data-trigger="event">
          started by event <span class="mono">{trigger.name}</span> ({trigger.event_id})
        </span>
      );
    case "webhook":
      return (
        <span data-trigger="webhook">
          started by webhook <span class="mono">{trigger.webhook}</span> (event {trigger.event_id})
        </span>
      );
  }
}

/** The run's undos and how its compensation went. */
export function CompensationPanel(props: { compensation: CompensationView }) {
  const { compensation } = props;
  return (
    <div class="compensation" data-compensation={compensation.status}>
      <p>
        <StatusBadge status={compensation.status === "none" ? "pending" : compensation.status} />{" "}
        {compensation.status === "none" ? "not compensated" : `compensation ${compensation.status}`}
        {compensation.trigger === null ? "" : ` · trigger ${compensation.trigger}`}
        {compensation.started_at === null ? null : (
          <>
            {" "}
            · started <Time at={compensation.started_at} />
          </>
        )}
        {compensation.finished_at === null ? null : (
          <>
            {" "}
            · finished <Time at={compensation.finished_at} />
          </>
        )}
      </p>
      <div class="table-scroll">
        <table class="undos">
          <thead>
            <tr>
              <th>undo of</th>
              <th>action</th>
              <th>status</th>
              <th>attempts</th>
              <th>error</th>
            </tr>
          </thead>
          <tbody>
            {compensation.undos.map((undo, index) => (
              <tr key={index} data-undo={index}>
                <td>
                  {undo.node}
                  {undo.item === null ? "" : `[${undo.item}]`} / {undo.step}
                </td>
                <td class="mono">{undo.action}</td>
                <td>
                  <StatusBadge status={undo.status} />
                </td>
                <td>{undo.attempts}</td>
                <td class="error-cell">{undo.error === null ? "" : `${undo.error.code}: ${undo.error.message}`}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </div>
  );
}

/** Each node's time from start to end as a bar on the run's time axis (a running node runs to now). */
export function NodeDurations(props: { view: RunView }) {
  const { view } = props;
  const ids = Object.keys(view.nodes);
  const time = (iso: string | null | undefined): number | null => (iso ? Date.parse(iso) : null);
  const axis = scaleBars(
    ids.map((id) => ({ id, start: time(view.nodes[id]?.started_at), end: time(view.nodes[id]?.finished_at) })),
    isTerminal(view.status) ? Date.parse(view.updated_at) : Date.now(),
  );
  if (axis.bars.length === 0) {
    return <p class="muted">No node has started.</p>;
  }
  return (
    <div class="durations">
      <div class="axis" aria-hidden="true">
        {axis.ticks.map((tick) => (
          <span key={tick.pct} class="tick" style={{ left: `${tick.pct}%` }}>
            {tick.label}
          </span>
        ))}
      </div>
      {axis.bars.map((bar) => (
        <div key={bar.id} class="duration-row" data-duration-node={bar.id}>
          <span class="duration-label">{bar.id}</span>
          <span class="bar-track">
            <span
              class={`bar status-${view.nodes[bar.id]?.status ?? "pending"}`}
              style={{ left: `${bar.leftPct}%`, width: `${bar.widthPct}%` }}
              title={formatMs(bar.durationMs)}
            />
          </span>
          <span class="duration-value">
            {formatMs(bar.durationMs)}
            {bar.running ? " so far" : ""}
          </span>
        </div>
      ))}
    </div>
  );
}
