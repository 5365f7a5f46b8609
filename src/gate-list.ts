import type { z } from "zod";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { OpenGate, OpenGateList } from "../schemas/api.ts";
import { ListGatesQuery, RunIndexRow } from "../schemas/run-index.ts";
import { RunStatus } from "../schemas/run.ts";
import { decodeCursor, encodeCursor, grantCondition } from "./run-list.ts";
import { listGates } from "./service.ts";

/** Runs per page of `GET /v1/gates` when the query names no `limit`. */
export const DEFAULT_GATE_RUNS_PAGE = 20;

/** What the listing reads of an index row. */
const GatedRun = RunIndexRow.pick({
  run_id: true,
  workflow_id: true,
  workflow_version: true,
  created_at: true,
}).extend({
  // A run with open gates has not ended, let alone been deleted (its deleted row has no open gates).
  status: RunStatus,
});
type GatedRun = z.infer<typeof GatedRun>;

/**
 * `GET /v1/gates?status=open`: the open gates of every run, newest run first
 * ("waiting for me"). The run index (D1) names the runs that have open gates
 * (its `open_gates` column, written with each index row); a page takes up to
 * `limit` of them, keyset-paged by (created_at, run_id) as `GET /v1/runs`,
 * and reads each one's gates from its coordinator, keeping those still open.
 * The index trails its runs by a moment: a run whose gates were just answered
 * adds none, and one whose gate just opened shows up on the next read.
 */
export async function listOpenGates(
  env: Env,
  rawQuery: unknown,
  grant: readonly string[] | null,
): Promise<OpenGateList> {
  const query = parseOrThrow(ListGatesQuery, rawQuery, "request.invalid_query", "the query");
  const limit = query.limit ?? DEFAULT_GATE_RUNS_PAGE;
  const runs = await gatedRuns(env.RUN_INDEX, limit, query.cursor, grant);
  const page = runs.slice(0, limit);
  const gates = await Promise.all(page.map((run) => openGatesOf(env, run)));
  const last = page.at(-1);
  return {
    gates: gates.flat(),
    next_cursor: runs.length > limit && last ? encodeCursor([last.created_at, last.run_id]) : null,
  };
}

/**
 * Up to `limit + 1` runs with open gates, after the cursor's run (the extra
 * one says whether a page follows), of the workflows of `grant` (null: all).
 */
async function gatedRuns(
  db: D1Database,
  limit: number,
  cursor: string | undefined,
  grant: readonly string[] | null,
): Promise<GatedRun[]> {
  const after = cursor === undefined ? null : decodeCursor(cursor);
  const granted = grant === null ? null : grantCondition(grant);
  const sql = `SELECT run_id, workflow_id, workflow_version, status, created_at FROM runs
    WHERE open_gates > 0${after === null ? "" : " AND (created_at < ? OR (created_at = ? AND run_id < ?))"}
    ${granted === null ? "" : `AND ${granted.condition}`}
    ORDER BY created_at DESC, run_id DESC LIMIT ?`;
  const params = [...(after === null ? [] : [after[0], after[0], after[1]]), ...(granted?.params ?? []), limit + 1];
  let rows: unknown[];
  try {
    rows = (
      await db
        .prepare(sql)
        .bind(...params)
        .all()
    ).results;
  } catch (error) {
    throw new EngineError("index.unavailable", `the run index cannot be read: ${ensureEngineError(error).message}`, {
      retryable: true,
    });
  }
  return rows.map((row) => GatedRun.parse(row));
}

/** The run's gates that are open now, each with the run it belongs to. */
async function openGatesOf(env: Env, run: GatedRun): Promise<OpenGate[]> {
  const { gates } = await listGates(env, run.run_id);
  return gates
    .filter((gate) => gate.status === "open")
    .map((gate) => ({
      ...gate,
      run_id: run.run_id,
      workflow: { id: run.workflow_id, version: run.workflow_version },
      run_status: run.status,
    }));
}
