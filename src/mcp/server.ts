import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { WebStandardStreamableHTTPServerTransport } from "@modelcontextprotocol/sdk/server/webStandardStreamableHttp.js";
import {
  CallToolRequestSchema,
  ErrorCode,
  isInitializeRequest,
  ListToolsRequestSchema,
  McpError,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import { EngineJsonSchemaValidator } from "../../lib/json-schema.ts";
import type { Principal } from "../../schemas/auth.ts";
import type { JsonObject } from "../../schemas/common.ts";
import { applyElicitationResponse, isElicitationResponse } from "./elicitation.ts";
import { toolError } from "./results.ts";
import { createSessionId, sessionTraits } from "./session.ts";
import { callServerTool, mayCall, SERVER_TOOLS, toListedTool, type ToolContext } from "./tools.ts";
import { callWorkflowTool, listWorkflowTools } from "./workflow-tools.ts";

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
  "server asks when the client supports elicitation.";

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
    capabilities: { tools: {} },
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
    return callTool(toolContext, request.params.name, request.params.arguments ?? {});
  });
  return server;
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
