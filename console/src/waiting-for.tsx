/**
 * The run page's "Waiting for" box, under the header: each open wait of the
 * run (the run view's `waiting_for`) and where it is. A timer counts down to
 * its time, live, to the second; a gate links to its card further down, where
 * it is answered; a child links to the child run; an event wait names the
 * names it takes and its match, counts down to its timeout when it has one,
 * and opens a form that sends this run a signal (signal-form.tsx), for a
 * principal that may signal runs. A step waiting for room in a limit, and a
 * run queued for a slot of its workflow's limits (the view's `limits`), name
 * the limit (linked to its status on the Limits page for that key), the key
 * and how long it has waited, live.
 */
import { keyText } from "../../lib/limit-text.ts";
import type { RunView, RunWait } from "../../schemas/api.ts";
import { useNow } from "./hooks.ts";
import type { PlanStep } from "./plan-graph.ts";
import { useMay } from "./principal.tsx";
import { Link } from "./router.tsx";
import { limitHref } from "./routes.ts";
import { SignalForm } from "./signal-form.tsx";
import { Time } from "./ui.tsx";
import { formatCountdown, formatWaited, gateAnchor, waitPlace } from "./waits.ts";

export function WaitingFor(props: { view: RunView; plan: readonly PlanStep[] | null; onDone: () => void }) {
  const waits = props.view.waiting_for;
  const queued = (props.view.limits ?? []).filter((use) => use.status === "waiting");
  const now = useNow(
    queued.length > 0 ||
      waits.some(
        (wait) => wait.kind === "timer" || wait.kind === "limit" || (wait.kind === "event" && wait.expires_at !== null),
      ),
  );
  const maySignal = useMay("signalRun");
  if (waits.length === 0 && queued.length === 0) {
    return null;
  }
  return (
    <section class="waiting-for" data-waiting-for aria-label="Waiting for">
      <h2>Waiting for</h2>
      <ul>
        {queued.map((use) => (
          <li key={`run-limit-${use.limit}`} data-wait="run-limit" data-limit={use.limit}>
            <span class="wait-place">the run</span> · a slot of{" "}
            <LimitWait
              limit={use.limit}
              limitKey={use.key}
              since={use.since}
              now={now}
              note={`, before its first node, at priority ${props.view.priority}`}
            />
          </li>
        ))}
        {waits.map((wait, index) => (
          <li key={index} data-wait={wait.kind}>
            <span class="wait-place">{waitPlace(wait, props.plan)}</span>{" "}
            <WaitLine wait={wait} now={now} gates={props.view.gates} />
            {wait.kind === "event" && maySignal ? (
              <details class="signal">
                <summary>Send a signal</summary>
                <SignalForm
                  runId={props.view.run_id}
                  names={wait.names}
                  idPrefix={`signal-${index}`}
                  onDone={props.onDone}
                />
              </details>
            ) : null}
          </li>
        ))}
      </ul>
    </section>
  );
}

function WaitLine(props: { wait: RunWait; now: number; gates: RunView["gates"] }) {
  const { wait } = props;
  if (wait.kind === "timer") {
    const left = formatCountdown(Date.parse(wait.until) - props.now);
    return (
      <span>
        · sleeping ·{" "}
        <strong class="countdown" data-countdown>
          {left === null ? "waking now" : `wakes in ${left}`}
        </strong>{" "}
        <span class="muted">
          (at <Time at={wait.until} />)
        </span>
      </span>
    );
  }
  if (wait.kind === "gate") {
    const gate = props.gates.find((candidate) => candidate.gate_id === wait.gate_id);
    return (
      <span>
        · {gate?.kind === "approval" ? "an approval" : "an answer"} at{" "}
        <a href={`#${gateAnchor(wait.gate_id)}`} title={gate?.prompt}>
          {wait.gate_id}
        </a>{" "}
        <span class="muted">(in Gates below)</span>
      </span>
    );
  }
  if (wait.kind === "event") {
    return <EventLine wait={wait} now={props.now} />;
  }
  if (wait.kind === "limit") {
    return (
      <span>
        · room in <LimitWait limit={wait.limit} limitKey={wait.key} since={wait.since} now={props.now} />
      </span>
    );
  }
  if (wait.kind === "tools") {
    const running = wait.calls.filter((call) => call.status === "running" || call.status === "pending");
    return (
      <span>
        · tool calls of model turn {wait.turn}: <span class="mono">{running.map((call) => call.name).join(", ")}</span>{" "}
        <span class="muted">
          ({wait.calls.length - running.length} of {wait.calls.length} settled)
        </span>
      </span>
    );
  }
  return <ChildLine wait={wait} />;
}

function ChildLine(props: { wait: Extract<RunWait, { kind: "child" }> }) {
  const { wait } = props;
  return (
    <span>
      · child run of <span class="mono">{wait.workflow}</span>:{" "}
      {wait.run_id === null ? (
        <span class="muted">not created yet</span>
      ) : (
        <Link href={`/runs/${wait.run_id}`} class="mono">
          {wait.run_id}
        </Link>
      )}
    </span>
  );
}

/** `limit api-quota for key "acme" · waiting 12s (since …)`, the limit linked to its status for that key. */
function LimitWait(props: { limit: string; limitKey: string; since: string; now: number; note?: string }) {
  const waited = formatWaited(props.now - Date.parse(props.since));
  return (
    <>
      limit{" "}
      <Link href={limitHref(props.limit, props.limitKey)} class="mono" title="its status on the Limits page">
        {props.limit}
      </Link>{" "}
      for key <span class="mono">{keyText(props.limitKey)}</span>
      {props.note ?? ""} ·{" "}
      <strong class="countdown" data-waited>
        {waited === null ? "waiting now" : `waiting ${waited}`}
      </strong>{" "}
      <span class="muted">
        (since <Time at={props.since} />)
      </span>
    </>
  );
}

function EventLine(props: { wait: Extract<RunWait, { kind: "event" }>; now: number }) {
  const { wait } = props;
  const left = wait.expires_at === null ? null : formatCountdown(Date.parse(wait.expires_at) - props.now);
  return (
    <span>
      · an event named <span class="mono">{wait.names.join(" or ")}</span>
      {wait.match === undefined ? null : (
        <>
          {" "}
          where <span class="mono">{wait.match}</span>
        </>
      )}
      {wait.expires_at === null ? null : (
        <>
          {" "}
          ·{" "}
          <strong class="countdown" data-countdown>
            {left === null ? "timing out now" : `times out in ${left}`}
          </strong>{" "}
          <span class="muted">
            (at <Time at={wait.expires_at} />)
          </span>
        </>
      )}
    </span>
  );
}
