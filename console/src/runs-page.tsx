/**
 * `/`: the run index (`GET /v1/runs`), newest first, filtered by workflow,
 * status, parent run and creation time (the filters live in the query
 * string, so a filtered list can be linked and reloaded). The first page is
 * fetched again every few seconds, so statuses move while runs progress.
 */
import { useState } from "preact/hooks";
import { RunList, type RunSummary } from "../../schemas/api.ts";
import { RUN_STATUSES } from "../../schemas/run.ts";
import { apiJson } from "./api.ts";
import { useLoad } from "./hooks.ts";
import { Link, navigate } from "./router.tsx";
import { ErrorNote, Section, StatusBadge, Time } from "./ui.tsx";

/** How often the list is fetched again while the tab is visible. */
export const RUN_LIST_REFRESH_MS = 2_000;
const PAGE_SIZE = 50;
const FILTERS = ["workflow", "status", "parent", "created_after", "created_before"] as const;
type Filter = (typeof FILTERS)[number];

function listPath(query: URLSearchParams, cursor?: string): string {
  const params = new URLSearchParams();
  for (const name of FILTERS) {
    const value = query.get(name);
    if (value !== null && value !== "") {
      params.set(name, value);
    }
  }
  params.set("limit", String(PAGE_SIZE));
  if (cursor !== undefined) {
    params.set("cursor", cursor);
  }
  return `/v1/runs?${params.toString()}`;
}

export function RunsPage(props: { query: URLSearchParams }) {
  const key = props.query.toString();
  const first = useLoad(() => apiJson(RunList, listPath(props.query)), [key], RUN_LIST_REFRESH_MS);
  const [more, setMore] = useState<{ runs: RunSummary[]; cursor: string | null; key: string } | null>(null);
  const [moreError, setMoreError] = useState<unknown>(null);
  const extra = more !== null && more.key === key ? more : null;
  const shown = first.data?.runs ?? [];
  const seen = new Set(shown.map((run) => run.run_id));
  const runs = [...shown, ...(extra?.runs ?? []).filter((run) => !seen.has(run.run_id))];
  const cursor = extra !== null ? extra.cursor : (first.data?.next_cursor ?? null);
  const loadMore = async (): Promise<void> => {
    if (cursor === null) {
      return;
    }
    try {
      const page = await apiJson(RunList, listPath(props.query, cursor));
      setMore({ runs: [...(extra?.runs ?? []), ...page.runs], cursor: page.next_cursor, key });
      setMoreError(null);
    } catch (error) {
      setMoreError(error);
    }
  };
  return (
    <>
      <Filters key={key} query={props.query} />
      <Section title="Runs">
        <ErrorNote error={first.error ?? moreError} />
        {first.data === undefined && first.error === null ? <p class="muted">Loading…</p> : null}
        {first.data !== undefined && runs.length === 0 ? <p class="muted">No runs match.</p> : null}
        {runs.length > 0 ? (
          <div class="table-scroll">
            <RunTable runs={runs} />
          </div>
        ) : null}
        {cursor !== null ? (
          <button type="button" onClick={() => void loadMore()}>
            Load more
          </button>
        ) : null}
      </Section>
    </>
  );
}

function RunTable(props: { runs: RunSummary[] }) {
  return (
    <table class="runs">
      <thead>
        <tr>
          <th>run</th>
          <th>workflow</th>
          <th>status</th>
          <th>mode</th>
          <th>parent</th>
          <th>created</th>
          <th>updated</th>
          <th>error</th>
        </tr>
      </thead>
      <tbody>
        {props.runs.map((run) => {
          const parent = run.parent;
          return (
            <tr key={run.run_id} data-run-id={run.run_id}>
              <td>
                <Link href={`/runs/${run.run_id}`} class="mono">
                  {run.run_id}
                </Link>
              </td>
              <td>
                <Link href={`/workflows/${encodeURIComponent(run.workflow.id)}`}>
                  {run.workflow.id}@{run.workflow.version}
                </Link>
              </td>
              <td>
                <StatusBadge status={run.status} />
              </td>
              <td>{run.mode}</td>
              <td>{parent === null ? null : <Link href={`/runs/${parent}`}>{parent.slice(0, 12)}…</Link>}</td>
              <td>
                <Time at={run.created_at} />
              </td>
              <td title={run.deleted_at === null ? undefined : "deleted"}>
                <Time at={run.deleted_at ?? run.updated_at} />
              </td>
              <td class="error-cell" title={run.error?.message}>
                {run.error?.code ?? ""}
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** The filter form; applying it changes the address, which reloads the list. */
function Filters(props: { query: URLSearchParams }) {
  const [values, setValues] = useState<Record<Filter, string>>(() => {
    const read = (name: Filter): string => props.query.get(name) ?? "";
    return {
      workflow: read("workflow"),
      status: read("status"),
      parent: read("parent"),
      created_after: isoToLocal(read("created_after")),
      created_before: isoToLocal(read("created_before")),
    };
  });
  const set = (name: Filter) => (e: { currentTarget: { value: string } }) =>
    setValues({ ...values, [name]: e.currentTarget.value });
  const apply = (event: SubmitEvent): void => {
    event.preventDefault();
    const params = new URLSearchParams();
    for (const name of FILTERS) {
      const raw = values[name].trim();
      const value = name.startsWith("created_") && raw !== "" ? localToIso(raw) : raw;
      if (value !== "") {
        params.set(name, value);
      }
    }
    const search = params.toString();
    navigate(search === "" ? "/" : `/?${search}`);
  };
  return (
    <form class="filters" onSubmit={apply}>
      <label>
        Workflow
        <input value={values.workflow} onInput={set("workflow")} placeholder="workflow id" />
      </label>
      <label>
        Status
        <select value={values.status} onChange={set("status")}>
          <option value="">any</option>
          {[...RUN_STATUSES, "deleted"].map((status) => (
            <option value={status}>{status}</option>
          ))}
        </select>
      </label>
      <label>
        Parent run
        <input value={values.parent} onInput={set("parent")} placeholder="run_…" />
      </label>
      <label>
        Created after
        <input type="datetime-local" value={values.created_after} onInput={set("created_after")} />
      </label>
      <label>
        Created before
        <input type="datetime-local" value={values.created_before} onInput={set("created_before")} />
      </label>
      <button type="submit">Filter</button>
    </form>
  );
}

/** A `datetime-local` value (local time) as an ISO instant. */
function localToIso(local: string): string {
  const date = new Date(local);
  return Number.isNaN(date.getTime()) ? local : date.toISOString();
}

/** An ISO instant as a `datetime-local` value in local time. */
function isoToLocal(iso: string): string {
  const date = new Date(iso);
  if (iso === "" || Number.isNaN(date.getTime())) {
    return "";
  }
  const local = new Date(date.getTime() - date.getTimezoneOffset() * 60_000);
  return local.toISOString().slice(0, 16);
}
