/**
 * The form under an event wait in the "Waiting for" box: sends a signal to
 * this run (`POST /v1/runs/{run_id}/signals`, docs/api.md) with one of the
 * wait's names, its data as JSON (checked here first: nothing is sent until it
 * parses) and an optional id. It says what became of the signal (accepted, or
 * a duplicate of an id the run took before) or the API's error, then has the
 * page read the run again. A signal whose data the wait's `match` refuses is
 * kept by the run, and the wait goes on waiting.
 */
import { useState } from "preact/hooks";
import { SendEventsResponse, type AcceptedEvent } from "../../schemas/events.ts";
import { encodeSegment, postJson } from "./api.ts";
import { ErrorNote } from "./ui.tsx";
import { signalAnswerText, toSignalBody } from "./waits.ts";

export interface SignalFormProps {
  runId: string;
  /** The wait's names: a select offers them when there are several. */
  names: readonly string[];
  /** Prefix of the fields' ids, unique on the page. */
  idPrefix: string;
  onDone: () => void;
}

export function SignalForm(props: SignalFormProps) {
  const [name, setName] = useState(props.names[0] ?? "");
  const [data, setData] = useState("");
  const [id, setId] = useState("");
  const [dataError, setDataError] = useState<string | null>(null);
  const [answer, setAnswer] = useState<AcceptedEvent | null>(null);
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState(false);
  const send = async (event: SubmitEvent): Promise<void> => {
    event.preventDefault();
    const body = toSignalBody(name, data, id);
    setDataError(body.ok ? null : body.error);
    setAnswer(null);
    setError(null);
    if (!body.ok) {
      return;
    }
    setBusy(true);
    try {
      const sent = await postJson(SendEventsResponse, `/v1/runs/${encodeSegment(props.runId)}/signals`, body.body);
      setAnswer(sent.events[0] ?? null);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(false);
      props.onDone();
    }
  };
  return (
    <form class="signal-form" data-signal-form onSubmit={(event) => void send(event)}>
      <NameField id={`${props.idPrefix}-name`} names={props.names} value={name} onChange={setName} />
      <DataField id={`${props.idPrefix}-data`} value={data} error={dataError} onInput={setData} />
      <div class="field">
        <label for={`${props.idPrefix}-id`}>Id</label>
        <input
          id={`${props.idPrefix}-id`}
          value={id}
          placeholder="optional: the run accepts an id once"
          onInput={(e) => setId(e.currentTarget.value)}
        />
      </div>
      <div class="buttons">
        <button type="submit" disabled={busy}>
          Send signal
        </button>
        {answer === null ? null : (
          <span class={`signal-answer${answer.duplicate ? " duplicate" : ""}`} role="status" data-signal-answer>
            {signalAnswerText(answer)}
          </span>
        )}
      </div>
      <ErrorNote error={error} />
    </form>
  );
}

/** The data textarea, and under it why its text was refused. */
function DataField(props: { id: string; value: string; error: string | null; onInput: (text: string) => void }) {
  const errorId = `${props.id}-error`;
  return (
    <div class="field">
      <label for={props.id}>Data (JSON)</label>
      <textarea
        id={props.id}
        rows={3}
        value={props.value}
        placeholder='optional, e.g. {"ticket_id": 7}'
        aria-invalid={props.error !== null}
        aria-describedby={props.error === null ? undefined : errorId}
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
      {props.error === null ? null : (
        <p id={errorId} class="error" role="alert" data-signal-data-error>
          {props.error}
        </p>
      )}
    </div>
  );
}

/** The signal's name: the wait's only name as text, or a select of its names. */
function NameField(props: { id: string; names: readonly string[]; value: string; onChange: (name: string) => void }) {
  if (props.names.length < 2) {
    return (
      <p class="signal-name">
        Name <span class="mono">{props.value}</span>
      </p>
    );
  }
  return (
    <div class="field">
      <label for={props.id}>Name</label>
      <select id={props.id} value={props.value} onChange={(e) => props.onChange(e.currentTarget.value)}>
        {props.names.map((name) => (
          <option key={name} value={name}>
            {name}
          </option>
        ))}
      </select>
    </div>
  );
}
