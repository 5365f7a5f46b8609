import type { Catalog } from "../catalog/index.ts";
import type { Coordinator, CreateRunOutcome } from "../coordinator/index.ts";
import { EngineError } from "../lib/errors.ts";
import { canonicalJson, importSigningKey, toHex, toJwks, type JournalEntry } from "../lib/journal/index.ts";
import { unwrap } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import {
  DefinitionKind,
  Jwks,
  StartRunBody,
  type DefinitionRecord,
  type PublicJwk,
  type RegisterResponse,
  type RunView,
  type StartRunResponse,
} from "../schemas/index.ts";

/**
 * The operations of the API, shared by the HTTP routes and the Workers RPC
 * entrypoint. Each takes the Worker's env and plain data, and throws
 * `EngineError`s that the caller maps to a status or a Result.
 */

const RUN_ID_PATTERN = /^run_[0-9a-f]{32}$/;
const CATALOG_NAME = "catalog";

// The stubs' generated RPC types are too deep for tsc over recursive JSON
// types; the methods return plain-data Results, so their own signatures are exact.
type CatalogApi = Pick<Catalog, "register" | "get" | "resolveRun">;
type CoordinatorApi = Pick<Coordinator, "create" | "get" | "journal" | "events" | "cancel" | "pause" | "resume" | "redrive" | "approve">;

function catalog(env: Env): CatalogApi {
  return env.CATALOG.get(env.CATALOG.idFromName(CATALOG_NAME)) as unknown as CatalogApi;
}

function coordinator(env: Env, runId: string): CoordinatorApi {
  if (!RUN_ID_PATTERN.test(runId)) {
    throw EngineError.terminal("run.not_found", `no run "${runId}"`);
  }
  return env.COORDINATOR.get(env.COORDINATOR.idFromName(runId)) as unknown as CoordinatorApi;
}

export async function registerDefinitions(env: Env, body: unknown): Promise<RegisterResponse> {
  return unwrap(await catalog(env).register(body));
}

export async function getDefinition(env: Env, kind: string, id: string, version?: number): Promise<DefinitionRecord> {
  const parsedKind = DefinitionKind.safeParse(kind.replaceAll("-", "_"));
  if (!parsedKind.success) {
    throw EngineError.terminal("definition.not_found", `no definition kind "${kind}"`);
  }
  return unwrap(await catalog(env).get(parsedKind.data, id, version));
}

/** Starts a run: 201 with a new run, or 200 with the run an idempotency key already started. */
export async function startRun(env: Env, workflowId: string, body: unknown): Promise<{ created: boolean; run: StartRunResponse }> {
  const request = parseOrThrow(StartRunBody, body ?? {}, "run.invalid_request", "the run request");
  const mode = request.mode ?? "auto";
  if (mode === "preview") {
    throw EngineError.terminal("run.mode_unsupported", 'mode "preview" is not available yet');
  }
  const snapshot = unwrap(await catalog(env).resolveRun(workflowId, request.version));
  const input = request.input ?? {};
  const requestHash = await sha256Hex(canonicalJson({ workflow: workflowId, version: request.version ?? null, input, mode }));
  const runId = request.idempotency_key === undefined ? newRunId() : await idempotentRunId(workflowId, request.idempotency_key);
  const outcome: CreateRunOutcome = unwrap(
    await coordinator(env, runId).create({
      run_id: runId,
      snapshot,
      input,
      mode,
      idempotency_key: request.idempotency_key ?? null,
      request_hash: requestHash,
    }),
  );
  const { view } = outcome;
  return { created: outcome.created, run: { run_id: view.run_id, status: view.status, workflow: view.workflow } };
}

export async function getRun(env: Env, runId: string): Promise<RunView> {
  return unwrap(await coordinator(env, runId).get());
}

export async function getJournal(env: Env, runId: string): Promise<{ entries: JournalEntry[] }> {
  return { entries: unwrap(await coordinator(env, runId).journal()) };
}

export async function cancelRun(env: Env, runId: string, reason?: string): Promise<RunView> {
  return unwrap(await coordinator(env, runId).cancel(reason));
}

/** The run controls that take no arguments. */
export type RunControl = "pause" | "resume" | "redrive" | "approve";

export async function controlRun(env: Env, runId: string, control: RunControl): Promise<RunView> {
  const stub = coordinator(env, runId);
  const results = { pause: () => stub.pause(), resume: () => stub.resume(), redrive: () => stub.redrive(), approve: () => stub.approve() } satisfies Record<RunControl, () => Promise<unknown>>;
  return unwrap(await results[control]());
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

function newRunId(): string {
  return `run_${crypto.randomUUID().replaceAll("-", "")}`;
}

/** The same (workflow, key) always names the same run, so a retried start finds it. */
async function idempotentRunId(workflowId: string, key: string): Promise<string> {
  return `run_${(await sha256Hex(`${workflowId}\n${key}`)).slice(0, 32)}`;
}

async function sha256Hex(text: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}
