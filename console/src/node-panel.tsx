/**
 * One node in full, shown when its box in the graph is clicked: `GET
 * /v1/runs/{id}/nodes/{node}` (its invocations, each dispatch's step records
 * with status, duration and calls, and the child runs it started), read again
 * whenever the run changes.
 */
import { NodeDetail, type DispatchView } from "../../schemas/api.ts";
import { apiJson, encodeSegment } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { Link } from "./router.tsx";
import { ErrorNote, JsonBlock, Section, StatusBadge } from "./ui.tsx";

export function NodePanel(props: { runId: string; node: string; version: string; onClose: () => void }) {
  const detail = useLoad(
    () => apiJson(NodeDetail, `/v1/runs/${encodeSegment(props.runId)}/nodes/${encodeSegment(props.node)}`),
    [props.runId, props.node, props.version],
  );
  const close = (
    <button type="button" class="link" onClick={props.onClose}>
      close
    </button>
  );
  const data = detail.data;
  return (
    <Section title={`Node ${props.node}`} actions={close}>
      <ErrorNote error={detail.error} />
      {data === undefined ? null : (
        <div class="node-panel" data-node-panel={props.node}>
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
              </summary>
              {invocation.dispatches.map((dispatch) => (
                <DispatchSteps key={dispatch.seq} dispatch={dispatch} />
              ))}
              <h3>input</h3>
              <JsonBlock value={invocation.input} />
              <h3>output</h3>
              <JsonBlock value={invocation.output} />
            </details>
          ))}
        </div>
      )}
    </Section>
  );
}

function DispatchSteps(props: { dispatch: DispatchView }) {
  const { dispatch } = props;
  return (
    <table class="steps">
      <caption>
        #{dispatch.seq} {dispatch.kind}, attempt {dispatch.attempt}
      </caption>
      <tbody>
        {dispatch.steps.map((step) => (
          <tr key={step.step}>
            <td>{step.step}</td>
            <td class="mono">{step.action}</td>
            <td>
              <StatusBadge status={step.status} />
            </td>
            <td>{step.duration_ms} ms</td>
            <td>{step.attempts.length} call(s)</td>
            <td class="error-cell">{step.error === undefined ? "" : `${step.error.code}: ${step.error.message}`}</td>
          </tr>
        ))}
      </tbody>
    </table>
  );
}
