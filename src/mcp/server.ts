import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  CancelTaskRequestSchema,
  ErrorCode,
  GetTaskPayloadRequestSchema,
  GetTaskRequestSchema,
  ListTasksRequestSchema,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type CreateTaskResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { EngineJsonSchemaValidator } from "../../lib/json-schema.ts";
import type { Principal } from "../../schemas/auth.ts";
import type { JsonObject } from "../../schemas/common.ts";
import { applyElicitationResponse, isElicitationResponse } from "./elicitation.ts";
import { toolError } from "./results.ts";
import { createSessionId, sessionTraits } from "./session.ts";
import { callServerTool, mayCall, SERVER_TOOLS, toListedTool, type ToolContext } from "./tools.ts";
import { cancelTask, getTask, listTasks, taskResult, type TaskContext } from "./tasks.ts";
import { callWorkflowTool, listWorkflowTools, startWorkflowTask } from "./workflow-tools.ts";

/**
 * `POST /v1/mcp` (docs/mcp.md): the MCP server, over the SDK's web-standard
 * Streamable HTTP transport, built afresh for each request. Nothing is kept
 * between requests: a session id made at `initialize` carries what the
 * client declared (src/mcp/session.ts), and a client's answer to an
 * elicitation names its gate (src/mcp/elicitation.ts). The route has already
 * authenticated the caller (a wrong token is 401 before any of this).
 */

/** How Trellis introduces itself to MCP clients. */
const SERVER_INFO = { name: "trellis", title: "Trellis", version: "0.1.0" };

const INSTRUCTIONS =
  "Trellis runs durable workflows. Each workflow tool starts a run and waits up to 25 s: an ended run answers its " +
  "output (or its error); a run still going answers a handle (run_id, status, url) to follow with trellis_wait_run. " +
  "A run waiting for a person lists needs_input: answer it with trellis_answer_gate, or through the form this " +
  "server asks when the client supports elicitation, or let the person open the approval_link. A client that " +
  "supports MCP tasks may call a workflow tool as a task: the task is the run.";

/** Answers one HTTP request of an MCP client; `body` is its parsed JSON. */
export async function handleMcp(env: Env, request: Request, body: unknown, principal: Principal): Promise<Response> {
  const messages: unknown[] = Array.isArray(body) ? body : [body];
  const answers = messages.filter(isElicitationResponse);
  for (const answer of answers) {
    await applyElicitationResponse(env, principal, answer);
  }
  const rest = messages.filter((message) => !answers.includes(message));
  if (rest.length === 0) {
    return new Response(null, { status: 202 });
  }
  const initialize = rest.find(isInitializeRequest);
  const transport = new WebStandardStreamableHTTPServerTransport({
    sessionIdGenerator: initialize === undefined ? undefined : () => createSessionId(initialize.params.capabilities),
  });
  const context = {
    env,
    principal,
    origin: new URL(request.url).origin,
    session: sessionTraits(request.headers.get("mcp-session-id")),
  };
  const server = createServer(context, transport);
  await server.connect(transport);
  return transport.handleRequest(request, { parsedBody: Array.isArray(body) ? rest : rest[0] });
}

type RequestContext = Pick<ToolContext, "env" | "principal" | "origin" | "session">;

function createServer(context: RequestContext, transport: WebStandardStreamableHTTPServerTransport): Server {
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: {}, tasks: TASKS_CAPABILITY },
    instructions: INSTRUCTIONS,
    // The SDK's default validator (Ajv) generates code, which workerd forbids.
    jsonSchemaValidator: new EngineJsonSchemaValidator(),
  });
  server.setRequestHandler(ListToolsRequestSchema, async () => ({ tools: await listTools(context) }));
  server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
    const toolContext: ToolContext = {
      ...context,
      requestId: extra.requestId,
      meta: request.params._meta,
      ask: (message) => transport.send(message, { relatedRequestId: extra.requestId }),
    };
    const args = request.params.arguments ?? {};
    return request.params.task === undefined
      ? callTool(toolContext, request.params.name, args)
      : callAsTask(toolContext, request.params.name, args);
  });
  setTaskHandlers(server, context, transport);
  return server;
}

/** Tasks (src/mcp/tasks.ts): workflow tools may be called as tasks; the caller's runs are listed and cancelled. */
const TASKS_CAPABILITY = { list: {}, cancel: {}, requests: { tools: { call: {} } } };

function setTaskHandlers(
  server: Server,
  context: RequestContext,
  transport: WebStandardStreamableHTTPServerTransport,
): void {
  const taskContext = (requestId: string | number): TaskContext => ({
    ...context,
    ask: (message) => transport.send(message, { relatedRequestId: requestId }),
  });
  server.setRequestHandler(GetTaskRequestSchema, async (request, extra) =>
    getTask(taskContext(extra.requestId), request.params.taskId),
  );
  server.setRequestHandler(GetTaskPayloadRequestSchema, async (request, extra) =>
    taskResult(taskContext(extra.requestId), request.params.taskId, extra.signal),
  );
  server.setRequestHandler(CancelTaskRequestSchema, async (request, extra) =>
    cancelTask(taskContext(extra.requestId), request.params.taskId),
  );
  server.setRequestHandler(ListTasksRequestSchema, async (request, extra) =>
    listTasks(taskContext(extra.requestId), request.params?.cursor),
  );
}

/** A `tools/call` with `params.task`: only a workflow's tool runs as a task (`execution.taskSupport: "optional"`). */
async function callAsTask(
  context: ToolContext,
  name: string,
  args: Record<string, unknown>,
): Promise<CreateTaskResult> {
  if (SERVER_TOOLS.some((candidate) => candidate.name === name)) {
    throw new McpError(ErrorCode.MethodNotFound, `Tool ${name} does not support task-augmented calls`);
  }
  const created = await startWorkflowTask(context, name, args as JsonObject);
  if (created === null) {
    throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
  }
  return created;
}

/** The workflows the caller may start, then the server's tools it may call. */
async function listTools(context: RequestContext): Promise<Tool[]> {
  const own = SERVER_TOOLS.filter((row) => mayCall(context.principal, row.operation)).map(toListedTool);
  return [...(await listWorkflowTools(context)), ...own];
}

async function callTool(context: ToolContext, name: string, args: Record<string, unknown>): Promise<CallToolResult> {
  const row = SERVER_TOOLS.find((candidate) => candidate.name === name);
  if (row !== undefined) {
    try {
      return await callServerTool(row, context, args);
    } catch (thrown) {
      return toolError(thrown, name, false);
    }
  }
  const result = await callWorkflowTool(context, name, args as JsonObject);
  if (result === null) {
    throw new McpError(ErrorCode.InvalidParams, `Tool ${name} not found`);
  }
  return result;
}
