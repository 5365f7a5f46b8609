/**
 * One gate, on the run page and on the "Waiting for me" page: where it waits,
 * its prompt, and for an open gate the way to answer it. An approval gate has
 * an Approve and a Reject button; Reject first asks for a reason and a
 * confirmation, and only then sends `{ approved: false, reason }`. An input
 * gate has a form generated from its `input_schema`. A gate that declares
 * approvers says who may answer; an answered one says who did (the
 * authenticated `answered_by`), and the answerer's note apart from it. An
 * open gate the signed-in principal may not answer (no approver role, or not
 * one of the gate's approvers) shows no buttons and no form.
 */
import type { ComponentChildren } from "preact";
import { useState } from "preact/hooks";
import { GateView } from "../../schemas/api.ts";
import { encodeSegment, postJson } from "./api.ts";
import { useMayAnswer } from "./principal.tsx";
import { SchemaForm } from "./schema-form.tsx";
import { ErrorNote, JsonBlock, StatusBadge, Time } from "./ui.tsx";

export interface GateCardProps {
  runId: string;
  gate: GateView;
  /** How the gate's step is named (a plan run's step by its plan step). */
  stepLabel: string;
  onDone: () => void;
  /** Shown in the head, after where the gate waits (e.g. the run it belongs to). */
  context?: ComponentChildren;
  /** The card's element id, for links to it (gate ids are unique only within a run). */
  anchor?: string;
}

export function GateCard(props: GateCardProps) {
  const { gate } = props;
  const answerable = useMayAnswer(gate);
  return (
    <li id={props.anchor} class={`gate gate-${gate.status}`} data-gate={gate.gate_id} data-run={props.runId}>
      <div class="gate-head">
        <strong>{gate.gate_id}</strong> <StatusBadge status={gate.status} /> {gate.kind} at {gate.node}
        {gate.item === null ? "" : `[${gate.item}]`} / {props.stepLabel} · opened <Time at={gate.opened_at} />
        {props.context}
      </div>
      <p class="prompt">{gate.prompt}</p>
      {gate.approvers === undefined ? null : <p class="muted">May answer: {approversText(gate.approvers)}</p>}
      {gate.status !== "open" ? (
        <GateOutcome gate={gate} />
      ) : !answerable ? (
        <p class="muted not-answerable">You may not answer this gate.</p>
      ) : gate.kind === "approval" ? (
        <ApprovalForm runId={props.runId} gate={gate} onDone={props.onDone} />
      ) : (
        <InputForm runId={props.runId} gate={gate} onDone={props.onDone} />
      )}
    </li>
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
        Answered by {gate.answered_by === undefined ? "an unrecorded caller" : byText(gate.answered_by)} at{" "}
        <Time at={gate.responded_at} />
        {gate.responder ? ` · Note: ${gate.responder}` : ""}
      </p>
      <JsonBlock value={gate.response} />
    </div>
  );
}

/** Who answered, in words: a token by name and id, an Access email, or an approval link's approver. */
function byText(by: NonNullable<GateView["answered_by"]>): string {
  if ("token_id" in by) {
    return `token ${by.name} (${by.token_id})`;
  }
  return "email" in by ? by.email : `${by.approver} (approval link ${by.link})`;
}

/** Who may answer, in words: `roles approver; emails ops@example.com`. */
function approversText(approvers: NonNullable<GateView["approvers"]>): string {
  return [
    approvers.roles ? `roles ${approvers.roles.join(", ")}` : null,
    approvers.tokens ? `tokens ${approvers.tokens.join(", ")}` : null,
    approvers.emails ? `emails ${approvers.emails.join(", ")}` : null,
  ]
    .filter((part) => part !== null)
    .join("; ");
}

/** Sends an answer to the gate; resolves to the error, or null once answered. */
async function sendAnswer(runId: string, gate: GateView, response: unknown, responder: string): Promise<unknown> {
  try {
    const who = responder.trim();
    await postJson(GateView, `/v1/runs/${encodeSegment(runId)}/gates/${encodeSegment(gate.gate_id)}`, {
      response,
      ...(who === "" ? {} : { responder: who }),
    });
    return null;
  } catch (failure) {
    return failure ?? new Error("the answer failed");
  }
}

function ResponderField(props: { id: string; value: string; onInput: (value: string) => void }) {
  return (
    <div class="field">
      <label for={props.id}>Responder</label>
      <input
        id={props.id}
        value={props.value}
        placeholder="optional: a note kept with the answer, not who you are"
        onInput={(e) => props.onInput(e.currentTarget.value)}
      />
    </div>
  );
}

function InputForm(props: { runId: string; gate: GateView; onDone: () => void }) {
  const [responder, setResponder] = useState("");
  const [error, setError] = useState<unknown>(null);
  const id = `gate-${props.runId}-${props.gate.gate_id}`;
  const answer = async (response: unknown): Promise<void> => {
    const failure = await sendAnswer(props.runId, props.gate, response, responder);
    setError(failure);
    if (failure === null) {
      props.onDone();
    }
  };
  return (
    <>
      <SchemaForm schema={props.gate.input_schema} submitLabel="Answer" onSubmit={answer} idPrefix={id}>
        <ResponderField id={`${id}-responder`} value={responder} onInput={setResponder} />
      </SchemaForm>
      <ErrorNote error={error} />
    </>
  );
}

/** Approve in one click; reject only after a reason and a confirmation. */
function ApprovalForm(props: { runId: string; gate: GateView; onDone: () => void }) {
  const [responder, setResponder] = useState("");
  const [rejecting, setRejecting] = useState(false);
  const [reason, setReason] = useState("");
  const [busy, setBusy] = useState(false);
  const [error, setError] = useState<unknown>(null);
  const id = `gate-${props.runId}-${props.gate.gate_id}`;
  const send = async (response: { approved: boolean; reason?: string }): Promise<void> => {
    setBusy(true);
    const failure = await sendAnswer(props.runId, props.gate, response, responder);
    setBusy(false);
    setError(failure);
    if (failure === null) {
      props.onDone();
    }
  };
  const confirmReject = (event: SubmitEvent): void => {
    event.preventDefault();
    if (reason.trim() !== "") {
      void send({ approved: false, reason: reason.trim() });
    }
  };
  return (
    <div class="approval">
      <ResponderField id={`${id}-responder`} value={responder} onInput={setResponder} />
      {rejecting ? (
        <form class="reject-form" onSubmit={confirmReject}>
          <label for={`${id}-reason`}>Reason for rejecting</label>
          <textarea
            id={`${id}-reason`}
            rows={2}
            required
            value={reason}
            onInput={(e) => setReason(e.currentTarget.value)}
          />
          <p class="muted">Rejecting fails step {props.gate.step}; the run fails unless the step continues.</p>
          <div class="buttons">
            <button type="submit" class="danger" disabled={busy || reason.trim() === ""}>
              Confirm rejection
            </button>
            <button type="button" onClick={() => setRejecting(false)} disabled={busy}>
              Keep it open
            </button>
          </div>
        </form>
      ) : (
        <div class="buttons">
          <button type="button" class="approve" disabled={busy} onClick={() => void send({ approved: true })}>
            Approve
          </button>
          <button type="button" class="reject" disabled={busy} onClick={() => setRejecting(true)}>
            Reject
          </button>
        </div>
      )}
      <ErrorNote error={error} />
    </div>
  );
}
