import { WorkerEntrypoint } from "cloudflare:workers";
import { readBlob } from "./blobs.ts";
import { EngineError } from "../lib/errors.ts";
import { checkBodyLimits } from "../lib/json-limits.ts";
import type { JournalEntry } from "../lib/journal/index.ts";
import { toResult, type Result } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { StartRunOptions } from "../schemas/api.ts";
import type { Answerer } from "../schemas/approvers.ts";
import type {
  DefinitionList,
  DefinitionRecord,
  DefinitionVersions,
  GateView,
  OpenGateList,
  RegisterResponse,
  RunList,
  RunView,
  StartRunResponse,
} from "../schemas/api.ts";
import type { EventTriggers, SendEventsResponse } from "../schemas/events.ts";
import type { Jwks } from "../schemas/journal.ts";
import type { DeletedRun } from "../schemas/retention.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import type { StartPlanResponse } from "../schemas/plans.ts";
import type { LimitStatus } from "../schemas/limits.ts";
import type { BackfillAnswer, ScheduleStatus, SlotRecord } from "../schemas/schedules.ts";
import * as schedules from "../schedules/index.ts";
import type { RunControl } from "../coordinator/controls.ts";
import type { TrellisApi as TrellisApiClient } from "../client/index.ts";
import { eventTriggers, sendEvents } from "../events/index.ts";
import { listOpenGates } from "./gate-list.ts";
import { limitStatus } from "./limit-status.ts";
import { startPlan } from "./plans.ts";
import { listRuns } from "./run-list.ts";
import * as service from "./service.ts";
import { byOf } from "../schemas/auth.ts";
import { accessOf, authorize } from "./access.ts";
import { RPC_PRINCIPAL } from "./auth.ts";

/**
 * Who answers a gate over RPC: a service binding of the deployment's own
 * account, trusted as an admin. A gate whose `approvers` name only tokens or
 * emails is answered by one of them, never over RPC.
 */
const RPC_ANSWERER: Answerer = { by: byOf(RPC_PRINCIPAL), roles: RPC_PRINCIPAL.roles };

/** The longest id (run, gate, workflow, kind) an RPC caller may pass; longer ones name nothing. */
const MAX_ID_LENGTH = 1024;

/**
 * The API as a Workers RPC entrypoint, for other Workers:
 * `[[services]] binding = "TRELLIS", service = "trellis", entrypoint = "TrellisApi"`.
 * Every method returns a Result: errors arrive as data with their code.
 *
 * RPC arguments arrive as whatever structured clone carries (any type, any
 * depth, shared or cyclic), so each is checked here before the service sees
 * it: ids must be strings, bodies meet the same ingress limits as HTTP bodies
 * (`checkBodyLimits`), numbers must be what they say.
 */
/**
 * One RPC method per row of the run-control table (coordinator/controls.ts),
 * `<control>Run(runId)`: a new row fails to compile here until it has one.
 */
type ControlMethods = { [K in RunControl as `${K}Run`]: (runId: string) => Promise<Result<RunView>> };

/** Implements the client's plain interface (client/index.ts), so the types callers import cannot drift from it. */
export class TrellisApi extends WorkerEntrypoint<Env> implements ControlMethods, TrellisApiClient {
  registerDefinitions(bundle: unknown): Promise<Result<RegisterResponse>> {
    return call("registerDefinitions", () => {
      checkBodyLimits(bundle);
      return service.registerDefinitions(this.env, bundle);
    });
  }

  getDefinition(kind: string, id: string, version?: number): Promise<Result<DefinitionRecord>> {
    return call("getDefinition", () => {
      const pinned = optionalInteger(version, "version", 1);
      return service.getDefinition(this.env, idArgument(kind, "kind"), idArgument(id, "id"), pinned);
    });
  }

  /** `GET /v1/{kind}`; `page` is `{ limit?, cursor? }` as in the HTTP query, `limit` a number. */
  listDefinitions(kind: string, page?: ListPageArgument): Promise<Result<DefinitionList>> {
    return call("listDefinitions", () => service.listDefinitions(this.env, idArgument(kind, "kind"), pageQuery(page)));
  }

  /** `GET /v1/{kind}/{id}/versions`. */
  listVersions(kind: string, id: string, page?: ListPageArgument): Promise<Result<DefinitionVersions>> {
    return call("listVersions", () =>
      service.listVersions(this.env, idArgument(kind, "kind"), idArgument(id, "id"), pageQuery(page)),
    );
  }

  /** `POST /v1/plans`; `options.wait_ms` is the HTTP route's `Prefer: wait`, in ms. */
  startPlan(request: unknown, options?: unknown): Promise<Result<StartPlanResponse & { created: boolean }>> {
    return call("startPlan", async () => {
      checkBodyLimits(request);
      const { created, run } = await startPlan(this.env, request, RPC_PRINCIPAL, startWaitMs(options));
      return { ...run, created };
    });
  }

  /**
   * `POST /v1/workflows/{id}/runs`; with `options.wait_ms` (the HTTP route's
   * `Prefer: wait`, in ms) it answers once the run has ended, with its output
   * and error, or once that long has passed.
   */
  startRun(
    workflowId: string,
    request: unknown,
    options?: unknown,
  ): Promise<Result<StartRunResponse & { created: boolean }>> {
    return call("startRun", async () => {
      const id = idArgument(workflowId, "workflowId");
      checkBodyLimits(request);
      const { wait_ms: waitMs, traceparent } = startOptions(options);
      const { created, run } = await service.startRun(this.env, id, request, RPC_PRINCIPAL, waitMs, traceparent);
      return { ...run, created };
    });
  }

  getRun(runId: string): Promise<Result<RunView>> {
    return call("getRun", () => service.getRun(this.env, idArgument(runId, "runId")));
  }

  /** `DELETE /v1/runs/{run_id}`: deletes a run that has ended, now. */
  deleteRun(runId: string): Promise<Result<DeletedRun>> {
    return call("deleteRun", () => service.deleteRun(this.env, idArgument(runId, "runId")));
  }

  getJournal(runId: string): Promise<Result<{ entries: JournalEntry[] }>> {
    return call("getJournal", () => service.getJournal(this.env, idArgument(runId, "runId")));
  }

  /**
   * `GET /v1/blobs/{digest}`: a blob's bytes and media type (a value's canonical JSON:
   * `application/json`); `blob.corrupt` for bytes that do not hash to the digest.
   */
  getBlob(digest: string): Promise<Result<{ media_type: string; bytes: Uint8Array }>> {
    return call("getBlob", async () => {
      const blob = await readBlob(this.env, idArgument(digest, "digest"), RPC_PRINCIPAL);
      return { media_type: blob.mediaType, bytes: blob.bytes };
    });
  }

  /** `GET /v1/runs`: the query's parameters as an object of strings, e.g. `{ status: "failed", limit: "10" }`. */
  listRuns(query: unknown = {}): Promise<Result<RunList>> {
    return call("listRuns", () => {
      checkBodyLimits(query, "query");
      return listRuns(this.env.RUN_INDEX, query, RPC_PRINCIPAL.workflows);
    });
  }

  /** `GET /v1/gates`: the query's parameters as an object of strings, e.g. `{ limit: "10" }`. */
  listOpenGates(query: unknown = {}): Promise<Result<OpenGateList>> {
    return call("listOpenGates", () => {
      checkBodyLimits(query, "query");
      return listOpenGates(this.env, query, RPC_PRINCIPAL.workflows);
    });
  }

  cancelRun(runId: string, reason?: string): Promise<Result<RunView>> {
    return call("cancelRun", () => {
      const id = idArgument(runId, "runId");
      if (reason !== undefined && typeof reason !== "string") {
        throw invalidArgument("reason", "must be a string when given");
      }
      checkBodyLimits(reason, "reason");
      return service.controlRun(this.env, id, "cancel", reason, RPC_BY);
    });
  }

  pauseRun(runId: string): Promise<Result<RunView>> {
    return call("pauseRun", () => service.controlRun(this.env, idArgument(runId, "runId"), "pause", undefined, RPC_BY));
  }

  resumeRun(runId: string): Promise<Result<RunView>> {
    return call("resumeRun", () =>
      service.controlRun(this.env, idArgument(runId, "runId"), "resume", undefined, RPC_BY),
    );
  }

  redriveRun(runId: string): Promise<Result<RunView>> {
    return call("redriveRun", () =>
      service.controlRun(this.env, idArgument(runId, "runId"), "redrive", undefined, RPC_BY),
    );
  }

  /** Erases an ended run's inputs, outputs and answers (docs/api.md, `POST /v1/runs/{run_id}/erase`). */
  eraseRun(runId: string, reason: string): Promise<Result<RunView | DeletedRun>> {
    return call("eraseRun", () => {
      checkBodyLimits(reason, "reason");
      return service.eraseRun(this.env, idArgument(runId, "runId"), { reason }, RPC_BY);
    });
  }

  approveRun(runId: string): Promise<Result<RunView>> {
    return call("approveRun", () =>
      service.controlRun(this.env, idArgument(runId, "runId"), "approve", undefined, RPC_BY),
    );
  }

  /** Runs the undos of a failed or cancelled run that has not compensated. */
  compensateRun(runId: string): Promise<Result<RunView>> {
    return call("compensateRun", () =>
      service.controlRun(this.env, idArgument(runId, "runId"), "compensate", undefined, RPC_BY),
    );
  }

  /** Journal entries after `afterSeq`, waiting up to `waitMs` for the next ones: the event stream over RPC. */
  runEvents(runId: string, afterSeq = 0, waitMs = 0): Promise<Result<JournalEntry[]>> {
    return call("runEvents", () => {
      const id = idArgument(runId, "runId");
      return service.runEvents(
        this.env,
        id,
        optionalInteger(afterSeq, "afterSeq", 0) ?? 0,
        optionalInteger(waitMs, "waitMs", 0) ?? 0,
      );
    });
  }

  listGates(runId: string): Promise<Result<{ gates: GateView[] }>> {
    return call("listGates", () => service.listGates(this.env, idArgument(runId, "runId")));
  }

  answerGate(runId: string, gateId: string, answer: unknown): Promise<Result<GateView>> {
    return call("answerGate", () => {
      const run = idArgument(runId, "runId");
      const gate = idArgument(gateId, "gateId");
      checkBodyLimits(answer);
      return service.answerGate(this.env, run, gate, answer, RPC_ANSWERER);
    });
  }

  /** `POST /v1/runs/{run_id}/signals`: signals to one run, the same body as `sendEvents`. */
  signalRun(runId: string, body: unknown): Promise<Result<SendEventsResponse>> {
    return call("signalRun", () => {
      const run = idArgument(runId, "runId");
      checkBodyLimits(body);
      return service.signalRun(this.env, run, body, RPC_BY);
    });
  }

  /** `POST /v1/events`: one event `{ name, data?, id? }`, or `{ events: [...] }`. */
  sendEvents(body: unknown): Promise<Result<SendEventsResponse>> {
    return call("sendEvents", () => {
      checkBodyLimits(body);
      return sendEvents(this.env, body, RPC_BY);
    });
  }

  /** `GET /v1/events/{event_id}/triggers?name=`: what an event's triggers started. */
  eventTriggers(eventId: string, name: string): Promise<Result<EventTriggers>> {
    return call("eventTriggers", () => eventTriggers(this.env, name, idArgument(eventId, "eventId")));
  }

  journalKeys(): Promise<Result<Jwks>> {
    return toResult(() => service.journalKeys(this.env));
  }

  /** `GET /v1/schedules/{id}/status`. */
  scheduleStatus(id: string): Promise<Result<ScheduleStatus>> {
    return call("scheduleStatus", () => schedules.scheduleStatus(this.env, idArgument(id, "id")));
  }

  /** `GET /v1/limits/{id}/status?key=`; no key is the empty key. */
  limitStatus(id: string, key?: string): Promise<Result<LimitStatus>> {
    return call("limitStatus", () => {
      // A key is at most MAX_LIMIT_KEY_CHARS (256): as an id argument it is checked, and limitStatus says 400 past 256.
      const limitKey = key === undefined ? undefined : idArgument(key, "key");
      return limitStatus(this.env, idArgument(id, "id"), limitKey);
    });
  }

  pauseSchedule(id: string): Promise<Result<ScheduleStatus>> {
    return call("pauseSchedule", () => schedules.pauseSchedule(this.env, idArgument(id, "id")));
  }

  resumeSchedule(id: string): Promise<Result<ScheduleStatus>> {
    return call("resumeSchedule", () => schedules.resumeSchedule(this.env, idArgument(id, "id")));
  }

  triggerSchedule(id: string): Promise<Result<SlotRecord>> {
    return call("triggerSchedule", () => schedules.triggerSchedule(this.env, idArgument(id, "id")));
  }

  /** `POST /v1/schedules/{id}/backfill`: `{ from, to, overlap? }`. */
  backfillSchedule(id: string, body: unknown): Promise<Result<BackfillAnswer>> {
    return call("backfillSchedule", () => {
      checkBodyLimits(body);
      return schedules.backfillSchedule(this.env, idArgument(id, "id"), body);
    });
  }
}

/** Who an RPC caller is in `by`: `{ token_id: "rpc", name: "rpc" }`. */
const RPC_BY = byOf(RPC_PRINCIPAL);

/**
 * Runs an RPC method after the checks of its row of the route table
 * (src/contracts/routes.ts, by the method's name as operation id), made for
 * the RPC caller: a service binding of this account, an admin ({@link RPC_PRINCIPAL}).
 */
function call<T>(operationId: string, fn: () => T | Promise<T>): Promise<Result<T>> {
  return toResult(() => {
    authorize(RPC_PRINCIPAL, accessOf(operationId));
    return fn();
  });
}

/** An id argument: a well-formed string of at most {@link MAX_ID_LENGTH} characters. */
function idArgument(value: unknown, name: string): string {
  if (typeof value !== "string") {
    throw invalidArgument(name, `must be a string, got ${value === null ? "null" : typeof value}`);
  }
  if (value.length > MAX_ID_LENGTH) {
    throw invalidArgument(name, `must be at most ${MAX_ID_LENGTH} characters`);
  }
  checkBodyLimits(value, name);
  return value;
}

/** How long a start waits for its run to end: `options.wait_ms`, 0 when not given. */
function startWaitMs(options: unknown): number {
  return startOptions(options).wait_ms;
}

/** A start's options: how long to wait for the run, and the trace it joins (`traceparent`). */
function startOptions(options: unknown): { wait_ms: number; traceparent: TraceParent | null } {
  const parsed = parseOrThrow(StartRunOptions, options ?? {}, "request.invalid_argument", "options");
  return { wait_ms: parsed.wait_ms ?? 0, traceparent: parsed.traceparent ?? null };
}

/** An optional integer argument, at least `min`; undefined when not given. */
function optionalInteger(value: unknown, name: string, min: number): number | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min) {
    throw invalidArgument(name, `must be an integer ≥ ${min}`);
  }
  return value;
}

type ListPageArgument = { limit?: number; cursor?: string };

/** A listing's page argument as the HTTP query the service parses (which reports anything else it holds). */
function pageQuery(page: unknown): Record<string, string> {
  if (page === undefined) {
    return {};
  }
  if (typeof page !== "object" || page === null || Array.isArray(page)) {
    throw invalidArgument("page", "must be an object { limit?, cursor? } when given");
  }
  const { limit, cursor, ...rest } = page as Record<string, unknown>;
  const extra = Object.keys(rest)[0];
  if (extra !== undefined) {
    throw invalidArgument(`page.${extra}`, "is not a listing parameter");
  }
  const count = optionalInteger(limit, "page.limit", 1);
  return {
    ...(count === undefined ? {} : { limit: String(count) }),
    ...(cursor === undefined ? {} : { cursor: idArgument(cursor, "page.cursor") }),
  };
}

function invalidArgument(name: string, message: string): EngineError {
  return EngineError.terminal("request.invalid_argument", `${name} ${message}`, [
    { path: name, message, code: "request.invalid_argument" },
  ]);
}
