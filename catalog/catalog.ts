import { DurableObject } from "cloudflare:workers";
import { EngineError } from "../lib/errors.ts";
import { canonicalJson } from "../lib/journal/canonical.ts";
import { toResult, type Result } from "../lib/result.ts";
import { declaredEnvNames } from "../lib/secrets.ts";
import { issuesToDetails } from "../lib/validation.ts";
import type { DefinitionList, DefinitionRecord, DefinitionVersions, RegisterResponse } from "../schemas/api.ts";
import {
  DEFINITION_KINDS,
  Workflow,
  type DefinitionBundle,
  type DefinitionKind,
  type TriggerList,
} from "../schemas/definitions.ts";
import { EventName } from "../schemas/events.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { DefinitionPointer, ResolvedRun, RunSnapshot } from "../schemas/resolved.ts";
import type { TokenList, TokenRecord } from "../schemas/auth.ts";
import type { ExposedWorkflow } from "../schemas/mcp.ts";
import { z } from "zod";
import { listExposed, listLatest, listVersions, type ListPage } from "./listing.ts";
import {
  resolveRunSnapshot,
  resolveWorkflowSnapshot,
  type DefinitionReader,
  type StoredDefinition,
} from "./resolve.ts";
import type { DefinitionLookup } from "./checks.ts";
import { mappingWarnings, parseBundle } from "./teach.ts";
import { TokenTable } from "./tokens.ts";
import { checkTriggerLimits, TriggerIndex } from "./triggers.ts";
import { checkBundle, checkReservedMappingKeys } from "./validate.ts";

/** `exposedWorkflows`' arguments, as they cross RPC. */
const ExposedQuery = z.strictObject({ grant: z.array(z.string()).nullable(), id: z.string().optional() });
/** What `resolveRun` answers: a resolution, or that the cached one it was shown is still current. */
export type Resolution = ResolvedRun | { current: true };

interface DefinitionRow extends Record<string, SqlStorageValue> {
  version: number;
  body: string;
  created_at: string;
}

/**
 * The definition catalog: one Durable Object whose SQLite holds every version
 * of every definition. Versions are immutable; registering content identical
 * to the latest version of an id returns that version.
 */
export class Catalog extends DurableObject<Env> {
  private readonly sql: SqlStorage;
  private readonly triggers: TriggerIndex;
  private readonly tokens: TokenTable;

  constructor(ctx: DurableObjectState, env: Env) {
    super(ctx, env);
    this.sql = ctx.storage.sql;
    this.triggers = new TriggerIndex(this.sql);
    this.tokens = new TokenTable(this.sql);
    this.sql.exec(`CREATE TABLE IF NOT EXISTS definitions (
      kind TEXT NOT NULL, id TEXT NOT NULL, version INTEGER NOT NULL,
      body TEXT NOT NULL, created_at TEXT NOT NULL,
      PRIMARY KEY (kind, id, version))`);
  }

  /** Validates a whole bundle and stores it atomically: all of it, or none with every problem listed. */
  async register(body: unknown): Promise<Result<RegisterResponse>> {
    return toResult(() => {
      const reserved = checkReservedMappingKeys(body);
      if (reserved.length > 0) {
        throw EngineError.terminal(
          "definition.invalid",
          `the definition bundle is invalid: ${reserved.length} problem(s)`,
          reserved,
        );
      }
      const check = (parsed: DefinitionBundle) => checkBundle(parsed, this.lookup(), declaredEnvNames(this.env));
      const bundle = parseBundle(body, check);
      const problems = [...check(bundle), ...checkTriggerLimits(bundle, this.triggers)];
      if (problems.length > 0) {
        throw EngineError.terminal(
          "definition.invalid",
          `the definition bundle is invalid: ${problems.length} problem(s)`,
          problems,
        );
      }
      const now = new Date().toISOString();
      const warnings = mappingWarnings(bundle);
      return this.ctx.storage.transactionSync(() => ({
        created: this.storeBundle(bundle, now),
        ...(warnings.length > 0 ? { warnings } : {}),
      }));
    });
  }

  /** One definition: the latest version, or `version`. */
  async get(kind: DefinitionKind, id: string, version?: number): Promise<Result<DefinitionRecord>> {
    return toResult(() => {
      const row = this.read(kind, id, version);
      if (!row) {
        const what = version === undefined ? `"${id}"` : `version ${version} of "${id}"`;
        throw EngineError.terminal("definition.not_found", `${what} is not registered under ${kind}`);
      }
      return {
        kind,
        id,
        version: row.version,
        created_at: row.created_at,
        definition: JSON.parse(row.body) as DefinitionRecord["definition"],
      };
    });
  }

  /** The latest version of each definition of a kind, a page at a time (catalog/listing.ts). */
  async list(page: ListPage): Promise<Result<DefinitionList>> {
    return toResult(() => listLatest(this.sql, page));
  }

  /**
   * The workflows exposed as MCP tools (catalog/listing.ts `listExposed`): of
   * `grant` (null: every workflow), or the one named `id` when it is exposed.
   */
  async exposedWorkflows(grant: readonly string[] | null, id?: string): Promise<Result<ExposedWorkflow[]>> {
    return toResult(() => {
      const asked = parseOrThrow(ExposedQuery, { grant, id }, "request.invalid_argument", "the exposed query");
      return listExposed(this.sql, asked.grant, asked.id);
    });
  }

  /** Every version of one definition, a page at a time. */
  async versions(page: ListPage & { id: string }): Promise<Result<DefinitionVersions>> {
    return toResult(() => listVersions(this.sql, page));
  }

  /**
   * The snapshot a new run keeps to its end, every reference resolved now,
   * with the `"id"` references it read (catalog/snapshots.ts caches it). An
   * unpinned start is resolved as the version that is latest now, so the
   * workflow's own pointer is not among them: the caller knows it was latest.
   *
   * `known`: the `"id"` references of a cached resolution. When each still
   * names the version it found, the answer is `{ current: true }` (one indexed
   * read per id, no definition parsed); else the resolution, as without it.
   * Either way one call, so a start costs at most one catalog request.
   */
  async resolveRun(workflowId: string, version?: number, known?: DefinitionPointer[]): Promise<Result<Resolution>> {
    return toResult(() => {
      if (
        known !== undefined &&
        known.every((pointer) => this.latestVersion(pointer.kind, pointer.id) === pointer.version)
      ) {
        return { current: true as const };
      }
      // Undefined only when nothing is registered: then the resolution fails with workflow.not_found.
      const pinned = version ?? this.latestVersion("workflows", workflowId);
      const floating: DefinitionPointer[] = [];
      const snapshot = resolveRunSnapshot(this.reader(floating), workflowId, pinned);
      return { snapshot, floating };
    });
  }

  private latestVersion(kind: DefinitionKind, id: string): number | undefined {
    const row = this.sql
      .exec<{ version: number | null }>(
        "SELECT MAX(version) AS version FROM definitions WHERE kind = ? AND id = ?",
        kind,
        id,
      )
      .toArray()[0];
    return row?.version ?? undefined;
  }

  /**
   * The snapshot of a workflow an agent plan compiled to (plans/compile.ts),
   * checked as a registration would check it (`plan.invalid` with the
   * problems' paths in the compiled workflow) and resolved as a run start
   * would resolve it, without storing it: a plan is a run's, not the catalog's.
   */
  async resolvePlan(workflow: unknown): Promise<Result<RunSnapshot>> {
    return toResult(() => {
      const compiled = Workflow.safeParse(workflow);
      if (!compiled.success) {
        throw EngineError.terminal(
          "plan.invalid",
          "the plan compiles to an invalid workflow",
          issuesToDetails(compiled.error.issues, "compiled"),
        );
      }
      const parsed = compiled.data;
      const problems = checkBundle({ workflows: [parsed] }, this.lookup(), declaredEnvNames(this.env));
      if (problems.length > 0) {
        throw EngineError.terminal(
          "plan.invalid",
          `the plan compiles to an invalid workflow: ${problems.length} problem(s)`,
          problems.map((problem) => ({ ...problem, path: problem.path.replace(/^workflows\.0\./, "compiled.") })),
        );
      }
      // Nothing floats in a plan's snapshot cache: it is never cached, so the pointers read are dropped.
      return resolveWorkflowSnapshot(this.reader([]), parsed, 1);
    });
  }

  /** The triggers of the latest workflow versions on one event name (catalog/triggers.ts): what an event hub starts. */
  async triggersFor(name: unknown): Promise<Result<TriggerList>> {
    return toResult(() =>
      this.triggers.triggersFor(parseOrThrow(EventName, name, "events.invalid_request", "the event name")),
    );
  }

  /** Stores a token made by `POST /v1/tokens` (catalog/tokens.ts). */
  async createToken(record: TokenRecord): Promise<Result<null>> {
    return toResult(() => {
      this.tokens.insert(record);
      return null;
    });
  }

  /** The stored tokens, never their hashes. */
  async listTokens(): Promise<Result<TokenList>> {
    return toResult(() => ({ tokens: this.tokens.list() }));
  }

  /** The token whose secret has this keyed hash, or null: what a request's bearer token resolves to. */
  async tokenByHash(hash: string): Promise<Result<TokenRecord | null>> {
    return toResult(() => this.tokens.byHash(hash));
  }

  /** Deletes a token (`token.not_found` when none has that id). */
  async revokeToken(tokenId: string): Promise<Result<null>> {
    return toResult(() => {
      this.tokens.delete(tokenId);
      return null;
    });
  }

  /** Stores each definition of a bundle; a new version of a workflow replaces its triggers in the index. */
  private storeBundle(bundle: DefinitionBundle, now: string): RegisterResponse["created"] {
    const created = DEFINITION_KINDS.flatMap((kind) =>
      (bundle[kind] ?? []).map((definition) => ({
        kind,
        id: definition.id,
        ...this.store(kind, definition.id, definition, now),
      })),
    );
    for (const workflow of bundle.workflows ?? []) {
      const stored = created.find((entry) => entry.kind === "workflows" && entry.id === workflow.id);
      if (stored !== undefined && !stored.existing) {
        this.triggers.replace(workflow, stored.version);
      }
    }
    return created;
  }

  private store(
    kind: DefinitionKind,
    id: string,
    definition: unknown,
    now: string,
  ): { version: number; existing: boolean } {
    const body = canonicalJson(definition);
    const latest = this.read(kind, id, undefined);
    if (latest?.body === body) {
      return { version: latest.version, existing: true };
    }
    const version = (latest?.version ?? 0) + 1;
    this.sql.exec(
      "INSERT INTO definitions (kind, id, version, body, created_at) VALUES (?, ?, ?, ?, ?)",
      kind,
      id,
      version,
      body,
      now,
    );
    return { version, existing: false };
  }

  private read(kind: DefinitionKind, id: string, version: number | undefined): DefinitionRow | undefined {
    const cursor =
      version === undefined
        ? this.sql.exec<DefinitionRow>(
            "SELECT version, body, created_at FROM definitions WHERE kind = ? AND id = ? ORDER BY version DESC LIMIT 1",
            kind,
            id,
          )
        : this.sql.exec<DefinitionRow>(
            "SELECT version, body, created_at FROM definitions WHERE kind = ? AND id = ? AND version = ?",
            kind,
            id,
            version,
          );
    return cursor.toArray()[0];
  }

  private lookup(): DefinitionLookup {
    return {
      exists: (kind, id, version) => this.read(kind, id, version) !== undefined,
      read: (kind, id, version) => {
        const row = this.read(kind, id, version);
        return row === undefined ? undefined : (JSON.parse(row.body) as unknown);
      },
    };
  }

  /** Reads for a resolution; each `"id"` (latest) read that finds a definition is noted in `floating`. */
  private reader(floating: DefinitionPointer[]): DefinitionReader {
    return {
      read: (kind, id, version): StoredDefinition | undefined => {
        const row = this.read(kind, id, version);
        if (row && version === undefined && !floating.some((seen) => seen.kind === kind && seen.id === id)) {
          floating.push({ kind, id, version: row.version });
        }
        return row ? { version: row.version, definition: JSON.parse(row.body) as unknown } : undefined;
      },
    };
  }
}
