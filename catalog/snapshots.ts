import { setBounded } from "../lib/bounded-cache.ts";
import { EngineError } from "../lib/errors.ts";
import { unwrap, type Result } from "../lib/result.ts";
import { ResolvedRun, type RunSnapshot } from "../schemas/resolved.ts";
import type { Catalog } from "./catalog.ts";

/**
 * Run snapshots without the catalog object in the way (docs/architecture.md,
 * "What a run start costs").
 *
 * A resolution is a pure function of the catalog's content. Pinned versions
 * never change, so what can make a cached snapshot stale is only an `"id"`
 * reference (latest) that now names a newer version. Each cached resolution
 * keeps the `"id"` references it read (`floating`) with the versions found:
 * - none (every reference pinned or inline, and the start names a version):
 *   the snapshot is served from cache and the catalog is not called at all;
 * - some (or a start that names no version): the catalog is shown them and
 *   checks them, one indexed read each, no definition parsed; the cached
 *   snapshot is served when none moved, else the same call resolves anew.
 * Never more than one catalog request per start (a child start's budget of
 * calls per event counts on it: docs/architecture.md).
 * So a registration is seen by the next start (read-your-writes), and a
 * catalog outage stops only starts that depend on "latest".
 *
 * Two layers: this isolate's memory, then a named Cache API cache shared by
 * the isolates of a data center. Cache failures are misses, never errors.
 */

/** How many resolutions one isolate keeps, and the largest it keeps (characters of JSON). */
const ISOLATE_LIMIT = 100;
const ISOLATE_MAX_CHARS = 100_000;
/**
 * A named cache, not `caches.default`: it is not the cache `fetch` and the
 * zone's CDN read, so no request from outside can be answered from it.
 */
const SHARED_CACHE_NAME = "trellis:snapshots";
const SHARED_TTL_S = 86_400;

/**
 * This isolate's resolutions by cache key. Module scope on purpose: an
 * isolate serves many requests and objects, and a resolution is valid for all
 * of them (it is re-checked against the catalog whenever it read a floating
 * reference). Exported for tests, which clear it to reach the shared layer.
 */
export const ISOLATE_SNAPSHOTS = new Map<string, ResolvedRun>();

type CatalogApi = Pick<Catalog, "resolveRun" | "resolvePlan">;

function catalog(env: Env): CatalogApi {
  return env.CATALOG.get(env.CATALOG.idFromName("catalog")) as unknown as CatalogApi;
}

/**
 * The snapshot a run starting now keeps: `workflowId` at `version` (the
 * latest when undefined), served from cache when it is certainly current.
 * A cached snapshot is shared: callers read it and send it over RPC (which
 * copies it), never change it.
 */
export async function resolveSnapshot(env: Env, workflowId: string, version?: number): Promise<RunSnapshot> {
  const key = cacheKey(env, workflowId, version);
  const cached = await readCached(key);
  if (cached && cached.floating.length === 0) {
    return cached.snapshot;
  }
  // One request in every other case: the catalog checks the cached resolution's `"id"` references, or resolves.
  const answer = unwrap(await catalog(env).resolveRun(workflowId, version, cached?.floating));
  if ("current" in answer) {
    if (!cached) {
      throw new EngineError("internal.error", "the catalog called a resolution current that it was not shown");
    }
    return cached.snapshot;
  }
  const { snapshot } = answer;
  // The resolution of the version found, valid for starts that pin it...
  await remember(cacheKey(env, workflowId, snapshot.workflow.version), answer);
  if (version === undefined) {
    // ...and for starts that name no version, while it stays the latest.
    const own = { kind: "workflows" as const, id: workflowId, version: snapshot.workflow.version };
    await remember(key, { snapshot, floating: [own, ...answer.floating] });
  }
  return snapshot;
}

/**
 * The snapshot of a workflow a plan compiled to (Catalog.resolvePlan): never
 * cached, a plan being one run's; the catalog checks and resolves it each time.
 */
export async function resolvePlanSnapshot(env: Env, workflow: unknown): Promise<Result<RunSnapshot>> {
  return catalog(env).resolvePlan(workflow);
}

/**
 * {@link resolveSnapshot} with the catalog's answers as a Result, as a run
 * starting a child expects them; a platform failure (the catalog object
 * unreachable) still throws, so the caller tells the two apart as before.
 */
export async function resolveSnapshotResult(
  env: Env,
  workflowId: string,
  version?: number,
): Promise<Result<RunSnapshot>> {
  try {
    return { ok: true, value: await resolveSnapshot(env, workflowId, version) };
  } catch (thrown) {
    if (thrown instanceof EngineError) {
      return { ok: false, error: thrown.toData() };
    }
    throw thrown;
  }
}

/**
 * Keyed by the catalog object's id (another Worker's catalog is another
 * namespace) and this deployment's version id (a deploy may change what a
 * snapshot holds; `wrangler dev` and tests get a fresh id each start). Without
 * the version metadata binding there is no shared layer.
 */
function cacheKey(env: Env, workflowId: string, version: number | undefined): CacheKey {
  const catalogId = env.CATALOG.idFromName("catalog").toString();
  const deployment = env.CF_VERSION_METADATA?.id;
  const url = `https://snapshots.trellis.internal/${catalogId}/${deployment ?? "-"}/${encodeURIComponent(workflowId)}/${version ?? "latest"}`;
  return { url, shared: deployment !== undefined && typeof caches !== "undefined" };
}

interface CacheKey {
  url: string;
  /** Whether the shared layer may be used: only with a deployment identity in the key. */
  shared: boolean;
}

async function readCached(key: CacheKey): Promise<ResolvedRun | undefined> {
  const local = ISOLATE_SNAPSHOTS.get(key.url);
  if (local) {
    return local;
  }
  const text = key.shared ? await sharedGet(key.url) : undefined;
  const parsed = text === undefined ? undefined : parseCached(text);
  if (text !== undefined && parsed) {
    keepInIsolate(key.url, parsed, text.length);
  }
  return parsed;
}

/** A shared entry, parsed like anything read from storage: a bad one is a miss. */
function parseCached(text: string): ResolvedRun | undefined {
  try {
    const parsed = ResolvedRun.safeParse(JSON.parse(text));
    return parsed.success ? parsed.data : undefined;
  } catch {
    return undefined;
  }
}

async function remember(key: CacheKey, resolved: ResolvedRun): Promise<void> {
  const text = JSON.stringify(resolved);
  keepInIsolate(key.url, resolved, text.length);
  if (key.shared) {
    await sharedPut(key.url, text);
  }
}

function keepInIsolate(url: string, resolved: ResolvedRun, chars: number): void {
  if (chars <= ISOLATE_MAX_CHARS) {
    setBounded(ISOLATE_SNAPSHOTS, url, resolved, ISOLATE_LIMIT);
  }
}

async function sharedGet(url: string): Promise<string | undefined> {
  try {
    const response = await (await caches.open(SHARED_CACHE_NAME)).match(url);
    return response ? await response.text() : undefined;
  } catch {
    // The cache is an optimisation: unavailable (workers.dev, Access) or failing means a miss.
    return undefined;
  }
}

async function sharedPut(url: string, text: string): Promise<void> {
  try {
    const headers = { "content-type": "application/json", "cache-control": `max-age=${SHARED_TTL_S}` };
    await (await caches.open(SHARED_CACHE_NAME)).put(url, new Response(text, { headers }));
  } catch {
    // Not cached this time; the next start resolves again.
  }
}
