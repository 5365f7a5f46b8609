import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { RunList, RunSummary } from "../schemas/api.ts";
import { parseReference } from "../schemas/common.ts";
import { ListRunsQuery, RunCursor, RunIndexRow } from "../schemas/run-index.ts";

/** Runs per page when the query names no `limit`. */
export const DEFAULT_RUNS_PAGE = 20;

/**
 * `GET /v1/runs`: a page of the run index (D1), newest first, by
 * (created_at, run_id) descending. The cursor is that pair for the last run
 * of the page before, base64url-encoded JSON: opaque to clients, checked when
 * it comes back. Pages are keyset pages, so a run created meanwhile never
 * shifts a page: no duplicates and no gaps across pages. `grant` (a token's
 * workflows, null for every workflow) leaves out the runs of other workflows;
 * `createdBy` (not a query parameter: the MCP server's `tasks/list`) keeps
 * the runs that principal started.
 */
export async function listRuns(
  db: D1Database,
  rawQuery: unknown,
  grant: readonly string[] | null,
  createdBy?: string,
): Promise<RunList> {
  const query = parseOrThrow(ListRunsQuery, rawQuery, "request.invalid_query", "the query");
  const limit = query.limit ?? DEFAULT_RUNS_PAGE;
  const { where, params } = toWhere(query);
  if (createdBy !== undefined) {
    where.push("created_by = ?");
    params.push(createdBy);
  }
  if (grant !== null) {
    const granted = grantCondition(grant);
    where.push(granted.condition);
    params.push(...granted.params);
  }
  const sql = `SELECT * FROM runs${where.length > 0 ? ` WHERE ${where.join(" AND ")}` : ""}
    ORDER BY created_at DESC, run_id DESC LIMIT ?`;
  let rows: unknown[];
  try {
    rows = (
      await db
        .prepare(sql)
        .bind(...params, limit + 1)
        .all()
    ).results;
  } catch (error) {
    throw new EngineError("index.unavailable", `the run index cannot be read: ${ensureEngineError(error).message}`, {
      retryable: true,
    });
  }
  const page = rows.slice(0, limit).map((row) => RunIndexRow.parse(row));
  const last = page.at(-1);
  return {
    runs: page.map(toRunSummary),
    next_cursor: rows.length > limit && last ? encodeCursor([last.created_at, last.run_id]) : null,
  };
}

/**
 * The SQL condition that keeps the runs of a token's grant of workflows
 * (docs/security.md, "Roles"): each pattern a `GLOB` (its characters are an
 * id's and `*`, schemas/auth.ts `WorkflowPattern`, so nothing else in it is special).
 */
export function grantCondition(grant: readonly string[]): { condition: string; params: string[] } {
  if (grant.length === 0) {
    return { condition: "0", params: [] };
  }
  return { condition: `(${grant.map(() => "workflow_id GLOB ?").join(" OR ")})`, params: [...grant] };
}

/** The SQL conditions and their parameters for the query's filters and cursor. */
function toWhere(query: ListRunsQuery): { where: string[]; params: (string | number)[] } {
  const where: string[] = [];
  const params: (string | number)[] = [];
  const add = (condition: string, ...values: (string | number)[]) => {
    where.push(condition);
    params.push(...values);
  };
  const workflow = query.workflow === undefined ? undefined : parseReference(query.workflow);
  if (workflow) {
    add("workflow_id = ?", workflow.id);
    if (workflow.version !== undefined) {
      add("workflow_version = ?", workflow.version);
    }
  }
  if (query.status) {
    add(`status IN (${query.status.map(() => "?").join(", ")})`, ...query.status);
  }
  if (query.parent !== undefined) {
    add("parent_run_id = ?", query.parent);
  }
  if (query.trigger !== undefined) {
    add("trigger_kind = ?", query.trigger);
  }
  if (query.created_after !== undefined) {
    add("created_at > ?", Date.parse(query.created_after));
  }
  if (query.created_before !== undefined) {
    add("created_at < ?", Date.parse(query.created_before));
  }
  if (query.cursor !== undefined) {
    const [createdAt, runId] = decodeCursor(query.cursor);
    add("(created_at < ? OR (created_at = ? AND run_id < ?))", createdAt, createdAt, runId);
  }
  return { where, params };
}

function toRunSummary(row: RunIndexRow): RunSummary {
  return {
    run_id: row.run_id,
    workflow: { id: row.workflow_id, version: row.workflow_version },
    status: row.status,
    mode: row.mode,
    parent: row.parent_run_id,
    created_by: row.created_by,
    trigger: row.trigger_kind,
    created_at: new Date(row.created_at).toISOString(),
    updated_at: new Date(row.updated_at).toISOString(),
    finished_at: row.finished_at === null ? null : new Date(row.finished_at).toISOString(),
    deleted_at: row.deleted_at === null ? null : new Date(row.deleted_at).toISOString(),
    error: row.error_code === null ? null : { code: row.error_code, message: row.error_message ?? "" },
  };
}

export function encodeCursor(cursor: RunCursor): string {
  const bytes = new TextEncoder().encode(JSON.stringify(cursor));
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}

/** The (created_at, run_id) a cursor holds; anything this API did not hand out is a 400. */
export function decodeCursor(cursor: string): RunCursor {
  const invalid = () =>
    EngineError.terminal("request.invalid_cursor", "the cursor is not one this API handed out", [
      { path: "cursor", message: "not a cursor from next_cursor", code: "request.invalid_cursor" },
    ]);
  if (!/^[A-Za-z0-9_-]+$/.test(cursor)) {
    throw invalid();
  }
  let decoded: unknown;
  try {
    const binary = atob(cursor.replaceAll("-", "+").replaceAll("_", "/"));
    decoded = JSON.parse(
      new TextDecoder("utf-8", { fatal: true, ignoreBOM: false }).decode(
        Uint8Array.from(binary, (c) => c.charCodeAt(0)),
      ),
    );
  } catch {
    throw invalid();
  }
  const parsed = RunCursor.safeParse(decoded);
  if (!parsed.success) {
    throw invalid();
  }
  return parsed.data;
}
