/**
 * `/workflows`: every workflow (its latest version); `/workflows/{id}`: its
 * versions, one version's definition as YAML, and a form, generated from that
 * version's `input_schema`, that starts a run of it.
 */
import { useState } from "preact/hooks";
import { stringify } from "yaml";
import { DefinitionList, DefinitionRecord, DefinitionVersions, StartRunResponse } from "../../schemas/api.ts";
import { apiJson, postJson, encodeSegment } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { Link, navigate } from "./router.tsx";
import { useMay } from "./principal.tsx";
import { SchemaForm } from "./schema-form.tsx";
import { ErrorNote, Section, Time } from "./ui.tsx";

export function WorkflowsPage() {
  const list = useLoad(() => apiJson(DefinitionList, "/v1/workflows?limit=100"), []);
  return (
    <Section title="Workflows">
      <ErrorNote error={list.error} />
      {list.data?.definitions.length === 0 ? <p class="muted">No workflows registered yet.</p> : null}
      <table>
        <tbody>
          {(list.data?.definitions ?? []).map((workflow) => (
            <tr key={workflow.id}>
              <td>
                <Link href={`/workflows/${encodeURIComponent(workflow.id)}`}>{workflow.id}</Link>
              </td>
              <td>v{workflow.version}</td>
              <td>
                <Time at={workflow.created_at} />
              </td>
              <td class="muted">{workflow.description ?? ""}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </Section>
  );
}

export function WorkflowPage(props: { id: string }) {
  const versions = useLoad(
    () => apiJson(DefinitionVersions, `/v1/workflows/${encodeSegment(props.id)}/versions?limit=100`),
    [props.id],
  );
  const [picked, setPicked] = useState<number | null>(null);
  const latest = versions.data?.versions.reduce((top, v) => Math.max(top, v.version), 0);
  const version = picked ?? latest;
  return (
    <>
      <h1>{props.id}</h1>
      <ErrorNote error={versions.error} />
      <Section title="Versions">
        <ul class="versions">
          {(versions.data?.versions ?? []).map((v) => (
            <li key={v.version}>
              <button
                type="button"
                class={v.version === version ? "link current" : "link"}
                onClick={() => setPicked(v.version)}
              >
                v{v.version}
              </button>{" "}
              <Time at={v.created_at} />
            </li>
          ))}
        </ul>
        <Link href={`/?workflow=${encodeURIComponent(props.id)}`}>Runs of this workflow</Link>
      </Section>
      {version === undefined || version === 0 ? null : <VersionView key={version} id={props.id} version={version} />}
    </>
  );
}

function VersionView(props: { id: string; version: number }) {
  const record = useLoad(
    () => apiJson(DefinitionRecord, `/v1/workflows/${encodeSegment(props.id)}/versions/${props.version}`),
    [props.id, props.version],
  );
  const [error, setError] = useState<unknown>(null);
  const mayStart = useMay("startRun");
  const definition = record.data?.definition;
  const start = async (input: unknown): Promise<void> => {
    try {
      const started = await postJson(StartRunResponse, `/v1/workflows/${encodeSegment(props.id)}/runs`, {
        input,
        version: props.version,
      });
      if (started.run_id !== null) {
        navigate(`/runs/${started.run_id}`);
      }
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <>
      <Section title={`Start a run of v${props.version}`}>
        <ErrorNote error={record.error ?? error} />
        {!mayStart ? (
          <p class="muted">Your roles do not allow starting runs (it needs runner).</p>
        ) : definition === undefined ? null : (
          <SchemaForm
            schema={definition["input_schema"] ?? {}}
            submitLabel="Start run"
            onSubmit={start}
            idPrefix="start"
          />
        )}
      </Section>
      <Section title={`Definition v${props.version} (YAML)`}>
        {definition === undefined ? null : <pre class="yaml">{stringify(definition)}</pre>}
      </Section>
    </>
  );
}
