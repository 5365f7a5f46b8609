/**
 * The typed client of Trellis over Workers RPC, for other Workers.
 *
 * Bind the `TrellisApi` entrypoint with a service binding and give the
 * binding this module's {@link TrellisApi} type (docs/api.md, "Workers RPC"):
 *
 * ```ts
 * import type { TrellisApi } from "trellis/client";
 * interface Env { TRELLIS: TrellisApi }
 * ```
 *
 * Every type here is plain TypeScript (client/types.ts is generated from the
 * zod schemas and checked against them), so a caller's `tsc` needs neither zod
 * nor Trellis's sources. Use the interface as the binding's type, not inside
 * `Service<…>`: workers-types' RPC mapping recurses through the recursive
 * `Json` type and fails with TS2589 ("excessively deep"), over the
 * implementation class and over these plain types alike.
 */
import type {
  BackfillAnswer,
  BackfillBody,
  DefinitionBundle,
  DefinitionList,
  DefinitionRecord,
  DefinitionVersions,
  DeletedRun,
  EventTriggers,
  GateAnswerBody,
  GateList,
  GateView,
  JournalEntry,
  JournalResponse,
  Jwks,
  LimitStatus,
  OpenGateList,
  RegisterResponse,
  RunList,
  RunView,
  PlanRequest,
  ScheduleStatus,
  SlotRecord,
  SendEventsBody,
  SendEventsResponse,
  StartPlanResponse,
  StartRunBody,
  StartRunResponse,
} from "./types.ts";

export type * from "./types.ts";

/** What a start may be asked besides its request (`startRun`, `startPlan`). */
export interface StartRunOptions {
  /** Wait up to this long (ms, ≤ 60,000) for the run to end before answering: the HTTP route's `Prefer: wait`. */
  wait_ms?: number;
}

/** An error as data: what every method returns instead of throwing (thrown errors lose their code across RPC). */
export interface ErrorData {
  /** A dotted code to branch on, as in the HTTP API: `run.not_found`, `definition.invalid`, … */
  code: string;
  message: string;
  /** Whether trying again may help. */
  retryable: boolean;
  /** The least delay before a retry that the failing service asked for. */
  retry_after_ms?: number;
  /** The problems of a rejected input, one per place (`path` dotted from the argument's root). */
  details?: { path: string; message: string; code?: string }[];
}

/** What every method resolves to: a value, or an error as data. */
export type Result<T> = { ok: true; value: T } | { ok: false; error: ErrorData };

/** A definition kind as `getDefinition` takes it (`_` may be written `-`). */
export type DefinitionKindName =
  | "workflows"
  | "tasks"
  | "actions"
  | "prompts"
  | "models"
  | "mcp_servers"
  | "mcp-servers"
  | "schedules"
  | "webhooks"
  | "limits";

/**
 * The `TrellisApi` entrypoint (src/rpc.ts) as a caller sees it: each method is
 * the HTTP route of the same name (docs/api.md), with no bearer token: holding
 * the binding is the authorization.
 */
export interface TrellisApi {
  /** `POST /v1/definitions`. */
  registerDefinitions(bundle: DefinitionBundle): Promise<Result<RegisterResponse>>;
  /** `GET /v1/{kind}/{id}`, or one version. */
  getDefinition(kind: DefinitionKindName, id: string, version?: number): Promise<Result<DefinitionRecord>>;
  /** `GET /v1/{kind}`: the latest version of each definition, newest first. */
  listDefinitions(
    kind: DefinitionKindName,
    page?: { limit?: number; cursor?: string },
  ): Promise<Result<DefinitionList>>;
  /** `GET /v1/{kind}/{id}/versions`: every version, highest first. */
  listVersions(
    kind: DefinitionKindName,
    id: string,
    page?: { limit?: number; cursor?: string },
  ): Promise<Result<DefinitionVersions>>;
  /**
   * `POST /v1/workflows/{id}/runs`; `created` is false when an idempotency key found an existing run, and for a
   * preview. With `options.wait_ms` (≤ 60,000; the HTTP route's `Prefer: wait`) it answers once the run has ended,
   * with its `output` and `error`, or once that long has passed.
   */
  startRun(
    workflowId: string,
    request: StartRunBody,
    options?: StartRunOptions,
  ): Promise<Result<StartRunResponse & { created: boolean }>>;
  /** `POST /v1/plans`: run (or preview) an agent plan (docs/plans.md); `created` and `options` as for `startRun`. */
  startPlan(request: PlanRequest, options?: StartRunOptions): Promise<Result<StartPlanResponse & { created: boolean }>>;
  /** `GET /v1/runs/{run_id}`. */
  getRun(runId: string): Promise<Result<RunView>>;
  /** `GET /v1/runs`: the query's parameters as strings, e.g. `{ status: "failed", limit: "10" }`. */
  listRuns(query?: Record<string, string>): Promise<Result<RunList>>;
  /** `DELETE /v1/runs/{run_id}`: deletes a run that has ended, now (role admin). */
  deleteRun(runId: string): Promise<Result<DeletedRun>>;
  /** `GET /v1/runs/{run_id}/journal`. */
  getJournal(runId: string): Promise<Result<JournalResponse>>;
  /** `GET /v1/blobs/{digest}`: a blob's bytes (a large value of a run) and their media type. */
  getBlob(digest: string): Promise<Result<{ media_type: string; bytes: Uint8Array }>>;
  /** `POST /v1/runs/{run_id}/cancel`. */
  cancelRun(runId: string, reason?: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/pause`. */
  pauseRun(runId: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/resume`. */
  resumeRun(runId: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/redrive`. */
  redriveRun(runId: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/compensate`. */
  compensateRun(runId: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/approve`. */
  approveRun(runId: string): Promise<Result<RunView>>;
  /** `POST /v1/runs/{run_id}/erase` `{ reason }`: an ended run's inputs, outputs and answers erased. */
  eraseRun(runId: string, reason: string): Promise<Result<RunView | DeletedRun>>;
  /** Up to 500 journal entries after `afterSeq`; with none yet, waits up to `waitMs` (≤ 30 s) for the next. */
  runEvents(runId: string, afterSeq?: number, waitMs?: number): Promise<Result<JournalEntry[]>>;
  /** `GET /v1/runs/{run_id}/gates`. */
  listGates(runId: string): Promise<Result<GateList>>;
  /** `GET /v1/gates`: open gates across runs; the query's parameters as strings, e.g. `{ limit: "10" }`. */
  listOpenGates(query?: Record<string, string>): Promise<Result<OpenGateList>>;
  /** `POST /v1/runs/{run_id}/gates/{gate_id}`. */
  answerGate(runId: string, gateId: string, answer: GateAnswerBody): Promise<Result<GateView>>;
  /**
   * `POST /v1/events`: one event `{ name, data?, id? }`, or `{ events: [...] }` (up to 100); each resumes the runs
   * waiting for its name that it matches. The same `id` of the same name is accepted once in 24 h (`duplicate: true`).
   */
  sendEvents(body: SendEventsBody): Promise<Result<SendEventsResponse>>;
  /**
   * `POST /v1/runs/{run_id}/signals`: the same body and answer as `sendEvents`, delivered to this run only: its
   * waiting `event` step takes a signal, or the run keeps it until one waits. The run accepts the same `id` once.
   */
  signalRun(runId: string, body: SendEventsBody): Promise<Result<SendEventsResponse>>;
  /**
   * `GET /v1/events/{event_id}/triggers?name=`: what the event's triggers started: whether it is matched yet, and per
   * workflow its start (pending, started with its run_id, or failed with the error).
   */
  eventTriggers(eventId: string, name: string): Promise<Result<EventTriggers>>;
  /** `GET /v1/journal-keys`. */
  journalKeys(): Promise<Result<Jwks>>;
  /** `GET /v1/schedules/{id}/status`: paused or not, the next 5 slots, the recent slots and their runs. */
  scheduleStatus(id: string): Promise<Result<ScheduleStatus>>;
  /**
   * `GET /v1/limits/{id}/status?key=`: one key's slots in use, holders waiting and window; no key is the empty key
   * (a limit named without `key`). A limit that is not registered is `limit.not_found`.
   */
  limitStatus(id: string, key?: string): Promise<Result<LimitStatus>>;
  /** `POST /v1/schedules/{id}/pause`. */
  pauseSchedule(id: string): Promise<Result<ScheduleStatus>>;
  /** `POST /v1/schedules/{id}/resume`: slots start again from now on. */
  resumeSchedule(id: string): Promise<Result<ScheduleStatus>>;
  /** `POST /v1/schedules/{id}/trigger`: one run now, whatever the overlap policy. */
  triggerSchedule(id: string): Promise<Result<SlotRecord>>;
  /** `POST /v1/schedules/{id}/backfill`: one run per slot from `from` to `to` (≤ 1,000 slots), by the overlap policy. */
  backfillSchedule(id: string, body: BackfillBody): Promise<Result<BackfillAnswer>>;
}
