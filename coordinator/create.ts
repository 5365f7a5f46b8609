import type { RunView } from "../schemas/api.ts";
import type { By } from "../schemas/auth.ts";
import type { Json } from "../schemas/common.ts";
import type { JournalBody, JournalKind } from "../schemas/journal-bodies.ts";
import type { ResourceHandle } from "../schemas/payload.ts";
import type { PlanOrigin } from "../schemas/plans.ts";
import type { RunSnapshot } from "../schemas/resolved.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import { DEFAULT_PRIORITY } from "../schemas/limits.ts";
import type { NodeRecord, PlanStepRecord, RunMode, RunRecord, RunTrigger } from "../schemas/run.ts";
import type { RunState } from "./decide.ts";

/**
 * API → coordinator: everything a new run needs, resolved before the call. Built by the
 * engine only (from a parsed start or plan body, or a parent's child start) and trusted as such.
 */
export interface CreateRunRequest {
  run_id: string;
  snapshot: RunSnapshot;
  input: Json;
  mode: RunMode;
  idempotency_key: string | null;
  /** Hash of (workflow, version, input, mode): the same key with another request is a conflict. */
  request_hash: string;
  /** Who asks: recorded on the run and in its attestation. */
  created_by: string;
  /** Who asked, for a start an outside call caused: journaled as `by` on `run.created`. */
  by?: By;
  /** How the run was started: recorded on the run and on `run.created`. */
  trigger: RunTrigger;
  /** Resources a parent hands down to this child (declared resource name → the parent's container). */
  inherited_resources?: Record<string, ResourceHandle>;
  /** Set when a parent run starts this run as its child. */
  parent?: { run_id: string; key: string; depth: number };
  /** Set for a plan run (POST /v1/plans): recorded on `run.created`; its steps go on the record. */
  plan?: { origin: PlanOrigin; steps: PlanStepRecord[] };
  /** A delayed start, at most one of the two: when the run is due (ms since the epoch)… */
  start_at?: number;
  /** …or how long after its creation (counted on the coordinator's clock, the one its timers use). */
  delay_ms?: number;
  /** Its place in the queues of limits, 0–9 (a child's is its parent's); absent: 5. */
  priority?: number;
  /** The W3C trace context the run joins (a valid `traceparent`, or absent: a trace of its own). */
  traceparent?: TraceParent;
}

/**
 * What creating a run answers: who it is and where it stands, not the whole
 * view (a wide first wave would otherwise be copied across RPC just to be
 * dropped; `get()` gives the view).
 */
export interface CreateRunOutcome {
  /** False when the run already existed (same idempotency key and request). */
  created: boolean;
  /** With the run's `output` and `error` once it has ended (a start that waited for it). */
  run: Pick<RunView, "run_id" | "status" | "workflow"> & Partial<Pick<RunView, "output" | "error">>;
}

/** A node of a new run: `pending`, never started. */
export function pendingNode(): NodeRecord {
  return {
    status: "pending",
    attempts: 0,
    started_at: null,
    finished_at: null,
    error: null,
    invocations: [],
    settled_seq: null,
    iterations: 0,
  };
}

/** A run in `drafting`, every node `pending`. */
export function newRunState(request: CreateRunRequest, now: number): RunState {
  const workflow = request.snapshot.workflow;
  const startAt = request.start_at ?? (request.delay_ms === undefined ? undefined : now + request.delay_ms);
  // The run's timeout counts from its start: a delayed run's from when it is due.
  const timeout = workflow.definition.timeout_ms;
  const deadlineAt = timeout === undefined ? null : Math.max(now, startAt ?? now) + timeout;
  const nodes: Record<string, NodeRecord> = {};
  for (const nodeId of Object.keys(workflow.definition.nodes)) {
    nodes[nodeId] = pendingNode();
  }
  return {
    record: {
      run_id: request.run_id,
      workflow: { id: workflow.id, version: workflow.version },
      status: "drafting",
      mode: request.mode,
      context: { input: request.input, state: {}, output: {} },
      error: null,
      created_at: now,
      updated_at: now,
      deadline_at: deadlineAt,
      ...(startAt === undefined ? {} : { start_at: startAt }),
      dispatch_count: 0,
      redrives: 0,
      usage: { input_tokens: 0, output_tokens: 0, cost_usd: 0 },
      gates: [],
      depth: request.parent ? request.parent.depth + 1 : 0,
      created_by: request.created_by,
      trigger: request.trigger,
      inherited_resources: request.inherited_resources ?? {},
      ...(request.plan ? { plan_steps: request.plan.steps } : {}),
      parent: request.parent ? { run_id: request.parent.run_id, key: request.parent.key, notified: false } : null,
      journal_seq: 1,
      idempotency_key: request.idempotency_key,
      request_hash: request.request_hash,
      ...(request.traceparent === undefined ? {} : { traceparent: request.traceparent }),
      // Kept only when it is not the default: a record without one is at 5.
      ...(request.priority === undefined || request.priority === DEFAULT_PRIORITY
        ? {}
        : { priority: request.priority }),
    },
    nodes,
  };
}

/** A journal entry of a kind of the table in schemas/journal-bodies.ts, before its chain link and signature. */
export interface UnsignedEntryOf<K extends JournalKind> {
  seq: number;
  kind: K;
  at: string;
  body: JournalBody<K>;
}

/** The run's first journal entry (seq 1): what was created, from which request. */
export function runCreatedEntry(
  record: RunRecord,
  request: CreateRunRequest,
  at: string,
): UnsignedEntryOf<"run.created"> {
  return {
    seq: 1,
    kind: "run.created",
    at,
    body: {
      workflow: record.workflow,
      mode: request.mode,
      input: request.input,
      idempotency_key: request.idempotency_key,
      ...(record.start_at === undefined ? {} : { start_at: new Date(record.start_at).toISOString() }),
      ...(request.plan ? { plan: request.plan.origin } : {}),
      trigger: request.trigger,
      ...(record.priority === undefined ? {} : { priority: record.priority }),
      ...(request.by === undefined ? {} : { by: request.by }),
      ...(record.traceparent === undefined ? {} : { traceparent: record.traceparent }),
    },
  };
}
