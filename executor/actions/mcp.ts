import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { SSEClientTransport, SseError } from "@modelcontextprotocol/sdk/client/sse.js";
import { StreamableHTTPClientTransport, StreamableHTTPError } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { ErrorCode, McpError, type Tool } from "@modelcontextprotocol/sdk/types.js";
import { EngineError } from "../../lib/errors.ts";
import { canonicalBytes } from "../../lib/journal/canonical.ts";
import { recordable } from "../../lib/recordable.ts";
import { EngineJsonSchemaValidator } from "../../lib/json-schema.ts";
import { isCredentialHeader, type Json, type JsonObject } from "../../schemas/common.ts";
import type { ResolvedMcpServer } from "../../schemas/resolved.ts";
import { cappedFetch } from "../capped-fetch.ts";
import { redactSecrets, resolveSecrets, resolveSecretsTracked } from "../secrets.ts";
import type { ActionContext, ActionHandler } from "./types.ts";

/** How Trellis introduces itself to MCP servers. */
const CLIENT_INFO = { name: "trellis", version: "0.1.0" };

/**
 * `mcp`: calls one tool of an MCP server over Streamable HTTP, falling back
 * to the older HTTP+SSE transport when the server answers the Streamable
 * HTTP handshake with a 4xx (as the MCP specification advises).
 *
 * Before anything goes over the network the call must be allowed twice —
 * by the server's `allowed_tools` (when it has one) and by the run's `tools`
 * allowlist (`mcp:<server id>/<tool>` or `mcp:<server id>/*`) — or it fails
 * closed with `mcp.tool_not_allowed`. With a `pin`, the tool's listing is
 * hashed ({@link toolPin}) and compared before the call: a mismatch fails
 * closed with `mcp.pin_mismatch` and the tool is never called.
 *
 * Output: the result's `structuredContent` when present, else `{ content }`.
 * A result with `isError` is `mcp.tool_error` (not retryable); connection
 * failures, 429/5xx and timeouts are retryable (`mcp.connection`, `mcp.timeout`).
 */
export const mcpAction: ActionHandler<"mcp"> = {
  async run(action, input, context) {
    const { server, tool, pin } = action.implementation;
    checkAllowed(server, tool, context.payload.tools);
    const headers = resolveHeaders(server, context.env);
    const scrub = (text: string) => redactSecrets(text, headers.secrets);
    const session = await connect(server, headers.values, context, scrub);
    try {
      if (pin !== undefined) {
        await checkPin(session.client, server, tool, pin, context.signal);
      }
      const args = toArguments(input);
      context.note?.({
        server: server.id,
        tool,
        ...(pin === undefined ? {} : { pin }),
        arguments: await recordable(input),
      });
      const result = await session.client.callTool({ name: tool, arguments: args }, undefined, {
        signal: context.signal,
      });
      if (result.isError === true) {
        throw EngineError.terminal(
          "mcp.tool_error",
          scrub(`tool ${tool} of MCP server ${server.id} returned an error: ${textOf(result.content)}`),
        );
      }
      const output = isJsonObject(result.structuredContent)
        ? result.structuredContent
        : { content: (result.content ?? []) as Json };
      context.note?.({ result: await recordable(output) });
      return output;
    } catch (thrown) {
      throw toMcpError(thrown, server, context.signal, scrub);
    } finally {
      await session.close();
    }
  },
};

/**
 * The pin of a tool: `sha256:` and the lowercase hex SHA-256 of the UTF-8
 * bytes of the RFC 8785 canonical JSON of `{ "name": <name>, "inputSchema":
 * <inputSchema> }`, both as `tools/list` returns them. For example the
 * server-everything `echo` tool hashes the bytes
 * `{"inputSchema":{"$schema":…,"properties":{"message":{…}},"required":["message"],"type":"object"},"name":"echo"}`.
 */
export async function toolPin(tool: Pick<Tool, "name" | "inputSchema">): Promise<string> {
  const digest = await crypto.subtle.digest(
    "SHA-256",
    canonicalBytes({ name: tool.name, inputSchema: tool.inputSchema }),
  );
  return `sha256:${[...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("")}`;
}

/** A tool as `GET /v1/mcp_servers/{id}/tools` lists it: the pin an `mcp` action would check. */
export interface ListedTool {
  name: string;
  description: string | null;
  pin: string;
  /** Whether the server's `allowed_tools` lets actions call it. */
  allowed: boolean;
}

/**
 * Every tool the server lists, each with its pin, so an author can pin a tool
 * without first provoking a mismatch. Connects as an action would, with the
 * server's headers (`$env:` resolved, and scrubbed from any error).
 */
export async function listTools(server: ResolvedMcpServer, env: Env, signal: AbortSignal): Promise<ListedTool[]> {
  const headers = resolveHeaders(server, env);
  const scrub = (text: string) => redactSecrets(text, headers.secrets);
  const session = await connect(server, headers.values, { signal, fetch, env }, scrub);
  try {
    const tools: ListedTool[] = [];
    let cursor: string | undefined;
    do {
      const page = await session.client.listTools(cursor === undefined ? {} : { cursor }, { signal });
      for (const tool of page.tools) {
        tools.push({
          name: tool.name,
          description: tool.description ?? null,
          pin: await toolPin(tool),
          allowed: server.allowed_tools?.includes(tool.name) ?? true,
        });
      }
      cursor = page.nextCursor;
    } while (cursor !== undefined && tools.length < MAX_LISTED_TOOLS);
    return tools;
  } catch (thrown) {
    throw toMcpError(thrown, server, signal, scrub);
  } finally {
    await session.close();
  }
}

/**
 * The input schema and pin of some of a server's tools, as it lists them now
 * (an agent offers them to its model); a tool the server does not list is
 * `mcp.tool_not_found`, one whose pin differs from the one given `mcp.pin_mismatch`.
 */
export async function describeTools(
  server: ResolvedMcpServer,
  wanted: ReadonlyArray<{ tool: string; pin?: string }>,
  context: Pick<ActionContext, "signal" | "fetch" | "env">,
): Promise<Map<string, { pin: string; input_schema: JsonObject }>> {
  const headers = resolveHeaders(server, context.env);
  const scrub = (text: string) => redactSecrets(text, headers.secrets);
  const session = await connect(server, headers.values, context, scrub);
  try {
    const found = new Map<string, { pin: string; input_schema: JsonObject }>();
    for (const { tool: name, pin } of wanted) {
      const tool = await findTool(session.client, name, context.signal);
      if (tool === undefined) {
        throw EngineError.terminal("mcp.tool_not_found", `MCP server ${server.id} does not list a tool ${name}`);
      }
      const actual = await toolPin(tool);
      if (pin !== undefined && actual !== pin) {
        throw pinMismatch(server, name, actual, pin);
      }
      found.set(name, { pin: actual, input_schema: toJsonObject(tool.inputSchema) });
    }
    return found;
  } catch (thrown) {
    throw toMcpError(thrown, server, context.signal, scrub);
  } finally {
    await session.close();
  }
}

function toJsonObject(schema: Tool["inputSchema"]): JsonObject {
  return JSON.parse(JSON.stringify(schema)) as JsonObject;
}

function pinMismatch(server: ResolvedMcpServer, name: string, actual: string, pin: string): EngineError {
  return EngineError.terminal(
    "mcp.pin_mismatch",
    `tool ${name} of MCP server ${server.id} has changed: its name and input schema hash to ${actual}, the action pins ${pin}; it was not called`,
  );
}

/** A listing stops here: a server that pages forever cannot hold the request. */
const MAX_LISTED_TOOLS = 1_000;

/** Both allowlists, checked before any connection: an empty run allowlist allows nothing. */
function checkAllowed(server: ResolvedMcpServer, tool: string, grants: readonly string[]): void {
  if (server.allowed_tools !== undefined && !server.allowed_tools.includes(tool)) {
    throw EngineError.terminal(
      "mcp.tool_not_allowed",
      `tool ${tool} is not in the allowed_tools of MCP server ${server.id}`,
    );
  }
  if (!grants.includes(`mcp:${server.id}/${tool}`) && !grants.includes(`mcp:${server.id}/*`)) {
    throw EngineError.terminal(
      "mcp.tool_not_allowed",
      `tool ${tool} of MCP server ${server.id} is not on this run's tools allowlist (add "mcp:${server.id}/${tool}" to the workflow's "tools")`,
    );
  }
}

/** Header values with `$env:` references resolved (credential headers hold nothing else). */
function resolveHeaders(server: ResolvedMcpServer, env: Env): { values: Record<string, string>; secrets: string[] } {
  const values: Record<string, string> = {};
  const secrets: string[] = [];
  for (const [name, value] of Object.entries(server.headers ?? {})) {
    const resolved = resolveSecretsTracked(value, env);
    values[name] = resolved.value;
    secrets.push(...resolved.secrets);
    if (isCredentialHeader(name)) {
      secrets.push(resolved.value);
    }
  }
  return { values, secrets };
}

/** What a connection needs of its caller: when to give up, and how to fetch. */
type Connection = Pick<ActionContext, "signal" | "fetch" | "env">;

interface Session {
  client: Client;
  close(): Promise<void>;
}

/** The server's URL, its `$env:` prefix resolved (a declared var or secret: lib/secrets.ts). */
function parseServerUrl(server: ResolvedMcpServer, env: Env): URL {
  const url = resolveSecrets(server.url, env);
  if (!URL.canParse(url)) {
    throw EngineError.terminal("mcp.bad_url", `MCP server ${server.id}: ${server.url} is not a URL once resolved`);
  }
  return new URL(url);
}

/** Streamable HTTP first; HTTP+SSE when the server answers that with a 4xx other than 401/403. */
async function connect(
  server: ResolvedMcpServer,
  headers: Record<string, string>,
  context: Connection,
  scrub: (text: string) => string,
): Promise<Session> {
  const url = parseServerUrl(server, context.env);
  const fetch = boundFetch(context);
  const streamable = new StreamableHTTPClientTransport(url, { requestInit: { headers }, fetch });
  const first = newClient();
  try {
    await first.connect(streamable, { signal: context.signal });
    return { client: first, close: () => closeQuietly(first, () => streamable.terminateSession()) };
  } catch (thrown) {
    await closeQuietly(first);
    if (!(thrown instanceof StreamableHTTPError) || !isFallbackStatus(thrown.code)) {
      throw toMcpError(thrown, server, context.signal, scrub);
    }
  }
  const sse = new SSEClientTransport(url, { requestInit: { headers }, fetch });
  const second = newClient();
  try {
    await second.connect(sse, { signal: context.signal });
    return { client: second, close: () => closeQuietly(second) };
  } catch (thrown) {
    await closeQuietly(second);
    throw toMcpError(thrown, server, context.signal, scrub);
  }
}

function newClient(): Client {
  // The SDK's default validator (Ajv) generates code, which workerd forbids; its CfWorker one backtracks on patterns.
  return new Client(CLIENT_INFO, { jsonSchemaValidator: new EngineJsonSchemaValidator() });
}

/** The SDK's own requests also end when the action's signal does, and read at most MAX_RESPONSE_BYTES of a body. */
function boundFetch(context: Connection): typeof fetch {
  const capped = cappedFetch(context.fetch);
  return (input, init) =>
    capped(input, { ...init, signal: init?.signal ? AbortSignal.any([init.signal, context.signal]) : context.signal });
}

function isFallbackStatus(status: number | undefined): boolean {
  return status !== undefined && status >= 400 && status < 500 && status !== 401 && status !== 403 && status !== 429;
}

/** Ends the session (a DELETE for Streamable HTTP) without letting a failure to say goodbye fail the step. */
async function closeQuietly(client: Client, terminate?: () => Promise<void>): Promise<void> {
  try {
    await terminate?.();
  } catch {
    // The server may not support session termination (405); nothing to do.
  }
  try {
    await client.close();
  } catch {
    // Already closed.
  }
}

async function checkPin(
  client: Client,
  server: ResolvedMcpServer,
  name: string,
  pin: string,
  signal: AbortSignal,
): Promise<void> {
  const tool = await findTool(client, name, signal);
  if (tool === undefined) {
    throw EngineError.terminal("mcp.tool_not_found", `MCP server ${server.id} does not list a tool ${name}`);
  }
  const actual = await toolPin(tool);
  if (actual !== pin) {
    throw pinMismatch(server, name, actual, pin);
  }
}

async function findTool(client: Client, name: string, signal: AbortSignal): Promise<Tool | undefined> {
  let cursor: string | undefined;
  do {
    const page = await client.listTools(cursor === undefined ? {} : { cursor }, { signal });
    const tool = page.tools.find((candidate) => candidate.name === name);
    if (tool !== undefined) {
      return tool;
    }
    cursor = page.nextCursor;
  } while (cursor !== undefined);
  return undefined;
}

function toArguments(input: Json): Record<string, unknown> {
  if (!isJsonObject(input)) {
    throw EngineError.terminal(
      "mcp.invalid_input",
      "an mcp action's input is the tool's arguments and must be a JSON object",
    );
  }
  return input;
}

function isJsonObject(value: unknown): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** The text blocks of a tool result, for error messages. */
function textOf(content: unknown): string {
  const blocks = Array.isArray(content) ? content : [];
  const text = blocks
    .map((block: unknown) =>
      isJsonObject(block) && block.type === "text" && typeof block.text === "string" ? block.text : "",
    )
    .filter((part) => part.length > 0)
    .join("\n");
  return text.length > 0 ? text.slice(0, 2_000) : "(no text)";
}

function toMcpError(
  thrown: unknown,
  server: ResolvedMcpServer,
  signal: AbortSignal,
  scrub: (text: string) => string,
): unknown {
  if (thrown instanceof EngineError || signal.aborted) {
    return thrown;
  }
  const message = scrub(thrown instanceof Error ? thrown.message : String(thrown));
  const where = `MCP server ${server.id}`;
  if (thrown instanceof McpError) {
    if (thrown.code === ErrorCode.RequestTimeout) {
      return EngineError.retryable("mcp.timeout", `${where} did not answer in time: ${message}`);
    }
    if (thrown.code === ErrorCode.ConnectionClosed) {
      return EngineError.retryable("mcp.connection", `${where} closed the connection: ${message}`);
    }
    return EngineError.terminal("mcp.protocol", `${where} refused the request (${thrown.code}): ${message}`);
  }
  if (thrown instanceof StreamableHTTPError || thrown instanceof SseError) {
    const status = thrown.code;
    if (status === 401 || status === 403) {
      return EngineError.terminal("mcp.unauthorized", `${where} answered ${status}: check its credential headers`);
    }
    if (status !== undefined && status >= 400 && status < 500 && status !== 429) {
      return EngineError.terminal("mcp.connection", `${where} answered ${status}: ${message}`);
    }
    return EngineError.retryable(
      "mcp.connection",
      `${where} failed${status === undefined ? "" : ` with ${status}`}: ${message}`,
    );
  }
  // fetch failures (refused, reset, DNS) surface as TypeError; anything else thrown while talking is treated alike.
  return EngineError.retryable("mcp.connection", `${where} could not be reached: ${message}`);
}
