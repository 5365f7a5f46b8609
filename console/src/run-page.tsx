/**
 * `/runs/{run_id}`: one run, live. Header (status, workflow, parent, times,
 * error, cancel reason, LLM usage), what it waits for (timers counting down,
 * gates, children, events, with a form to send a signal), the controls the run accepts, its gates
 * with their answers, the DAG (a plan run's drawn from its plan), the node
 * durations on a time axis, the compensation, the verification of the
 * journal in this browser, and the journal as a timeline. A deleted run's
 * page says when it was deleted, with its archived journal if it has one.
 */
import { useMemo, useState } from "preact/hooks";
import { describeBy } from "../../lib/journal/by.ts";
import type { RunView } from "../../schemas/api.ts";
import { DagGraph } from "./dag.tsx";
import { DeletedRunPage, isRunDeleted } from "./deleted-run.tsx";
import type { ReceivedEntry } from "./events.ts";
import { cancelReasonOf, childrenByNode } from "./journal-summary.ts";
import { JournalTimeline } from "./journal-timeline.tsx";
import { NodePanel } from "./node-panel.tsx";
import { planStepsOf } from "./plan-graph.ts";
import { Gates, RunControls } from "./run-actions.tsx";
import { CompensationPanel, NodeDurations, RunHeader } from "./run-panels.tsx";
import { useRunState } from "./run-state.ts";
import { Link } from "./router.tsx";
import { ErrorNote, JsonBlock, Section } from "./ui.tsx";
import { verificationText, type Verification } from "./verify.ts";
import { WaitingFor } from "./waiting-for.tsx";

export function RunPage(props: { runId: string }) {
  const state = useRunState(props.runId);
  const [selected, setSelected] = useState<string | null>(null);
  const entries = useMemo(() => state.entries.map((received) => received.entry), [state.entries]);
  const plan = useMemo(() => planStepsOf(entries.slice(0, 1)), [entries.length > 0]);
  const { view } = state;
  if (view === undefined && isRunDeleted(state.error)) {
    return <DeletedRunPage runId={props.runId} error={state.error} />;
  }
  if (view === undefined) {
    return (
      <>
        <h1 class="mono run-id">{props.runId}</h1>
        {state.error === null ? <p class="muted">Loading…</p> : <ErrorNote error={state.error} />}
      </>
    );
  }
  const children = childrenByNode(entries);
  return (
    <>
      <RunHeader view={view} cancelReason={cancelReasonOf(entries)} />
      <ErasedNote view={view} />
      <WaitingFor view={view} plan={plan} onDone={state.refresh} />
      <ErrorNote error={state.error} />
      <RunControls view={view} onDone={state.refresh} />
      <VerifyLine verification={state.verification} />
      <Section title="Gates">
        <Gates view={view} plan={plan} onDone={state.refresh} />
      </Section>
      <Section title={plan === null ? "Graph" : "Plan"}>
        <div class="dag-scroll">
          <DagGraph view={view} definition={state.definition} plan={plan} children={children} onSelect={setSelected} />
        </div>
        <ChildList children={children} />
      </Section>
      {selected === null ? null : (
        <NodePanel
          runId={view.run_id}
          node={selected}
          plan={plan}
          version={`${view.updated_at}/${state.entries.length}`}
          onClose={() => setSelected(null)}
        />
      )}
      <RunDetails view={view} entries={state.entries} />
    </>
  );
}

/** Below the graph: durations, compensation, the journal, input and output. */
function RunDetails(props: { view: RunView; entries: readonly ReceivedEntry[] }) {
  const { view } = props;
  return (
    <>
      <Section title="Durations">
        <NodeDurations view={view} />
      </Section>
      {view.compensation === undefined ? null : (
        <Section title="Compensation">
          <CompensationPanel compensation={view.compensation} />
        </Section>
      )}
      <Section title={`Journal (${props.entries.length})`}>
        <JournalTimeline entries={props.entries} />
      </Section>
      <Section title="Input and output">
        <h3>input</h3>
        <JsonBlock value={view.input} />
        <h3>output</h3>
        <JsonBlock value={view.output} />
      </Section>
    </>
  );
}

/** An erased run says so: when, by whom and why; its input, outputs and answers are gone. */
function ErasedNote(props: { view: RunView }) {
  const { erased } = props.view;
  if (erased === undefined) {
    return null;
  }
  return (
    <p class="erased" data-erased={erased.at} role="note">
      Erased {erased.at}
      {erased.by === undefined ? "" : ` by ${describeBy(erased.by)}`}: {erased.reason}. Its input, outputs and answers
      are gone; the journal keeps their digests.
    </p>
  );
}

function VerifyLine(props: { verification: Verification }) {
  return (
    <p class={`verify verify-${props.verification.state}`} data-state={props.verification.state} role="status">
      {verificationText(props.verification)}
    </p>
  );
}

function ChildList(props: { children: Map<string, string[]> }) {
  if (props.children.size === 0) {
    return null;
  }
  return (
    <ul class="children">
      {[...props.children].map(([node, runs]) =>
        runs.map((run) => (
          <li key={run}>
            {node} → <Link href={`/runs/${run}`}>{run}</Link>
          </li>
        )),
      )}
    </ul>
  );
}
