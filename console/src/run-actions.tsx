/**
 * What a person can do to a run: the controls its status allows (the
 * coordinator's own control table, coordinator/controls.ts, so a button is
 * shown exactly when the API would accept it), and an answer form for each
 * open gate, generated from the gate's `input_schema`.
 */
import { useState } from "preact/hooks";
import { statusAllows, RUN_CONTROLS, type RunControl } from "../../coordinator/control-statuses.ts";
import { GateView, RunView } from "../../schemas/api.ts";
import { postJson, encodeSegment } from "./api.ts";
import { SchemaForm } from "./schema-form.tsx";
import { ErrorNote, JsonBlock, StatusBadge, Time } from "./ui.tsx";

export function RunControls(props: { view: RunView; onDone: () => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<RunControl | null>(null);
  const run = async (control: RunControl): Promise<void> => {
    if (control === "cancel" && !window.confirm(`Cancel run ${props.view.run_id}?`)) {
      return;
    }
    setBusy(control);
    try {
      await postJson(RunView, `/v1/runs/${encodeSegment(props.view.run_id)}/${control}`, {});
      setError(null);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(null);
      props.onDone();
    }
  };
  const allowed = RUN_CONTROLS.filter((control) => statusAllows(control, props.view.status));
  return (
    <div class="controls">
      {allowed.map((control) => (
        <button
          key={control}
          type="button"
          class={`control control-${control}`}
          disabled={busy !== null}
          onClick={() => void run(control)}
        >
          {control}
        </button>
      ))}
      <ErrorNote error={error} />
    </div>
  );
}

export function Gates(props: { view: RunView; onDone: () => void }) {
  if (props.view.gates.length === 0) {
    return <p class="muted">No gates.</p>;
  }
  return (
    <ul class="gates">
      {props.view.gates.map((gate) => (
        <li key={gate.gate_id} class={`gate gate-${gate.status}`} data-gate={gate.gate_id}>
          <div class="gate-head">
            <strong>{gate.gate_id}</strong> <StatusBadge status={gate.status} /> {gate.kind} at {gate.node}
            {gate.item === null ? "" : `[${gate.item}]`} / {gate.step} · opened <Time at={gate.opened_at} />
          </div>
          <p class="prompt">{gate.prompt}</p>
          {gate.status === "open" ? (
            <GateForm runId={props.view.run_id} gate={gate} onDone={props.onDone} />
          ) : (
            <GateOutcome gate={gate} />
          )}
        </li>
      ))}
    </ul>
  );
}

function GateOutcome(props: { gate: GateView }) {
  const { gate } = props;
  if (gate.status === "expired") {
    return <p class="muted">Expired: {gate.reason ?? "timed out"}</p>;
  }
  return (
    <div>
      <p class="muted">
        Answered by {gate.responder ?? "someone unnamed"} at <Time at={gate.responded_at} />
      </p>
      <JsonBlock value={gate.response} />
    </div>
  );
}

function GateForm(props: { runId: string; gate: GateView; onDone: () => void }) {
  const [responder, setResponder] = useState("");
  const [error, setError] = useState<unknown>(null);
  const id = `gate-${props.gate.gate_id}`;
  const answer = async (response: unknown): Promise<void> => {
    try {
      const body = responder.trim() === "" ? { response } : { response, responder: responder.trim() };
      await postJson(
        GateView,
        `/v1/runs/${encodeSegment(props.runId)}/gates/${encodeSegment(props.gate.gate_id)}`,
        body,
      );
      setError(null);
      props.onDone();
    } catch (failure) {
      setError(failure);
    }
  };
  return (
    <>
      <SchemaForm schema={props.gate.input_schema} submitLabel="Answer" onSubmit={answer} idPrefix={id}>
        <div class="field">
          <label for={`${id}-responder`}>Responder</label>
          <input
            id={`${id}-responder`}
            value={responder}
            placeholder="optional: who answers"
            onInput={(e) => setResponder(e.currentTarget.value)}
          />
        </div>
      </SchemaForm>
      <ErrorNote error={error} />
    </>
  );
}
