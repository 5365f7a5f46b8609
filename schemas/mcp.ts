import { z } from "zod";
import { JsonSchema, JsonValue } from "./common.ts";
import { WorkflowMcp } from "./definitions.ts";
import { RunStatus, TRIGGER_KINDS } from "./run.ts";

/**
 * The MCP server at `/v1/mcp` (docs/mcp.md): what a workflow declares to be
 * one of its tools, what the catalog lists of such workflows, and the
 * arguments of the server's own tools.
 */

/** The most exposed workflows `tools/list` shows (of the caller's grant), by id. */
export const MAX_EXPOSED_WORKFLOWS = 500;

/** An exposed workflow as the catalog lists it: the latest version, and what its tool is made of. */
export const ExposedWorkflow = z.strictObject({
  id: z.string(),
  version: z.number().int().min(1),
  description: z.string().optional(),
  mcp: WorkflowMcp,
  input_schema: JsonSchema.optional(),
  output_schema: JsonSchema.optional(),
});
export type ExposedWorkflow = z.infer<typeof ExposedWorkflow>;

/** What a run tool answers for a run that is still going: the run, its status, and its page in the console. */
export const RunHandle = z.strictObject({ run_id: z.string(), status: RunStatus, url: z.string() });
export type RunHandle = z.infer<typeof RunHandle>;

/**
 * An approval link of an open gate, made for the caller, in a report that the
 * run needs input: `url` null when a live link the caller made earlier stands
 * (its URL was shown once, in the report that made it).
 */
export const ApprovalLink = z.strictObject({
  url: z.string().nullable(),
  approver: z.string(),
  expires_at: z.string(),
});
export type ApprovalLink = z.infer<typeof ApprovalLink>;

const RunId = z.string().min(1).max(200).describe("A run id, as a workflow tool or trellis_list_runs answered it.");

/** `trellis_get_run`, `trellis_cancel_run`'s run. */
export const GetRunArgs = z.strictObject({ run_id: RunId });

/** `trellis_wait_run`: how long to wait is bounded like a start's `Prefer: wait` (at most 60 s). */
export const WaitRunArgs = z.strictObject({
  run_id: RunId,
  wait_seconds: z
    .number()
    .int()
    .min(0)
    .max(60)
    .optional()
    .describe("How long to wait for the run to end or ask for input, in seconds. Default 25."),
});

/** `trellis_list_workflows`: a page of the latest version of each workflow. */
export const ListWorkflowsArgs = z.strictObject({
  limit: z.number().int().min(1).max(100).optional().describe("Workflows per page, 1 to 100. Default 50."),
  cursor: z.string().min(1).max(1024).optional().describe("The next_cursor of the previous page."),
});

/** `trellis_list_runs`: the query of `GET /v1/runs`, typed. */
export const ListRunsArgs = z.strictObject({
  workflow: z.string().min(1).max(80).optional().describe('Only runs of this workflow ("id" or "id@version").'),
  status: z.array(RunStatus).min(1).optional().describe("Only runs in one of these statuses."),
  trigger: z.enum(TRIGGER_KINDS).optional().describe("Only runs started this way."),
  limit: z.number().int().min(1).max(100).optional().describe("Runs per page, 1 to 100. Default 50."),
  cursor: z.string().min(1).max(400).optional().describe("The next_cursor of the previous page."),
});

/** `trellis_answer_gate`: the body of `POST /v1/runs/{run_id}/gates/{gate_id}`, with the gate named. */
export const AnswerGateArgs = z.strictObject({
  run_id: RunId,
  gate_id: z.string().min(1).max(200).describe("The gate, as the run's needs_input or gates name it."),
  // Any JSON (the gate's input_schema checks it): a plain schema for the client, not zod's recursive JSON one.
  response: z
    .unknown()
    .refine((value) => value !== undefined, "a response is required")
    .describe("The answer: it must match the gate's input_schema."),
  responder: z.string().min(1).max(256).optional().describe("A free-text note on who answered or why."),
});

/** `trellis_cancel_run`. */
export const CancelRunArgs = z.strictObject({
  run_id: RunId,
  reason: z.string().min(1).max(1000).optional().describe("Why, recorded on the run."),
});

/** `trellis_send_event`: one event, as `POST /v1/events` takes it. */
export const SendEventArgs = z.strictObject({
  name: z.string().min(1).max(200).describe("The event's name: runs waiting for it resume, triggers on it start runs."),
  data: z.unknown().optional().describe("The event's data: any JSON."),
  id: z.string().min(1).max(200).optional().describe("Makes a retry safe: the same id of the same name counts once."),
});

/** The JSON-RPC response a client sends to a gate's `elicitation/create` (its `id` names the run and the gate). */
export const ElicitationResponse = z.looseObject({
  jsonrpc: z.literal("2.0"),
  id: z.string(),
  result: z
    .looseObject({
      action: z.enum(["accept", "decline", "cancel"]),
      content: z.record(z.string(), JsonValue).optional(),
    })
    .optional(),
  error: z.looseObject({ code: z.number(), message: z.string() }).optional(),
});
export type ElicitationResponse = z.infer<typeof ElicitationResponse>;

/** One JSON-RPC 2.0 message, as `POST /v1/mcp` takes and answers it (docs/mcp.md). */
const JsonRpcMessage = z.looseObject({
  jsonrpc: z.literal("2.0"),
  id: z.union([z.string(), z.number()]).optional(),
  method: z.string().optional(),
  params: z.record(z.string(), z.unknown()).optional(),
  result: z.record(z.string(), z.unknown()).optional(),
  error: z.looseObject({ code: z.number(), message: z.string() }).optional(),
});

/** A JSON-RPC message of MCP, or a batch of them. */
export const McpMessage = z.union([JsonRpcMessage, z.array(JsonRpcMessage)]);
export type McpMessage = z.infer<typeof McpMessage>;
