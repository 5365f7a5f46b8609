/**
 * One node in full, shown when its box in the graph is clicked: `GET
 * /v1/runs/{id}/nodes/{node}` (its invocations, each dispatch's step records
 * with status, duration and calls, an agent step's loop as a conversation, and
 * the child runs it started, and an invocation waiting for room in a limit
 * names it), read again whenever the run changes.
 */
import { keyText } from "../../lib/limit-text.ts";
import { NodeDetail } from "../../schemas/api.ts";
import { AgentLoop } from "./agent-loop.tsx";
import { apiJson, encodeSegment } from "./api.ts";
import { useLoad } from "./hooks.ts";
import type { PlanStep } from "./plan-graph.ts";
import { Link } from "./router.tsx";
import { limitHref } from "./routes.ts";
import { DispatchSteps } from "./step-calls.tsx";
import { ErrorNote, JsonBlock, Section, StatusBadge, Time } from "./ui.tsx";

export interface NodePanelProps {
  runId: string;
  node: string;
  version: string;
  plan: readonly PlanStep[] | null;
  onClose: () => void;
}

export function NodePanel(props: NodePanelProps) {
  const detail = useLoad(
    () => apiJson(NodeDetail, `/v1/runs/${encodeSegment(props.runId)}/nodes/${encodeSegment(props.node)}`),
    [props.runId, props.node, props.version],
  );
  const close = (
    <button type="button" class="link" onClick={props.onClose}>
      close
    </button>
  );
  const tool = props.plan?.find((step) => step.id === props.node)?.tool;
  return (
    <Section title={`Node ${props.node}${tool === undefined ? "" : ` (${tool})`}`} actions={close}>
      <ErrorNote error={detail.error} />
      {detail.data === undefined ? null : <NodeBody data={detail.data} plan={props.plan} />}
    </Section>
  );
}

function NodeBody(props: { data: NodeDetail; plan: readonly PlanStep[] | null }) {
  const { data } = props;
  return (
    <div class="node-panel" data-node-panel={data.node}>
      <p>
        <StatusBadge status={data.status} /> {data.attempts} attempt(s), {data.iterations} iteration(s)
        {data.error === undefined ? null : (
          <span class="error">
            {" "}
            · {data.error.code}: {data.error.message}
          </span>
        )}
      </p>
      {data.children.length === 0 ? null : (
        <ul class="children">
          {data.children.map((child) => (
            <li key={child.run_id}>
              child <Link href={`/runs/${child.run_id}`}>{child.run_id}</Link> ({child.workflow}
              {child.item === null ? "" : `, item ${child.item}`}
              {child.step === null ? "" : `, step ${child.step}`}): {child.status ?? "running"}
            </li>
          ))}
        </ul>
      )}
      {data.invocations.map((invocation) => (
        <details key={invocation.index} open={data.invocations.length === 1}>
          <summary>
            invocation {invocation.index} · <StatusBadge status={invocation.status} /> · {invocation.attempts}{" "}
            attempt(s)
            {invocation.waiting_for?.kind === "limit" ? (
              <span data-invocation-limit={invocation.waiting_for.limit}>
                {" "}
                · waits for limit{" "}
                <Link href={limitHref(invocation.waiting_for.limit, invocation.waiting_for.key)} class="mono">
                  {invocation.waiting_for.limit}
                </Link>{" "}
                key <span class="mono">{keyText(invocation.waiting_for.key)}</span> since{" "}
                <Time at={invocation.waiting_for.since} />
              </span>
            ) : null}
          </summary>
          {invocation.agent === undefined ? null : <AgentLoop agent={invocation.agent} />}
          {invocation.dispatches.map((dispatch) => (
            <DispatchSteps key={dispatch.seq} dispatch={dispatch} node={data.node} plan={props.plan} />
          ))}
          <h3>input</h3>
          <JsonBlock value={invocation.input} />
          <h3>output</h3>
          <JsonBlock value={invocation.output} />
        </details>
      ))}
    </div>
  );
}
