import {
  ErrorCode,
  McpError,
  RELATED_TASK_META_KEY,
  type CallToolResult,
  type Task,
} from "@modelcontextprotocol/sdk/types.js";
import { isTerminal } from "../../coordinator/lifecycle.ts";
import { EngineError, ensureEngineError } from "../../lib/errors.ts";
import type { RunView } from "../../schemas/api.ts";
import { byOf } from "../../schemas/auth.ts";
import { errorBody } from "../errors.ts";
import { accessOf, assertRunVisible, authorize } from "../access.ts";
import { listRuns } from "../run-list.ts";
import { controlRun, exposedWorkflows, getRun, settleRun } from "../service.ts";
import { toElicitation } from "./elicitation.ts";
import { DEFAULT_WAIT_MS } from "./follow.ts";
import { runResult } from "./results.ts";
import { toToolOutputSchema } from "./schema-map.ts";
import type { ToolContext } from "./tools.ts";

/**
 * MCP tasks (docs/mcp.md, "Tasks"): a workflow tool called with `params.task`
 * answers at once with a task whose id is the run's id, and the task is the
 * run, read afresh by every request: `tasks/get` is the run's status,
 * `tasks/result` waits for the run to end and answers the tool's result,
 * `tasks/cancel` cancels the run, `tasks/list` lists the caller's runs. The
 * server keeps nothing: each request checks its own caller's role and grant,
 * as the API twin of each (`getRun`, `cancelRun`, `listRuns`) does.
 */

/** How often a client should ask `tasks/get`, in ms. */
export const TASK_POLL_INTERVAL_MS = 3_000;
/** The longest `tasks/result` holds its request before it answers that the run has not ended. */
export const TASK_RESULT_WAIT_MS = 10 * 60_000;
/** Tasks per page of `tasks/list`. */
export const TASK_PAGE = 20;

/** What a task request knows of its request. */
export type TaskContext = Pick<ToolContext, "env" | "principal" | "origin" | "session" | "ask">;

/** The task status of a run: its end, `input_required` while a gate is open, else `working`. */
export function toTaskStatus(view: Pick<RunView, "status" | "gates">): Task["status"] {
  if (view.status === "completed" || view.status === "failed" || view.status === "cancelled") {
    return view.status;
  }
  return view.gates.some((gate) => gate.status === "open") ? "input_required" : "working";
}

/** A run as a task: its id, status, times, and what it waits for or why it failed. */
export function toTask(view: RunView): Task {
  const open = view.gates.filter((gate) => gate.status === "open");
  const message =
    view.error !== undefined && view.error !== null
      ? `${view.error.code}: ${view.error.message}`
      : open.length > 0
        ? `needs input: ${open.map((gate) => `gate ${gate.gate_id}: ${gate.prompt}`).join("; ")}; ` +
          `answer with trellis_answer_gate, or ask trellis_wait_run for the gates and an approval link`
        : `run ${view.status}`;
  return {
    taskId: view.run_id,
    status: toTaskStatus(view),
    statusMessage: message,
    createdAt: view.created_at,
    lastUpdatedAt: view.updated_at,
    ttl: null,
    ...(isTerminal(view.status) ? {} : { pollInterval: TASK_POLL_INTERVAL_MS }),
  };
}

/** An error of the API as a task request's JSON-RPC error (`-32602`), with the API's error body as its data. */
export function taskRequestError(thrown: unknown): McpError {
  const error = ensureEngineError(thrown);
  const shown = error.code === "internal.error" ? new EngineError("internal.error", "internal error") : error;
  const problems = (shown.details ?? []).map((detail) => `${detail.path || "(input)"}: ${detail.message}`);
  return new McpError(
    ErrorCode.InvalidParams,
    [`${shown.code}: ${shown.message}`, ...problems].join("\n"),
    errorBody(shown),
  );
}

/** The run a task request names, through `operation`'s checks (role, and the run visible to the caller). */
async function taskRun(context: TaskContext, taskId: string, operation: string): Promise<RunView> {
  try {
    authorize(context.principal, accessOf(operation));
    await assertRunVisible(context.env, context.principal, taskId);
    return await getRun(context.env, taskId);
  } catch (thrown) {
    throw taskRequestError(thrown);
  }
}

/** `tasks/get`: the run as a task (the role `reader`, as `GET /v1/runs/{run_id}`). */
export async function getTask(context: TaskContext, taskId: string): Promise<Task> {
  return toTask(await taskRun(context, taskId, "getRun"));
}

/**
 * `tasks/cancel`: cancels the run (the role `runner`, as `POST
 * /v1/runs/{run_id}/cancel`); a run that ended is `-32602`.
 */
export async function cancelTask(context: TaskContext, taskId: string): Promise<Task> {
  const view = await taskRun(context, taskId, "cancelRun");
  if (isTerminal(view.status)) {
    throw new McpError(ErrorCode.InvalidParams, `Cannot cancel task ${taskId}: its run is already ${view.status}`);
  }
  try {
    const reason = "cancelled through MCP tasks/cancel";
    return toTask(await controlRun(context.env, taskId, "cancel", reason, byOf(context.principal)));
  } catch (thrown) {
    throw taskRequestError(thrown);
  }
}

/**
 * `tasks/list`: the runs the caller started through the API or MCP (the
 * run index's `created_by`, trigger `api`), newest first, as tasks; the
 * role `reader` and the caller's grant, as `GET /v1/runs`.
 */
export async function listTasks(
  context: TaskContext,
  cursor: string | undefined,
): Promise<{ tasks: Task[]; nextCursor?: string }> {
  try {
    authorize(context.principal, accessOf("listRuns"));
    const query = { trigger: "api", limit: String(TASK_PAGE), ...(cursor === undefined ? {} : { cursor }) };
    const page = await listRuns(
      context.env.RUN_INDEX,
      query,
      context.principal.workflows,
      context.principal.created_by,
    );
    const views = await Promise.all(page.runs.map((run) => getRun(context.env, run.run_id)));
    return { tasks: views.map(toTask), ...(page.next_cursor === null ? {} : { nextCursor: page.next_cursor }) };
  } catch (thrown) {
    throw taskRequestError(thrown);
  }
}

/**
 * `tasks/result`: waits for the run to end, then answers what the workflow
 * tool would have (its output, or its error as an error result), with the
 * task named in `_meta`. While a gate is open it asks it through elicitation,
 * once, when the client declared it; either way it waits on (the person may
 * answer through a link, the console or another client). After
 * `TASK_RESULT_WAIT_MS` (or once the request is aborted) it answers `-32001`.
 */
export async function taskResult(context: TaskContext, taskId: string, signal: AbortSignal): Promise<CallToolResult> {
  const started = await taskRun(context, taskId, "getRun");
  const deadline = Date.now() + TASK_RESULT_WAIT_MS;
  const asked: string[] = [];
  let view = started;
  while (!isTerminal(view.status)) {
    if (signal.aborted || Date.now() >= deadline) {
      throw new McpError(
        ErrorCode.RequestTimeout,
        `run ${taskId} has not ended (status ${view.status}): ask tasks/result again, or follow tasks/get`,
      );
    }
    await askOpenGates(context, view, asked);
    view = await settleRun(context.env, taskId, Math.min(DEFAULT_WAIT_MS, deadline - Date.now()), asked);
  }
  const [workflow] = await exposedWorkflows(context.env, context.principal.workflows, view.workflow.id);
  const outputSchema = toToolOutputSchema(workflow?.output_schema);
  const result = runResult(view, { origin: context.origin, outputSchema, waitedSeconds: 0, asked: [] });
  return { ...result, _meta: { ...result._meta, [RELATED_TASK_META_KEY]: { taskId } } };
}

/** Asks each open gate not asked yet through elicitation (when the client takes forms and the caller may answer), and counts it asked. */
async function askOpenGates(context: TaskContext, view: RunView, asked: string[]): Promise<void> {
  const fresh = view.gates.filter((gate) => gate.status === "open" && !asked.includes(gate.gate_id));
  for (const gate of fresh) {
    const request = context.session.elicitation ? toElicitation(view.run_id, gate, context.principal) : null;
    if (request !== null) {
      await context.ask({
        ...request,
        params: { ...request.params, _meta: { [RELATED_TASK_META_KEY]: { taskId: view.run_id } } },
      });
    }
    asked.push(gate.gate_id);
  }
}
