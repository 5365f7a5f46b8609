import type { Catalog } from "../catalog/catalog.ts";
import { decodeCursor, type ListPage } from "../catalog/listing.ts";
import { resolveSnapshot } from "../catalog/snapshots.ts";
import type { Coordinator, CreateRunOutcome, CreateRunRequest, RunControl } from "../coordinator/index.ts";
import { assertValidInput } from "../coordinator/requests.ts";
import { JOURNAL_PAGE } from "../coordinator/storage.ts";
import { EngineError } from "../lib/errors.ts";
import { newRunId, RUN_ID_PATTERN, runIdFor, sha256Hex } from "../lib/ids.ts";
import { canonicalJson, importSigningKey, toJwks, type JournalEntry } from "../lib/journal/index.ts";
import { unwrap } from "../lib/result.ts";
import { parseOrThrow, summarize } from "../lib/validation.ts";
import { planRun } from "../coordinator/plan.ts";
import { armSchedules } from "../schedules/index.ts";
import {
  DefinitionListCursor,
  DefinitionListQuery,
  EraseBody,
  MAX_START_DELAY_MS,
  StartRunBody,
  type DefinitionList,
  type DefinitionRecord,
  type DefinitionVersions,
  type GateView,
  type NodeDetail,
  type RegisterResponse,
  type RunView,
  type StartRunResponse,
} from "../schemas/api.ts";
import type { Answerer } from "../schemas/approvers.ts";
import { byOf, type By, type Principal } from "../schemas/auth.ts";
import type { JsonObject } from "../schemas/common.ts";
import { DefinitionKind } from "../schemas/definitions.ts";
import type { SendEventsResponse } from "../schemas/events.ts";
import type { ExposedWorkflow } from "../schemas/mcp.ts";
import { DEFAULT_PRIORITY } from "../schemas/limits.ts";
import { Jwks, type PublicJwk } from "../schemas/journal.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import type { DeletedRun } from "../schemas/retention.ts";
import { readArchivedJournal } from "../coordinator/retention.ts";

/**
 * The operations of the API, shared by the HTTP routes and the Workers RPC
 * entrypoint. Each takes the Worker's env and plain data, and throws
 * `EngineError`s that the caller maps to a status or a Result.
 */

const CATALOG_NAME = "catalog";
/** Items per page of a listing when the query names no `limit`. */
const DEFAULT_LIST_LIMIT = 50;

// The stubs' generated RPC types are too deep for tsc over recursive JSON
// types; the methods return plain-data Results, so their own signatures are exact.
type CatalogApi = Pick<
  Catalog,
  | "register"
  | "get"
  | "list"
  | "versions"
  | "resolvePlan"
  | "triggersFor"
  | "createToken"
  | "listTokens"
  | "tokenByHash"
  | "revokeToken"
  | "exposedWorkflows"
>;
type CoordinatorApi = Pick<
  Coordinator,
  | "create"
  | "get"
  | "journal"
  | "events"
  | "control"
  | "erase"
  | "gates"
  | "answerGate"
  | "node"
  | "approveSteps"
  | "signal"
  | "linkGate"
  | "linkedGate"
  | "answerByLink"
  | "settle"
  | "deleteRun"
>;

export function catalog(env: Env): CatalogApi {
  return env.CATALOG.get(env.CATALOG.idFromName(CATALOG_NAME)) as unknown as CatalogApi;
}

export function coordinator(env: Env, runId: string): CoordinatorApi {
  if (!RUN_ID_PATTERN.test(runId)) {
    throw EngineError.terminal("run.not_found", `no run "${runId}"`);
  }
  return env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as CoordinatorApi;
}

/** Registers a bundle; then each schedule in it arms its object for the version now registered (schedules/route.ts). */
export async function registerDefinitions(env: Env, body: unknown): Promise<RegisterResponse> {
  const registered = unwrap(await catalog(env).register(body));
  await armSchedules(env, registered.created);
  return registered;
}

export async function getDefinition(env: Env, kind: string, id: string, version?: number): Promise<DefinitionRecord> {
  return unwrap(await catalog(env).get(toKind(kind), id, version));
}

/**
 * `GET /v1/{kind}`: the latest version of each definition of a kind, a page
 * at a time; of workflows, only those of `grant` (a token's workflows; null: all).
 */
export async function listDefinitions(
  env: Env,
  kind: string,
  query: unknown,
  grant: readonly string[] | null = null,
): Promise<DefinitionList> {
  const page = toPage(toKind(kind), query);
  return unwrap(await catalog(env).list(grant === null ? page : { ...page, grant }));
}

/**
 * The workflows exposed as MCP tools (their latest versions), of `grant` (a
 * token's workflows; null: all); `id` keeps that one only, when exposed.
 */
export async function exposedWorkflows(
  env: Env,
  grant: readonly string[] | null,
  id?: string,
): Promise<ExposedWorkflow[]> {
  return unwrap(await catalog(env).exposedWorkflows(grant, id));
}

/** `GET /v1/{kind}/{id}/versions`: every version of one definition, highest first. */
export async function listVersions(env: Env, kind: string, id: string, query: unknown): Promise<DefinitionVersions> {
  return unwrap(await catalog(env).versions({ ...toPage(toKind(kind), query, id), id }));
}

/** A kind as the API spells it (`mcp-servers` or `mcp_servers`); an unknown one names nothing. */
function toKind(kind: string): DefinitionKind {
  const parsed = DefinitionKind.safeParse(kind.replaceAll("-", "_"));
  if (!parsed.success) {
    throw EngineError.terminal("definition.not_found", `no definition kind "${kind}"`);
  }
  return parsed.data;
}

/**
 * A listing's query, checked: `limit` 1..100 (default 50), and a cursor that
 * this listing issued (the kind's, or the versions of `id`).
 */
function toPage(kind: DefinitionKind, query: unknown, id?: string): ListPage {
  const { limit, cursor } = parseOrThrow(DefinitionListQuery, query, "request.invalid_query", "the query");
  if (cursor === undefined) {
    return { kind, after: undefined, limit: limit ?? DEFAULT_LIST_LIMIT };
  }
  const after = DefinitionListCursor.safeParse(decodeCursor(cursor));
  const ours =
    after.success &&
    after.data.kind === kind &&
    (id === undefined ? "created_at" in after.data : "version" in after.data && after.data.id === id);
  if (!after.success || !ours) {
    throw EngineError.terminal("request.invalid_cursor", "the cursor is not one this listing returned", [
      { path: "cursor", message: "not a cursor of this listing", code: "request.invalid_cursor" },
    ]);
  }
  return { kind, after: after.data, limit: limit ?? DEFAULT_LIST_LIMIT };
}

/**
 * Starts a run: 201 with a new run, or 200 with the run an idempotency key
 * already started. Given `waitMs`, answers once the run has ended (with its
 * output and error) or that long has passed. Given a `traceparent`, the run
 * joins that trace (docs/telemetry.md); it is not part of what makes two
 * starts with one idempotency key the same request.
 */
export async function startRun(
  env: Env,
  workflowId: string,
  body: unknown,
  principal: Principal,
  waitMs = 0,
  traceparent: TraceParent | null = null,
): Promise<{ created: boolean; run: StartRunResponse }> {
  const request = parseOrThrow(StartRunBody, body ?? {}, "run.invalid_request", "the run request");
  const delay = delayedStart(request, Date.now());
  const mode = request.mode ?? "auto";
  // Through the snapshot caches (catalog/snapshots.ts): a pinned start may not call the catalog at all.
  const snapshot = await resolveSnapshot(env, workflowId, request.version);
  const input = request.input ?? {};
  if (mode === "preview") {
    assertValidInput(snapshot, input);
    // Nothing is created and nothing runs: the plan is the answer.
    return {
      created: false,
      run: {
        run_id: null,
        status: "preview",
        workflow: { id: snapshot.workflow.id, version: snapshot.workflow.version },
        plan: planRun(snapshot) as unknown as JsonObject,
      },
    };
  }
  const priority = request.priority === DEFAULT_PRIORITY ? undefined : request.priority;
  const requestHash = await startRequestHash(workflowId, request, input, mode, priority);
  const runId =
    request.idempotency_key === undefined ? newRunId() : await idempotentRunId(workflowId, request.idempotency_key);
  return createRun(
    env,
    {
      run_id: runId,
      snapshot,
      input,
      mode,
      idempotency_key: request.idempotency_key ?? null,
      request_hash: requestHash,
      created_by: principal.created_by,
      by: byOf(principal),
      trigger: { kind: "api" },
      ...delay,
      ...(priority === undefined ? {} : { priority }),
      ...(traceparent === null ? {} : { traceparent }),
    },
    waitMs,
  );
}

/**
 * What makes two starts with one idempotency key the same request. The delay
 * as sent, and only when sent: a retry with the same delay_ms is the same
 * request. A priority likewise, 5 being none: a retry that adds `priority: 5`
 * asks for the same run.
 */
function startRequestHash(
  workflowId: string,
  request: StartRunBody,
  input: unknown,
  mode: string,
  priority: number | undefined,
): Promise<string> {
  const { start_at, delay_ms } = request;
  const version = request.version ?? null;
  return sha256Hex(canonicalJson({ workflow: workflowId, version, input, mode, start_at, delay_ms, priority }));
}

/**
 * A start's delay as the coordinator takes it: `start_at` as a time, at most
 * MAX_START_DELAY_MS after `now` (one in the past starts the run at once), or
 * `delay_ms`, which the coordinator counts from its own clock.
 */
function delayedStart(request: StartRunBody, now: number): Pick<CreateRunRequest, "start_at" | "delay_ms"> {
  if (request.delay_ms !== undefined) {
    return { delay_ms: request.delay_ms };
  }
  if (request.start_at === undefined) {
    return {};
  }
  const startAt = Date.parse(request.start_at);
  if (startAt - now > MAX_START_DELAY_MS) {
    const details = [{ path: "start_at", message: "must be at most 365 days ahead", code: "run.start_too_late" }];
    throw EngineError.terminal("run.invalid_request", `the run request is invalid: ${summarize(details)}`, details);
  }
  return { start_at: startAt };
}

/**
 * Creates the run `request.run_id` names in its own coordinator, or finds it
 * (same id and request); given `waitMs`, answers once it ended or that long passed.
 */
export async function createRun(env: Env, request: CreateRunRequest, waitMs: number): Promise<CreateRunOutcome> {
  return unwrap(await coordinator(env, request.run_id).create(request, waitMs));
}

export async function getRun(env: Env, runId: string): Promise<RunView> {
  return unwrap(await coordinator(env, runId).get());
}

/**
 * The run once it has ended or has an open gate not in `asked`, or after
 * `waitMs` (at most MAX_START_WAIT_MS): what the MCP server answers with.
 */
export async function settleRun(env: Env, runId: string, waitMs: number, asked: string[] = []): Promise<RunView> {
  return unwrap(await coordinator(env, runId).settle(waitMs, asked));
}

/** One node of a run in full, its dispatches' step records included. */
export async function getNode(env: Env, runId: string, nodeId: string): Promise<NodeDetail> {
  return unwrap(await coordinator(env, runId).node(nodeId));
}

/**
 * The whole journal, read from the run's coordinator a page at a time; of a
 * deleted run, from its archive when its journal was archived (else 410).
 */
export async function getJournal(env: Env, runId: string): Promise<{ entries: JournalEntry[] }> {
  const entries: JournalEntry[] = [];
  for (;;) {
    const answer = await coordinator(env, runId).journal(entries.at(-1)?.seq ?? 0, JOURNAL_PAGE);
    if (!answer.ok && answer.error.code === "run.deleted") {
      return (await readArchivedJournal(env.BLOBS, runId)) ?? unwrap(answer);
    }
    const page = unwrap(answer);
    entries.push(...page);
    if (page.length < JOURNAL_PAGE) {
      return { entries };
    }
  }
}

/**
 * `DELETE /v1/runs/{run_id}`: deletes a run that has ended, now (coordinator/retention.ts);
 * a run already deleted answers as it is.
 */
export async function deleteRun(env: Env, runId: string): Promise<DeletedRun> {
  return unwrap(await coordinator(env, runId).deleteRun());
}

export async function listGates(env: Env, runId: string): Promise<{ gates: GateView[] }> {
  return { gates: unwrap(await coordinator(env, runId).gates()) };
}

/** `POST /v1/runs/{run_id}/signals`: one signal `{ name, data?, id? }`, or `{ events: [...] }`, sent by `by`. */
export async function signalRun(env: Env, runId: string, body: unknown, by: By): Promise<SendEventsResponse> {
  return unwrap(await coordinator(env, runId).signal(body, by));
}

export async function answerGate(
  env: Env,
  runId: string,
  gateId: string,
  body: unknown,
  answerer: Answerer,
): Promise<GateView> {
  return unwrap(await coordinator(env, runId).answerGate(gateId, body, answerer));
}

/** Applies a run control (coordinator/controls.ts); `reason` is what a cancel records, `by` who asked. */
export async function controlRun(
  env: Env,
  runId: string,
  control: RunControl,
  reason: string | undefined,
  by: By,
): Promise<RunView> {
  return unwrap(await coordinator(env, runId).control(control, reason, by));
}

/**
 * `POST /v1/runs/{run_id}/erase` `{ reason }`: erases an ended run's data
 * (coordinator/erase.ts); `by` is who asked, recorded in the `erased` entry.
 */
export async function eraseRun(env: Env, runId: string, body: unknown, by: By): Promise<RunView | DeletedRun> {
  const { reason } = parseOrThrow(EraseBody, body, "request.invalid_body", "the erase body");
  return unwrap(await coordinator(env, runId).erase(reason, by));
}

/** Journal entries after `afterSeq`, waiting up to `waitMs` for new ones when there are none. */
export async function runEvents(env: Env, runId: string, afterSeq: number, waitMs: number): Promise<JournalEntry[]> {
  return unwrap(await coordinator(env, runId).events(afterSeq, waitMs));
}

/** The JWKS: the current signing key's public half, plus retired keys still trusted. */
export async function journalKeys(env: Env): Promise<Jwks> {
  const current = await importSigningKey(env.JOURNAL_SIGNING_KEY ?? "");
  const retired: PublicJwk[] = env.JOURNAL_RETIRED_KEYS ? Jwks.parse(JSON.parse(env.JOURNAL_RETIRED_KEYS)).keys : [];
  return toJwks([current.publicJwk, ...retired.filter((key) => key.kid !== current.kid)]);
}

/** The same (workflow, key) always names the same run, so a retried start finds it. */
function idempotentRunId(workflowId: string, key: string): Promise<string> {
  return runIdFor(`${workflowId}\n${key}`);
}
