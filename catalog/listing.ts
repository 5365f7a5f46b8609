import { EngineError } from "../lib/errors.ts";
import type { DefinitionList, DefinitionListCursor, DefinitionSummary, DefinitionVersions } from "../schemas/api.ts";
import type { DefinitionKind } from "../schemas/definitions.ts";
import { ExposedWorkflow, MAX_EXPOSED_WORKFLOWS } from "../schemas/mcp.ts";

/** A page request as the catalog takes it: the cursor already decoded and checked by the API. */
export interface ListPage {
  kind: DefinitionKind;
  after: DefinitionListCursor | undefined;
  limit: number;
  /** Of workflows, only those whose id matches one of these patterns (a token's grant; absent: all). */
  grant?: readonly string[];
}

interface SummaryRow extends Record<string, SqlStorageValue> {
  id: string;
  version: number;
  created_at: string;
  description: string | null;
}

// `json_extract` reads the one small field a listing shows without parsing whole bodies.
const SUMMARY_COLUMNS = "id, version, created_at, json_extract(body, '$.description') AS description";

/**
 * The latest version of each definition of a kind, newest first (by the
 * latest version's `created_at`, ties by id, both descending). The cursor is
 * the last item of the previous page; `limit + 1` rows tell whether there is
 * a next page.
 */
export function listLatest(sql: SqlStorage, page: ListPage): DefinitionList {
  const after = page.after && "created_at" in page.after ? page.after : undefined;
  // A token's grant keeps the workflows it matches (`GLOB`: a pattern holds only an id's characters and `*`).
  const grant = page.kind === "workflows" && page.grant !== undefined ? page.grant : null;
  const granted = grant === null ? "" : `AND (0${grant.map(() => " OR id GLOB ?").join("")})`;
  const rows = sql
    .exec<SummaryRow>(
      `SELECT ${SUMMARY_COLUMNS} FROM definitions AS d
       WHERE kind = ? AND version = (SELECT MAX(version) FROM definitions WHERE kind = d.kind AND id = d.id)
         AND (? IS NULL OR created_at < ? OR (created_at = ? AND id < ?)) ${granted}
       ORDER BY created_at DESC, id DESC LIMIT ?`,
      page.kind,
      after?.created_at ?? null,
      after?.created_at ?? null,
      after?.created_at ?? null,
      after?.id ?? null,
      ...(grant ?? []),
      page.limit + 1,
    )
    .toArray();
  const items = rows.slice(0, page.limit).map((row) => toSummary(page.kind, row));
  const last = items.at(-1);
  return {
    definitions: items,
    next_cursor:
      rows.length > page.limit && last
        ? encodeCursor({ kind: page.kind, created_at: last.created_at, id: last.id })
        : null,
  };
}

/** Every version of one definition, highest first; `definition.not_found` when the id has none. */
export function listVersions(sql: SqlStorage, page: ListPage & { id: string }): DefinitionVersions {
  const before = page.after && "version" in page.after ? page.after.version : null;
  const rows = sql
    .exec<SummaryRow>(
      `SELECT ${SUMMARY_COLUMNS} FROM definitions
       WHERE kind = ? AND id = ? AND (? IS NULL OR version < ?)
       ORDER BY version DESC LIMIT ?`,
      page.kind,
      page.id,
      before,
      before,
      page.limit + 1,
    )
    .toArray();
  if (rows.length === 0 && !hasAnyVersion(sql, page.kind, page.id)) {
    throw EngineError.terminal("definition.not_found", `"${page.id}" is not registered under ${page.kind}`);
  }
  const items = rows.slice(0, page.limit).map((row) => toSummary(page.kind, row));
  const last = items.at(-1);
  return {
    versions: items,
    next_cursor:
      rows.length > page.limit && last ? encodeCursor({ kind: page.kind, id: page.id, version: last.version }) : null,
  };
}

function hasAnyVersion(sql: SqlStorage, kind: DefinitionKind, id: string): boolean {
  return sql.exec("SELECT 1 FROM definitions WHERE kind = ? AND id = ? LIMIT 1", kind, id).toArray().length > 0;
}

function toSummary(kind: DefinitionKind, row: SummaryRow): DefinitionSummary {
  return {
    kind,
    id: row.id,
    version: row.version,
    created_at: row.created_at,
    ...(typeof row.description === "string" ? { description: row.description } : {}),
  };
}

/** Cursors are base64url JSON: opaque to clients, checked on the way back in (src/service.ts). */
export function encodeCursor(cursor: DefinitionListCursor): string {
  const bytes = new TextEncoder().encode(JSON.stringify(cursor));
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

/** The JSON inside a cursor, or undefined when it is not base64url of JSON (the caller's schema says the rest). */
export function decodeCursor(text: string): unknown {
  if (!/^[A-Za-z0-9_-]+$/.test(text)) {
    return undefined;
  }
  try {
    const binary = atob(text.replaceAll("-", "+").replaceAll("_", "/"));
    const bytes = Uint8Array.from(binary, (char) => char.charCodeAt(0));
    return JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(bytes)) as unknown;
  } catch {
    return undefined;
  }
}

/**
 * The latest version of each workflow whose `mcp.expose` is true, by id, at
 * most {@link MAX_EXPOSED_WORKFLOWS}; of `grant`'s workflows when given (a
 * token's grant, as {@link listLatest} reads it). `id` keeps that one only.
 */
export function listExposed(sql: SqlStorage, grant: readonly string[] | null, id?: string): ExposedWorkflow[] {
  const granted = grant === null ? "" : `AND (0${grant.map(() => " OR id GLOB ?").join("")})`;
  const rows = sql
    .exec<{ id: string; version: number; body: string }>(
      `SELECT id, version, body FROM definitions AS d
       WHERE kind = 'workflows' AND (? IS NULL OR id = ?)
         AND version = (SELECT MAX(version) FROM definitions WHERE kind = d.kind AND id = d.id)
         AND json_extract(body, '$.mcp.expose') = 1 ${granted}
       ORDER BY id LIMIT ?`,
      id ?? null,
      id ?? null,
      ...(grant ?? []),
      MAX_EXPOSED_WORKFLOWS,
    )
    .toArray();
  return rows.map((row) => {
    const body = JSON.parse(row.body) as Record<string, unknown>;
    return ExposedWorkflow.parse({
      id: row.id,
      version: row.version,
      description: body.description,
      mcp: body.mcp,
      input_schema: body.input_schema,
      output_schema: body.output_schema,
    });
  });
}
