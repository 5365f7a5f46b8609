/**
 * `/gates`, "Waiting for me": every open gate across runs (`GET /v1/gates`),
 * newest run first, each with its run and the way to answer it, as on the run
 * page. Fetched again every few seconds, and at once after an answer.
 */
import { useState } from "preact/hooks";
import { OpenGateList, type OpenGate } from "../../schemas/api.ts";
import { apiJson } from "./api.ts";
import { GateCard } from "./gate-card.tsx";
import { useLoad } from "./hooks.ts";
import { Link } from "./router.tsx";
import { ErrorNote, Section, StatusBadge } from "./ui.tsx";

/** How often the list is fetched again while the tab is visible. */
export const GATES_REFRESH_MS = 3_000;
const RUNS_PER_PAGE = 20;

const gatesPath = (cursor?: string): string =>
  `/v1/gates?status=open&limit=${RUNS_PER_PAGE}${cursor === undefined ? "" : `&cursor=${encodeURIComponent(cursor)}`}`;

export function GatesPage() {
  const first = useLoad(() => apiJson(OpenGateList, gatesPath()), [], GATES_REFRESH_MS);
  const [more, setMore] = useState<{ gates: OpenGate[]; cursor: string | null } | null>(null);
  const [moreError, setMoreError] = useState<unknown>(null);
  const shown = first.data?.gates ?? [];
  const seen = new Set(shown.map((gate) => `${gate.run_id}/${gate.gate_id}`));
  const gates = [...shown, ...(more?.gates ?? []).filter((gate) => !seen.has(`${gate.run_id}/${gate.gate_id}`))];
  const cursor = more !== null ? more.cursor : (first.data?.next_cursor ?? null);
  const loadMore = async (): Promise<void> => {
    if (cursor === null) {
      return;
    }
    try {
      const page = await apiJson(OpenGateList, gatesPath(cursor));
      setMore({ gates: [...(more?.gates ?? []), ...page.gates], cursor: page.next_cursor });
      setMoreError(null);
    } catch (error) {
      setMoreError(error);
    }
  };
  const answered = (): void => {
    setMore(null);
    first.reload();
  };
  return (
    <Section title="Waiting for me">
      <ErrorNote error={first.error ?? moreError} />
      {first.data === undefined && first.error === null ? <p class="muted">Loading…</p> : null}
      {first.data !== undefined && gates.length === 0 ? <p class="muted">No open gates.</p> : null}
      <ul class="gates">
        {gates.map((gate) => (
          <GateCard
            key={`${gate.run_id}/${gate.gate_id}`}
            runId={gate.run_id}
            gate={gate}
            stepLabel={gate.step}
            onDone={answered}
            context={<RunOfGate gate={gate} />}
          />
        ))}
      </ul>
      {cursor !== null ? (
        <button type="button" onClick={() => void loadMore()}>
          Load more
        </button>
      ) : null}
    </Section>
  );
}

function RunOfGate(props: { gate: OpenGate }) {
  const { gate } = props;
  return (
    <div class="gate-run">
      run <Link href={`/runs/${gate.run_id}`}>{gate.run_id}</Link> <StatusBadge status={gate.run_status} /> of{" "}
      <Link href={`/workflows/${encodeURIComponent(gate.workflow.id)}`}>
        {gate.workflow.id}@{gate.workflow.version}
      </Link>
    </div>
  );
}
