import { z } from "zod";
import { EngineError } from "../lib/errors.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { By } from "../schemas/auth.ts";
import type { GateRecord, RunRecord } from "../schemas/run.ts";
import type { Draft } from "./draft.ts";
import type { RunEvent } from "./events.ts";
import { withBy } from "./controls.ts";
import { isTerminal } from "./lifecycle.ts";
import { answerGate } from "./wait-gates.ts";

/**
 * Standing approvals of plan steps (docs/plans.md, "Approvals"): `approved_steps`
 * on `POST /v1/runs/{id}/approve` answers the matching approval gates that are
 * open, and is kept on the run so each matching gate that opens later (a step
 * not reached yet, an expanded step's children) is granted as it opens. A step
 * id matches its node's gates and, for an expanded step, every child's
 * (`step-02` matches `step-02-0`, `step-02-1`, …; `step-02-1` only that child).
 */
/** The most approved steps a run keeps, over every approve call. */
export const MAX_APPROVED_STEPS = 1_000;

export const StepApproval = z.strictObject({
  steps: z.array(z.string().min(1).max(60)).min(1).max(500),
  responder: z.string().min(1).max(256).nullable(),
  /** Who approved (journaled as `by` on the approvals it grants now). */
  by: By.optional(),
});

/** The event that records a standing approval; refused (409) on an ended run. */
export function toStepApproval(record: RunRecord, body: unknown): RunEvent {
  if (isTerminal(record.status)) {
    throw EngineError.terminal("run.terminal", `the run is ${record.status}: there is nothing left to approve`);
  }
  const approval = parseOrThrow(StepApproval, body, "run.invalid_request", "the approval of steps");
  // Bounded over calls too: each call adds at most 500 steps, the run keeps at most MAX_APPROVED_STEPS.
  if (new Set([...(record.approved_steps ?? []), ...approval.steps]).size > MAX_APPROVED_STEPS) {
    throw EngineError.terminal(
      "run.invalid_request",
      `a run keeps at most ${MAX_APPROVED_STEPS} approved steps; approve the base step (step-02) rather than each child`,
    );
  }
  return { type: "approve_steps", steps: approval.steps, responder: approval.responder, ...withBy(approval.by) };
}

/** Keeps the steps approved and grants every open approval gate they match. */
export function approveSteps(draft: Draft, steps: readonly string[], responder: string | null, by?: By): void {
  draft.record.approved_steps = [...new Set([...(draft.record.approved_steps ?? []), ...steps])];
  for (const gate of draft.record.gates) {
    grantIfApproved(draft, gate, responder, by);
  }
}

/** Grants the open approval gates a standing approval covers: called when a task result may have opened one. */
export function grantApprovedGates(draft: Draft): void {
  if (draft.record.approved_steps !== undefined) {
    for (const gate of draft.record.gates) {
      grantIfApproved(draft, gate, "approved_steps");
    }
  }
}

function grantIfApproved(draft: Draft, gate: GateRecord, responder: string | null, by?: By): void {
  const approved = draft.record.approved_steps ?? [];
  const child = gate.item === null ? null : `${gate.node}-${gate.item}`;
  // A gate that declares approvers waits for one of them: a standing approval names no one to check.
  const open = gate.status === "open" && gate.kind === "approval" && gate.approvers === undefined;
  if (open && approved.some((id) => id === gate.node || id === child)) {
    answerGate(draft, gate.gate_id, { approved: true, reason: "approved_steps" }, responder, by);
  }
}
