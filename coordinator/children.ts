import { z } from "zod";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { runIdFor, sha256Hex } from "../lib/ids.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import { childTraceParent } from "../telemetry/ids.ts";
import type { Result } from "../lib/result.ts";
import type { GateView } from "../schemas/api.ts";
import { JsonValue, type Json } from "../schemas/common.ts";
import { ErrorSummary, toErrorSummary } from "../schemas/errors.ts";
import { RUN_STATUS_REASONS } from "../schemas/journal-bodies.ts";
import { checkGrantsWithin, preparePlan, toPlanRecord, type PlanStart } from "../plans/index.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import type { GateRecord, RunMode } from "../schemas/run.ts";
import type { CreateRunRequest } from "./create.ts";
import type { RunEvent } from "./decide.ts";
import type { Command } from "./draft.ts";
import { MAX_WORKFLOW_DEPTH } from "./waits.ts";

/**
 * Runs talking to runs: a parent starts and cancels its children, a child
 * reports its end to its parent. Functions here take the peers they talk to
 * (`RunPeers`), not the Durable Object, so the Durable Object only applies
 * the events they return.
 */

/** Child → parent: the child ended, with its output or error and its attestation. */
export const ChildNotification = z.strictObject({
  key: z.string(),
  run_id: z.string().nullable(),
  status: z.enum(["completed", "failed", "cancelled"]),
  output: JsonValue,
  error: ErrorSummary.nullable(),
  attestation: z.strictObject({ seq: z.number().int(), hash: z.string() }).nullable(),
});
export type ChildNotification = z.infer<typeof ChildNotification>;

const iso = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : new Date(ms).toISOString();

/** A gate as the API shows it. */
export function toGateView(gate: GateRecord): GateView {
  return {
    gate_id: gate.gate_id,
    kind: gate.kind,
    node: gate.node,
    item: gate.item,
    step: gate.step,
    prompt: gate.prompt,
    input_schema: gate.input_schema,
    status: gate.status,
    opened_at: new Date(gate.opened_at).toISOString(),
    expires_at: iso(gate.expires_at),
    ...(gate.response === undefined ? {} : { response: gate.response }),
    ...(gate.responder === undefined ? {} : { responder: gate.responder }),
    ...(gate.answered_by === undefined ? {} : { answered_by: gate.answered_by }),
    ...(gate.responded_at === undefined ? {} : { responded_at: iso(gate.responded_at) }),
    ...(gate.reason === undefined ? {} : { reason: gate.reason }),
    ...(gate.approvers === undefined ? {} : { approvers: gate.approvers }),
  };
}

/** Another run, as a run sees it. */
export interface RunPeer {
  create(request: unknown): Promise<Result<unknown>>;
  cancel(reason?: string): Promise<Result<unknown>>;
  childFinished(notification: unknown): Promise<Result<{ accepted: boolean }>>;
}

/** What child-run bookkeeping needs from the platform: the catalog, other runs, the deployment's plan setting. */
export interface RunPeers {
  catalog(): {
    resolveRun(workflowId: string, version?: number): Promise<Result<RunSnapshot>>;
    resolvePlan(workflow: unknown): Promise<Result<RunSnapshot>>;
  };
  run(runId: string): RunPeer;
  /** `PLAN_PREAPPROVAL` is `allow`: a `plan` step's `approved_steps` may turn gates off. */
  planPreapproval: boolean;
}

type StartChild = Extract<Command, { kind: "start_child" }>;

/** What a child run is created from: its snapshot, its mode, and for a plan what its record keeps. */
interface ChildStart {
  snapshot: RunSnapshot;
  mode: RunMode;
  plan?: CreateRunRequest["plan"];
}

/**
 * Resolves and creates a child run (idempotently: its id derives from the
 * key), and returns the event that records the outcome: `child_started`, or
 * `child_finished` as failed when it could not start.
 */
export async function startChildRun(
  peers: RunPeers,
  parent: { runId: string; traceparent: TraceParent | null },
  command: StartChild,
): Promise<RunEvent> {
  const parentRunId = parent.runId;
  const failed = (error: ErrorSummary): RunEvent => ({
    type: "child_finished",
    outcome: {
      key: command.key,
      run_id: null,
      status: "failed",
      output: null,
      error: toErrorSummary(error),
      attestation: null,
    },
  });
  if (command.depth > MAX_WORKFLOW_DEPTH) {
    return failed({
      code: "workflow.depth_exceeded",
      message: `sub-workflows may nest at most ${MAX_WORKFLOW_DEPTH} deep; this child would be at depth ${command.depth}`,
    });
  }
  try {
    const childRunId = await runIdFor(command.key);
    const start = command.plan ? await planChild(peers, command.plan) : await workflowChild(peers, command.workflow);
    if (!start.ok) {
      return failed(start.error);
    }
    const created = await peers.run(childRunId).create({
      run_id: childRunId,
      snapshot: start.value.snapshot,
      input: command.input,
      mode: start.value.mode,
      idempotency_key: command.key,
      request_hash: await sha256Hex(command.key),
      parent: { run_id: parentRunId, key: command.key, depth: command.depth - 1 },
      created_by: `run:${parentRunId}`,
      trigger: { kind: "parent", run_id: parentRunId, key: command.key },
      ...(command.resources ? { inherited_resources: command.resources } : {}),
      ...(start.value.plan ? { plan: start.value.plan } : {}),
      ...(command.priority === undefined ? {} : { priority: command.priority }),
      // The child's run span nests under the parent's span for it (telemetry/ids.ts).
      traceparent: await childTraceParent(parentRunId, parent.traceparent, childRunId),
    } satisfies CreateRunRequest);
    return created.ok ? { type: "child_started", key: command.key, run_id: childRunId } : failed(created.error);
  } catch (error) {
    // Infrastructure trouble: the child may or may not exist; report it as failed to start.
    return failed({ code: "workflow.child_start_failed", message: ensureEngineError(error).message });
  }
}

/** A workflow step's or node's child: the pinned `id@version`, resolved (through the snapshot caches). */
async function workflowChild(peers: RunPeers, workflow: string): Promise<Result<ChildStart>> {
  const [workflowId = "", version] = workflow.split("@");
  const snapshot = await peers.catalog().resolveRun(workflowId, version === undefined ? undefined : Number(version));
  return snapshot.ok ? { ok: true, value: { snapshot: snapshot.value, mode: "auto" } } : snapshot;
}

/**
 * A `plan` step's child, as `POST /v1/plans` would start its plan (plans/start.ts),
 * once its grants are found on the parent's allowlist. A refusal (`plan.tool_not_allowed`,
 * `plan.invalid`, `plan.preapproval_disabled`, …) is the step's failure, each
 * problem's path in its message; a platform failure still throws.
 */
async function planChild(peers: RunPeers, plan: NonNullable<StartChild["plan"]>): Promise<Result<ChildStart>> {
  const start: PlanStart = {
    given: plan.given,
    tools: plan.tools,
    input: {},
    approvedSteps: plan.approved_steps ?? [],
  };
  try {
    checkGrantsWithin(plan.tools, plan.parent_tools);
    const prepared = await preparePlan(start, {
      resolvePlan: (workflow) => peers.catalog().resolvePlan(workflow),
      preapprovalAllowed: peers.planPreapproval,
    });
    const record = await toPlanRecord(start, prepared);
    return { ok: true, value: { snapshot: prepared.snapshot, mode: plan.mode ?? "auto", plan: record } };
  } catch (thrown) {
    if (!(thrown instanceof EngineError)) {
      throw thrown;
    }
    const details = thrown.details?.map((detail) => `${detail.path}: ${detail.message}`).join("; ");
    const message = details ? `${thrown.message} (${details})` : thrown.message;
    return { ok: false, error: { code: thrown.code, message, retryable: false } };
  }
}

/**
 * Answers from a child that confirm a cancel: it had ended already
 * (`run.terminal`; cancel is idempotent), or it does not exist (`run.not_found`:
 * its start never landed, and the parent never asks for it again).
 */
const CANCEL_CONFIRMING_CODES = new Set(["run.terminal", "run.not_found"]);

/** Cancels child runs by start key; returns the keys whose child confirmed (the others are tried again). */
export async function cancelChildRuns(peers: RunPeers, keys: readonly string[]): Promise<string[]> {
  const confirmed = await Promise.all(
    keys.map(async (key) => {
      const result = await peers
        .run(await runIdFor(key))
        .cancel(RUN_STATUS_REASONS.parentEnded)
        .catch((error: unknown) => ({ ok: false, error: ensureEngineError(error).toData() }) as const);
      if (result.ok || CANCEL_CONFIRMING_CODES.has(result.error.code)) {
        return key;
      }
      console.error(
        JSON.stringify({ msg: "cancelling a child failed; a wake tries again", key, error: result.error.message }),
      );
      return null;
    }),
  );
  return confirmed.filter((key): key is string => key !== null);
}

/** Tells the parent this child ended; true once the parent acknowledged (else an alarm retries). */
export async function notifyParentRun(
  peers: RunPeers,
  childRunId: string | null,
  command: {
    parent_run_id: string;
    key: string;
    status: "completed" | "failed" | "cancelled";
    output: Json;
    error: ErrorSummary | null;
  },
  attestation: { seq: number; hash: string } | null,
): Promise<boolean> {
  try {
    const acknowledged = await peers.run(command.parent_run_id).childFinished({
      key: command.key,
      run_id: childRunId,
      status: command.status,
      output: command.output,
      error: command.error,
      attestation,
    });
    return acknowledged.ok;
  } catch (error) {
    console.error(
      JSON.stringify({
        msg: "notifying the parent failed; the alarm will retry",
        parent: command.parent_run_id,
        error: ensureEngineError(error).message,
      }),
    );
    return false;
  }
}
