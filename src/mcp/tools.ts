import type { CallToolResult, JSONRPCRequest, Tool, ToolAnnotations } from "@modelcontextprotocol/sdk/types.js";
import { toJsonSchemaCompat } from "@modelcontextprotocol/sdk/server/zod-json-schema-compat.js";
import type { z } from "zod";
import { sendEvents } from "../../events/index.ts";
import { parseOrThrow } from "../../lib/validation.ts";
import { byOf, type Principal } from "../../schemas/auth.ts";
import type { JsonObject } from "../../schemas/common.ts";
import {
  AnswerGateArgs,
  CancelRunArgs,
  GetRunArgs,
  ListRunsArgs,
  ListWorkflowsArgs,
  SendEventArgs,
  WaitRunArgs,
} from "../../schemas/mcp.ts";
import { accessOf, assertRunVisible, authorize } from "../access.ts";
import { answererOf } from "../gate-links.ts";
import { listRuns } from "../run-list.ts";
import { answerGate, controlRun, exposedWorkflows, getRun, listDefinitions } from "../service.ts";
import { followRun, waitBounds } from "./follow.ts";
import { reportLinks } from "./links.ts";
import { runResult, runUrl, trimRun, valueResult } from "./results.ts";
import type { SessionTraits } from "./session.ts";

/**
 * The server's own tools (docs/mcp.md, "Tools"): one row each, naming the
 * API operation it is the twin of. That operation's row of the route table
 * (src/contracts/routes.ts) decides who sees the tool in `tools/list` and who
 * may call it, through the same checks as the route (src/access.ts), and the
 * tool calls the same service function as the route.
 */

/** What a tool call knows of its request. */
export interface ToolContext {
  env: Env;
  principal: Principal;
  /** The deployment's origin, as the client reached it (for the console's run pages). */
  origin: string;
  session: SessionTraits;
  requestId: string | number;
  meta: Record<string, unknown> | undefined;
  /** Sends a request to the client on this call's response stream (an elicitation). */
  ask: (request: JSONRPCRequest) => Promise<void>;
}

/** One of the server's tools: its listing, the API operation it is the twin of, and its call. */
export interface ServerTool {
  name: string;
  operation: string;
  description: string;
  annotations: ToolAnnotations;
  args: z.ZodType;
  /** Arguments already parsed by `args`. */
  call(context: ToolContext, args: unknown): Promise<CallToolResult>;
}

/** A row of the table, its call typed by its arguments' schema. */
function tool<S extends z.ZodType>(
  row: Omit<ServerTool, "args" | "call"> & {
    args: S;
    call(context: ToolContext, args: z.infer<S>): Promise<CallToolResult>;
  },
): ServerTool {
  return { ...row, call: (context, args) => row.call(context, args as z.infer<S>) };
}

const READ_ONLY: ToolAnnotations = { readOnlyHint: true, openWorldHint: false };

export const SERVER_TOOLS: readonly ServerTool[] = [
  tool({
    name: "trellis_list_workflows",
    operation: "listDefinitions",
    description:
      "Lists the workflows registered in Trellis (latest version of each, newest first), each with the MCP tool that runs it when it is exposed as one.",
    annotations: READ_ONLY,
    args: ListWorkflowsArgs,
    async call({ env, principal }, args) {
      const query = { ...(args.limit === undefined ? {} : { limit: String(args.limit) }), ...cursorOf(args) };
      const page = await listDefinitions(env, "workflows", query, principal.workflows);
      const exposed = new Set((await exposedWorkflows(env, principal.workflows)).map((workflow) => workflow.id));
      const workflows = page.definitions.map(({ kind: _kind, ...summary }) => ({
        ...summary,
        tool: exposed.has(summary.id) ? summary.id : null,
      }));
      return valueResult({ workflows, next_cursor: page.next_cursor });
    },
  }),
  tool({
    name: "trellis_list_runs",
    operation: "listRuns",
    description:
      "Lists runs, newest first, from the run index: by workflow, status or trigger, a page at a time. The index trails its runs by a moment.",
    annotations: READ_ONLY,
    args: ListRunsArgs,
    async call({ env, principal, origin }, args) {
      const query = Object.fromEntries(
        Object.entries({ ...args, status: args.status?.join(","), limit: args.limit?.toString() }).filter(
          ([, value]) => value !== undefined,
        ),
      );
      const page = await listRuns(env.RUN_INDEX, query, principal.workflows);
      const runs = page.runs.map((run) => ({ ...run, url: runUrl(origin, run.run_id) }));
      return valueResult({ runs, next_cursor: page.next_cursor } as unknown as JsonObject);
    },
  }),
  tool({
    name: "trellis_get_run",
    operation: "getRun",
    description:
      "A run as it is now: status, input, output or error, each node's status, the gates waiting for input (with their schemas), and its console URL.",
    annotations: READ_ONLY,
    args: GetRunArgs,
    async call({ env, origin }, args) {
      return valueResult(trimRun(await getRun(env, args.run_id), origin));
    },
  }),
  tool({
    name: "trellis_wait_run",
    operation: "getRun",
    description:
      "Waits up to wait_seconds (default 25) for a run to end, then answers like a workflow's tool: its output, its error, or its handle and the input it needs (with an approval link for the caller when it may make one). Asks a waiting gate through elicitation when the client supports it.",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    args: WaitRunArgs,
    async call(context, args) {
      const bounds = waitBounds(args.wait_seconds === undefined ? undefined : args.wait_seconds * 1000);
      const started = Date.now();
      const { view, asked } = await followRun(
        { ...context, elicitation: context.session.elicitation },
        args.run_id,
        bounds,
      );
      const waitedSeconds = Math.round((Date.now() - started) / 1000);
      const links = await reportLinks(context.env, view, context.principal, context.origin);
      return runResult(view, { origin: context.origin, outputSchema: undefined, waitedSeconds, asked, links });
    },
  }),
  tool({
    name: "trellis_answer_gate",
    operation: "answerGate",
    description:
      "Answers a run's open human gate (an input or an approval): response must match the gate's input_schema, and the caller must be one of its approvers. The run resumes at once.",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: false, openWorldHint: false },
    args: AnswerGateArgs,
    async call({ env, principal }, args) {
      const body = { response: args.response, ...(args.responder === undefined ? {} : { responder: args.responder }) };
      const gate = await answerGate(env, args.run_id, args.gate_id, body, answererOf(principal));
      return valueResult(gate as unknown as JsonObject);
    },
  }),
  tool({
    name: "trellis_cancel_run",
    operation: "cancelRun",
    description: "Cancels a run: its child runs too, and its open gates close. Answers the run after the cancel.",
    annotations: { readOnlyHint: false, destructiveHint: true, idempotentHint: true, openWorldHint: false },
    args: CancelRunArgs,
    async call({ env, principal, origin }, args) {
      const view = await controlRun(env, args.run_id, "cancel", args.reason, byOf(principal));
      return valueResult(trimRun(view, origin));
    },
  }),
  tool({
    name: "trellis_send_event",
    operation: "sendEvents",
    description:
      "Sends an event: every run waiting for its name resumes, and workflows triggered by it start runs. An id makes a retry safe.",
    annotations: { readOnlyHint: false, destructiveHint: false, idempotentHint: true, openWorldHint: false },
    args: SendEventArgs,
    async call({ env, principal }, args) {
      return valueResult((await sendEvents(env, args, byOf(principal))) as unknown as JsonObject);
    },
  }),
];

function cursorOf(args: { cursor?: string | undefined }): { cursor?: string } {
  return args.cursor === undefined ? {} : { cursor: args.cursor };
}

/** Whether the principal passes an operation's checks that need no run: its role, and a grant of every workflow when it needs one. */
export function mayCall(principal: Principal, operation: string): boolean {
  try {
    authorize(principal, accessOf(operation));
    return true;
  } catch {
    return false;
  }
}

/** A server tool as `tools/list` shows it. */
export function toListedTool(row: ServerTool): Tool {
  const inputSchema = withoutDialect(toJsonSchemaCompat(row.args, { pipeStrategy: "input" }));
  return {
    name: row.name,
    description: row.description,
    inputSchema: inputSchema as Tool["inputSchema"],
    annotations: row.annotations,
  };
}

/** The JSON Schema without its `$schema`: the tool's schema is read as MCP's default dialect. */
function withoutDialect(schema: Record<string, unknown>): Record<string, unknown> {
  const { $schema: _dialect, ...rest } = schema;
  return rest;
}

/**
 * Calls a server tool: the route's checks (role, grant, and the run visible
 * to the caller when the tool names one), its arguments parsed
 * (`mcp.invalid_arguments` with each problem's path), then its call.
 */
export async function callServerTool(row: ServerTool, context: ToolContext, rawArgs: unknown): Promise<CallToolResult> {
  const access = accessOf(row.operation);
  authorize(context.principal, access);
  const args = parseOrThrow(row.args, rawArgs ?? {}, "mcp.invalid_arguments", `the arguments of ${row.name}`);
  const runId = (args as { run_id?: unknown }).run_id;
  if (access.grant === "run" && typeof runId === "string") {
    await assertRunVisible(context.env, context.principal, runId);
  }
  return row.call(context, args);
}
