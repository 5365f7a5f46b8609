/**
 * What a person can do to a run: the controls the run accepts now (the run
 * view's `controls`, which the coordinator computes from its control table,
 * coordinator/controls.ts, guards included, so a button is shown exactly when
 * the API would accept it), and the run's gates, each answerable while open.
 * A cancel asks for an optional reason and a confirmation first. Only the
 * controls the signed-in principal's roles allow are shown (a reader sees
 * none).
 */
import { useState } from "preact/hooks";
import type { RunControl } from "../../coordinator/control-statuses.ts";
import { RunView } from "../../schemas/api.ts";
import { encodeSegment, postJson } from "./api.ts";
import { GateCard } from "./gate-card.tsx";
import { useMayAny } from "./principal.tsx";
import { stepName, type PlanStep } from "./plan-graph.ts";
import { ErrorNote } from "./ui.tsx";
import { gateAnchor } from "./waits.ts";

export function RunControls(props: { view: RunView; onDone: () => void }) {
  const [error, setError] = useState<unknown>(null);
  const [busy, setBusy] = useState<RunControl | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const may = useMayAny();
  const controls = props.view.controls.filter((control) => may(`${control}Run`));
  const run = async (control: RunControl, body: object = {}): Promise<void> => {
    setBusy(control);
    try {
      await postJson(RunView, `/v1/runs/${encodeSegment(props.view.run_id)}/${control}`, body);
      setError(null);
      setCancelling(false);
    } catch (failure) {
      setError(failure);
    } finally {
      setBusy(null);
      props.onDone();
    }
  };
  return (
    <div class="controls">
      {controls.map((control) => (
        <button
          key={control}
          type="button"
          class={`control control-${control}`}
          disabled={busy !== null || (control === "cancel" && cancelling)}
          onClick={() => (control === "cancel" ? setCancelling(true) : void run(control))}
        >
          {control}
        </button>
      ))}
      {cancelling && controls.includes("cancel") ? (
        <CancelForm
          busy={busy !== null}
          onConfirm={(reason) => void run("cancel", reason === "" ? {} : { reason })}
          onKeep={() => setCancelling(false)}
        />
      ) : null}
      <ErrorNote error={error} />
    </div>
  );
}

function CancelForm(props: { busy: boolean; onConfirm: (reason: string) => void; onKeep: () => void }) {
  const [reason, setReason] = useState("");
  return (
    <form
      class="cancel-form"
      onSubmit={(event) => {
        event.preventDefault();
        props.onConfirm(reason.trim());
      }}
    >
      <label for="cancel-reason">Reason</label>
      <input
        id="cancel-reason"
        value={reason}
        placeholder="optional: why"
        onInput={(e) => setReason(e.currentTarget.value)}
      />
      <button type="submit" class="danger" disabled={props.busy}>
        Confirm cancel
      </button>
      <button type="button" onClick={props.onKeep} disabled={props.busy}>
        Keep running
      </button>
    </form>
  );
}

export function Gates(props: { view: RunView; plan: readonly PlanStep[] | null; onDone: () => void }) {
  if (props.view.gates.length === 0) {
    return <p class="muted">No gates.</p>;
  }
  return (
    <ul class="gates">
      {props.view.gates.map((gate) => (
        <GateCard
          key={gate.gate_id}
          runId={props.view.run_id}
          gate={gate}
          stepLabel={stepName(gate.step, gate.node, props.plan)}
          onDone={props.onDone}
          anchor={gateAnchor(gate.gate_id)}
        />
      ))}
    </ul>
  );
}
