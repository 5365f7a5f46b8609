/**
 * `/limits`: every limit (`GET /v1/limits`), each with its budgets as its
 * definition writes them and its status for the key `""`
 * (`GET /v1/limits/{id}/status?key=`): the slots in use against its
 * concurrency, the holders waiting, each window's use against its budget and
 * when it resets, and until when grants are paused. A key box per limit looks
 * up another key's status; the looked-up key is kept in the query string
 * (`?limit=api-quota&key=acme`), which is where a run's limit wait links to.
 * Fetched again every few seconds. Nothing here is a control: any reader sees it.
 */
import { useEffect, useRef, useState } from "preact/hooks";
import { budgetsText, inUseText, keyText, LimitBudgets, windowsOf, windowText } from "../../lib/limit-text.ts";
import { DefinitionList, DefinitionRecord, type DefinitionSummary } from "../../schemas/api.ts";
import { LimitStatus } from "../../schemas/limits.ts";
import { apiJson, encodeSegment } from "./api.ts";
import { useLoad, useNow } from "./hooks.ts";
import { Link, navigate } from "./router.tsx";
import { limitHref } from "./routes.ts";
import { ErrorNote, Section, Time } from "./ui.tsx";
import { formatCountdown } from "./waits.ts";

/** How often the limits' statuses are fetched again while the tab is visible. */
export const LIMITS_REFRESH_MS = 3_000;

/** One limit as the page shows it: its budgets, and its status for each key shown. */
interface LimitCard {
  summary: DefinitionSummary;
  budgets: LimitBudgets | null;
  statuses: LimitStatus[];
  error: unknown;
}

const limitPath = (id: string): string => `/v1/limits/${encodeSegment(id)}`;
const statusPath = (id: string, key: string): string =>
  `${limitPath(id)}/status?${new URLSearchParams({ key }).toString()}`;

/**
 * Every limit with its status for `""` and, for the limit `selected` names,
 * for its key too. A definition version never changes, so its budgets are
 * read once (`cache`); a limit whose reads fail keeps its card, with the error.
 */
async function loadLimits(
  selected: { limit: string; key: string } | null,
  cache: Map<string, LimitBudgets>,
): Promise<LimitCard[]> {
  const list = await apiJson(DefinitionList, "/v1/limits?limit=100");
  return Promise.all(
    list.definitions.map(async (summary): Promise<LimitCard> => {
      const keys =
        selected !== null && selected.limit === summary.id && selected.key !== "" ? ["", selected.key] : [""];
      try {
        const [budgets, statuses] = await Promise.all([
          budgetsOf(summary, cache),
          Promise.all(keys.map((key) => apiJson(LimitStatus, statusPath(summary.id, key)))),
        ]);
        return { summary, budgets, statuses, error: null };
      } catch (error) {
        return { summary, budgets: cache.get(`${summary.id}@${summary.version}`) ?? null, statuses: [], error };
      }
    }),
  );
}

async function budgetsOf(summary: DefinitionSummary, cache: Map<string, LimitBudgets>): Promise<LimitBudgets> {
  const pinned = `${summary.id}@${summary.version}`;
  const known = cache.get(pinned);
  if (known !== undefined) {
    return known;
  }
  const record = await apiJson(DefinitionRecord, `${limitPath(summary.id)}/versions/${summary.version}`);
  const budgets = LimitBudgets.parse(record.definition);
  cache.set(pinned, budgets);
  return budgets;
}

export function LimitsPage(props: { query: URLSearchParams }) {
  const limit = props.query.get("limit");
  const selected = limit === null ? null : { limit, key: props.query.get("key") ?? "" };
  const cache = useRef(new Map<string, LimitBudgets>());
  const loaded = useLoad(() => loadLimits(selected, cache.current), [props.query.toString()], LIMITS_REFRESH_MS);
  const cards = loaded.data ?? [];
  const now = useNow(cards.some((card) => card.statuses.some(isCounting)));
  useScrollTo(loaded.data === undefined ? null : limit);
  return (
    <Section title="Limits">
      <ErrorNote error={loaded.error} />
      {loaded.data === undefined && loaded.error === null ? <p class="muted">Loading…</p> : null}
      {loaded.data !== undefined && cards.length === 0 ? <p class="muted">No limits.</p> : null}
      <ul class="limits">
        {cards.map((card) => (
          <LimitCardView
            key={card.summary.id}
            card={card}
            selectedKey={selected?.limit === card.summary.id ? selected.key : null}
            now={now}
          />
        ))}
      </ul>
    </Section>
  );
}

/** Whether a status has a time to count down to: a window's reset or the end of a pause. */
const isCounting = (status: LimitStatus): boolean =>
  status.window.resets_at !== null || (status.rate_window?.resets_at ?? null) !== null || status.paused_until !== null;

/** Brings the card of the limit a link named into view, once it is drawn. */
function useScrollTo(limit: string | null): void {
  const done = useRef(false);
  useEffect(() => {
    if (limit !== null && !done.current) {
      done.current = true;
      document.getElementById(cardId(limit))?.scrollIntoView({ block: "start" });
    }
  }, [limit]);
}

const cardId = (limit: string): string => `limit-${limit}`;

function LimitCardView(props: { card: LimitCard; selectedKey: string | null; now: number }) {
  const { summary, budgets, statuses } = props.card;
  return (
    <li class={props.selectedKey === null ? "limit" : "limit selected"} id={cardId(summary.id)} data-limit={summary.id}>
      <header class="limit-head">
        <span class="mono limit-id">
          {summary.id}@{summary.version}
        </span>
        <span class="limit-budgets" data-budgets>
          {budgets === null ? "" : budgetsText(budgets)}
        </span>
      </header>
      {summary.description === undefined ? null : <p class="muted limit-description">{summary.description}</p>}
      <ErrorNote error={props.card.error} />
      {budgets === null || statuses.length === 0 ? null : (
        <div class="table-scroll">
          <StatusTable id={summary.id} budgets={budgets} statuses={statuses} now={props.now} />
        </div>
      )}
      <KeyBox id={summary.id} selectedKey={props.selectedKey} />
    </li>
  );
}

function StatusTable(props: { id: string; budgets: LimitBudgets; statuses: LimitStatus[]; now: number }) {
  return (
    <table class="limit-status" aria-label={`Status of ${props.id} by key`}>
      <thead>
        <tr>
          <th>key</th>
          <th>in use</th>
          <th>waiting</th>
          <th>window used</th>
          <th>resets</th>
          <th>paused until</th>
        </tr>
      </thead>
      <tbody>
        {props.statuses.map((status) => {
          const windows = windowsOf(status, props.budgets);
          return (
            <tr key={status.key} data-key={status.key}>
              <td class="mono">{keyText(status.key)}</td>
              <td data-in-use>{inUseText(status, props.budgets)}</td>
              <td data-waiting>{status.waiting}</td>
              <td data-window>
                {windows.length === 0 ? <span class="muted">–</span> : null}
                {windows.map((window) => (
                  <div key={window.name}>{windowText(window)}</div>
                ))}
              </td>
              <td data-resets>
                {windows.length === 0 ? <span class="muted">–</span> : null}
                {windows.map((window) => (
                  <div key={window.name}>
                    <Due at={window.resets_at} now={props.now} />
                  </div>
                ))}
              </td>
              <td data-paused>
                <Due at={status.paused_until} now={props.now} />
              </td>
            </tr>
          );
        })}
      </tbody>
    </table>
  );
}

/** A time to come, with how far off it is: `in 42s (at …)`; a dash for none. */
function Due(props: { at: string | null; now: number }) {
  if (props.at === null) {
    return <span class="muted">–</span>;
  }
  const left = formatCountdown(Date.parse(props.at) - props.now);
  return (
    <span>
      {left === null ? "now" : `in ${left}`}{" "}
      <span class="muted">
        (<Time at={props.at} />)
      </span>
    </span>
  );
}

/** Looks up one key's status of the limit: the key goes in the address, so the view can be linked and reloaded. */
function KeyBox(props: { id: string; selectedKey: string | null }) {
  const [value, setValue] = useState(props.selectedKey ?? "");
  const inputId = `limit-key-${props.id}`;
  return (
    <form
      class="limit-key"
      role="search"
      onSubmit={(event) => {
        event.preventDefault();
        navigate(limitHref(props.id, value));
      }}
    >
      <label for={inputId}>Key</label>
      <input
        id={inputId}
        class="mono"
        value={value}
        placeholder="another key"
        autocomplete="off"
        onInput={(event) => setValue(event.currentTarget.value)}
      />
      <button type="submit">Show status</button>
      {props.selectedKey === null || props.selectedKey === "" ? null : <Link href="/limits">clear</Link>}
    </form>
  );
}
