/**
 * `/runs/{run_id}`: one run, live. Header (status, workflow, parent, times,
 * error), controls, open gates with their forms, the DAG, the verification of
 * the journal in this browser, and the journal as a timeline.
 */
import { useState } from "preact/hooks";
import { isTerminal } from "../../coordinator/lifecycle.ts";
import type { RunView } from "../../schemas/api.ts";
import { DagGraph } from "./dag.tsx";
import { childrenByNode } from "./journal-summary.ts";
import { JournalTimeline } from "./journal-timeline.tsx";
import { NodePanel } from "./node-panel.tsx";
import { Gates, RunControls } from "./run-actions.tsx";
import { useRunState } from "./run-state.ts";
import { Link } from "./router.tsx";
import { ErrorNote, JsonBlock, Section, StatusBadge, Time } from "./ui.tsx";
import { verificationText, type Verification } from "./verify.ts";

export function RunPage(props: { runId: string }) {
  const state = useRunState(props.runId);
  const [selected, setSelected] = useState<string | null>(null);
  const { view } = state;
  if (view === undefined) {
    return (
      <>
        <h1 class="mono">{props.runId}</h1>
        {state.error === null ? <p class="muted">Loading…</p> : <ErrorNote error={state.error} />}
      </>
    );
  }
  const children = childrenByNode(state.entries.map((received) => received.entry));
  return (
    <>
      <RunHeader view={view} />
      <ErrorNote error={state.error} />
      <RunControls view={view} onDone={state.refresh} />
      <VerifyLine verification={state.verification} />
      <Section title="Gates">
        <Gates view={view} onDone={state.refresh} />
      </Section>
      <Section title="Graph">
        <div class="dag-scroll">
          <DagGraph view={view} definition={state.definition} children={children} onSelect={setSelected} />
        </div>
        <ChildList children={children} />
      </Section>
      {selected === null ? null : (
        <NodePanel
          runId={view.run_id}
          node={selected}
          version={`${view.updated_at}/${state.entries.length}`}
          onClose={() => setSelected(null)}
        />
      )}
      <Section title={`Journal (${state.entries.length})`}>
        <JournalTimeline entries={state.entries} />
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

function RunHeader(props: { view: RunView }) {
  const { view } = props;
  return (
    <header class="run-head">
      <h1 class="mono">{view.run_id}</h1>
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
        created <Time at={view.created_at} /> · updated <Time at={view.updated_at} />
        {isTerminal(view.status) ? "" : " · live"}
      </p>
      {view.error === null ? null : (
        <p class="error">
          {view.error.code}: {view.error.message}
        </p>
      )}
    </header>
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
