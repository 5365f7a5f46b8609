import { listTools } from "../executor/actions/mcp.ts";
import { parseOrThrow } from "../lib/validation.ts";
import type { McpToolList } from "../schemas/api.ts";
import { ResolvedMcpServer } from "../schemas/resolved.ts";
import { getDefinition } from "./service.ts";

/** How long listing a server's tools may take, connection included. */
const LIST_TIMEOUT_MS = 15_000;

/**
 * `GET /v1/mcp_servers/{id}/tools`: the tools the server lists now, each with
 * the pin an `mcp` action would check (executor/actions/mcp.ts `toolPin`),
 * read through the latest registered version of the server.
 */
export async function mcpServerTools(env: Env, id: string): Promise<McpToolList> {
  const record = await getDefinition(env, "mcp_servers", id);
  const server = parseOrThrow(
    ResolvedMcpServer,
    { ...record.definition, id: record.id, version: record.version },
    "definition.invalid",
    "the stored MCP server",
  );
  return {
    server: { id: record.id, version: record.version },
    tools: await listTools(server, env, AbortSignal.timeout(LIST_TIMEOUT_MS)),
  };
}
