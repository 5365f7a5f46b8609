import { Client } from "@modelcontextprotocol/sdk/client/index.js";
import { StreamableHTTPClientTransport } from "@modelcontextprotocol/sdk/client/streamableHttp.js";
import { CfWorkerJsonSchemaValidator } from "@modelcontextprotocol/sdk/validation/cfworker";
import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { toolPin } from "../../executor/actions/mcp.ts";
import { sha256Hex } from "../../lib/ids.ts";
import { canonicalJson } from "../../lib/journal/index.ts";
import { RECORDED_PREVIEW_CHARS } from "../../lib/recordable.ts";
import {
  api,
  uniqueId,
  httpTarget,
  singleTaskWorkflow,
  mcpServer,
  register,
  runWorkflow,
  journal,
  callOf,
} from "./helpers.ts";
import { TEST_SECRETS } from "../secrets.ts";

const mcpSseServer = (): string => (env as unknown as { MCP_SSE_SERVER_URL: string }).MCP_SSE_SERVER_URL;

interface PeerStats {
  requests: number;
  methods: Record<string, number>;
  calls: { name: string; arguments: unknown }[];
}

/** What reached the reference server through the recording proxy, for one key. */
async function stats(key: string): Promise<PeerStats> {
  return (await (await fetch(`${mcpServer()}/_stats/${key}`)).json()) as PeerStats;
}

function mcpStep(
  ref: string,
  server: string,
  tool: string,
  input_mapping: Record<string, unknown>,
  extra: Record<string, unknown> = {},
) {
  return { ref, action: { kind: "mcp", implementation: { server, tool, ...extra } }, input_mapping };
}

/**
 * Registers a server (its own proxy key, so its traffic is countable) and a
 * one-node workflow over `steps`, runs it and waits for the end.
 */
async function runWithServer(options: {
  steps: (server: string) => unknown[];
  tools?: (server: string) => string[];
  server?: Record<string, unknown>;
  input?: unknown;
  url?: (key: string) => string;
}): Promise<{ run: any; key: string; server: string }> {
  const server = uniqueId("srv");
  const key = uniqueId("key");
  const workflow = singleTaskWorkflow(
    uniqueId("wf"),
    options.steps(server),
    options.tools ? { tools: options.tools(server) } : {},
  );
  const url = options.url ? options.url(key) : `${mcpServer()}/k/${key}/mcp`;
  const bundle = { mcp_servers: [{ id: server, url, ...options.server }] };
  return { run: await runWorkflow(workflow, options.input ?? {}, bundle), key, server };
}

describe("the mcp action", () => {
  it("calls echo and get-sum on the reference server and maps their results", async ({ expect }) => {
    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/echo`, `mcp:${server}/get-sum`],
      steps: (server) => [
        {
          ...mcpStep("echo", server, "echo", { message: "$.input.message" }),
          output_mapping: { "output.echoed": "$.content[0].text" },
        },
        {
          ...mcpStep("sum", server, "get-sum", { a: "$.input.a", b: "$.input.b" }),
          output_mapping: { "output.sum": "$.content[0].text" },
        },
      ],
      input: { message: "hello trellis", a: 20, b: 22 },
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result).toEqual({ echoed: "Echo: hello trellis", sum: "The sum of 20 and 22 is 42." });
    expect((await stats(key)).calls).toEqual([
      { name: "echo", arguments: { message: "hello trellis" } },
      { name: "get-sum", arguments: { a: 20, b: 22 } },
    ]);
  });

  it("returns a tool's structuredContent as the step output", async ({ expect }) => {
    const { run } = await runWithServer({
      tools: (server) => [`mcp:${server}/*`],
      steps: (server) => [
        {
          ...mcpStep("weather", server, "get-structured-content", { location: "Chicago" }),
          output_mapping: { "output.weather": "$" },
        },
      ],
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.weather).toEqual({ temperature: 36, conditions: "Light rain / drizzle", humidity: 82 });
  });

  it("fails closed without contacting the server when the tool is not on the workflow's tools allowlist", async ({
    expect,
  }) => {
    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/get-sum`],
      steps: (server) => [mcpStep("echo", server, "echo", { message: "must not arrive" })],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.tool_not_allowed");
    expect(run.error.message).toMatch(/not on this run's tools allowlist/);
    expect((await stats(key)).requests).toBe(0);
  });

  it("fails closed when the workflow has no tools allowlist at all", async ({ expect }) => {
    const { run, key } = await runWithServer({
      steps: (server) => [mcpStep("echo", server, "echo", { message: "must not arrive" })],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.tool_not_allowed");
    expect((await stats(key)).requests).toBe(0);
  });

  it("fails closed without contacting the server when the tool is not in the server's allowed_tools", async ({
    expect,
  }) => {
    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/echo`],
      server: { allowed_tools: ["get-sum"] },
      steps: (server) => [mcpStep("echo", server, "echo", { message: "must not arrive" })],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.tool_not_allowed");
    expect(run.error.message).toMatch(/allowed_tools/);
    expect((await stats(key)).requests).toBe(0);
  });

  it("fails closed on a wrong pin after listing the tools, without calling the tool", async ({ expect }) => {
    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [
        mcpStep("echo", server, "echo", { message: "must not arrive" }, { pin: `sha256:${"0".repeat(64)}` }),
      ],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.pin_mismatch");
    const seen = await stats(key);
    expect(seen.methods["tools/list"]).toBeGreaterThanOrEqual(1);
    expect(seen.methods["tools/call"]).toBeUndefined();
    expect(seen.calls).toEqual([]);
  });

  it("calls the tool when its pin is the sha256 of the canonical JSON of its name and input schema", async ({
    expect,
  }) => {
    const client = new Client(
      { name: "pin-test", version: "1" },
      { jsonSchemaValidator: new CfWorkerJsonSchemaValidator() },
    );
    await client.connect(new StreamableHTTPClientTransport(new URL(`${mcpServer()}/mcp`)));
    const echo = (await client.listTools()).tools.find((tool) => tool.name === "echo");
    await client.close();
    if (echo === undefined) {
      throw new Error("the reference server lists no echo tool");
    }
    const pin = await toolPin(echo);
    // The documented bytes: RFC 8785 JSON of { name, inputSchema } (keys sorted, no spaces).
    const bytes = `{"inputSchema":${canonicalEchoSchema(echo.inputSchema)},"name":"echo"}`;
    const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(bytes));
    expect(pin).toBe(
      `sha256:${[...new Uint8Array(digest)].map((byte) => byte.toString(16).padStart(2, "0")).join("")}`,
    );

    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [
        {
          ...mcpStep("echo", server, "echo", { message: "pinned" }, { pin }),
          output_mapping: { "output.text": "$.content[0].text" },
        },
      ],
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.text).toBe("Echo: pinned");
    expect((await stats(key)).calls).toHaveLength(1);
    // The step record says which tool was called, under which pin, with what, and what came back.
    const completed = (await journal(run.run_id)).find((entry) => entry.kind === "task.completed");
    expect(callOf(completed)).toMatchObject({
      tool: "echo",
      pin,
      arguments: { message: "pinned" },
      result: { content: [{ type: "text", text: "Echo: pinned" }] },
    });
  });

  it("records a big result as the SHA-256 of its canonical JSON, its length and a preview", async ({ expect }) => {
    const message = "tide ".repeat(2_000);
    const { run } = await runWithServer({
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [
        { ...mcpStep("echo", server, "echo", { message: "$.input.message" }), output_mapping: { "output.all": "$" } },
      ],
      input: { message },
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    const completed = (await journal(run.run_id)).find((entry) => entry.kind === "task.completed");
    const canonical = canonicalJson(run.output.result.all);
    expect(callOf(completed)).toMatchObject({
      result: {
        sha256: await sha256Hex(canonical),
        chars: canonical.length,
        preview: canonical.slice(0, RECORDED_PREVIEW_CHARS),
      },
      arguments: { sha256: await sha256Hex(canonicalJson({ message })) },
    });
    expect(JSON.stringify(completed?.body).length).toBeLessThan(canonical.length + 2_000);
  });

  it("fails the step, not retryable, when the tool result has isError", async ({ expect }) => {
    const { run, key } = await runWithServer({
      tools: (server) => [`mcp:${server}/get-sum`],
      steps: (server) => [
        {
          ...mcpStep("sum", server, "get-sum", { a: "not a number", b: 1 }),
          action: {
            kind: "mcp",
            implementation: { server, tool: "get-sum" },
            execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10 } },
          },
        },
      ],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.tool_error");
    expect(run.error.message).toMatch(/Input validation error/);
    expect((await stats(key)).calls).toHaveLength(1);
  });

  it("falls back to the HTTP+SSE transport for a server that only speaks it", async ({ expect }) => {
    const { run } = await runWithServer({
      url: () => `${mcpSseServer()}/sse`,
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [
        {
          ...mcpStep("echo", server, "echo", { message: "over sse" }),
          output_mapping: { "output.text": "$.content[0].text" },
        },
      ],
    });
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
    expect(run.output.result.text).toBe("Echo: over sse");
  });

  it("retries a server that answers 503 by the action's retry policy, as a connection failure", async ({ expect }) => {
    const hitKey = uniqueId("down");
    const { run } = await runWithServer({
      url: () => `${httpTarget()}/status/503/${hitKey}`,
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [
        {
          ...mcpStep("echo", server, "echo", { message: "x" }),
          action: {
            kind: "mcp",
            implementation: { server, tool: "echo" },
            execution: { retry_policy: { max_attempts: 3, initial_delay_ms: 10, max_delay_ms: 20 } },
          },
        },
      ],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.connection");
    expect(await (await fetch(`${httpTarget()}/hits/${hitKey}`)).json()).toMatchObject({ count: 3 });
  });

  it("fails with mcp.connection when the server cannot be reached", async ({ expect }) => {
    const { run } = await runWithServer({
      // Port 9 (discard) on loopback: nothing listens there.
      url: () => "http://127.0.0.1:9/mcp",
      tools: (server) => [`mcp:${server}/echo`],
      steps: (server) => [mcpStep("echo", server, "echo", { message: "x" })],
    });
    expect(run.status).toBe("failed");
    expect(run.error.code).toBe("mcp.connection");
  });
});

describe("mcp definitions", () => {
  it("rejects a literal credential in an MCP server's headers at registration", async ({ expect }) => {
    const response = await api("POST", "/v1/definitions", {
      mcp_servers: [
        {
          id: uniqueId("srv"),
          url: "http://127.0.0.1:1/mcp",
          headers: { "authorization": "Bearer abc123", "x-api-key": "$env:MCP_TOKEN" },
        },
      ],
    });
    expect(response.status).toBe(400);
    expect(response.json.error.details).toEqual([
      expect.objectContaining({ path: "mcp_servers.0.headers.authorization", code: "definition.literal_secret" }),
    ]);
  });
});

describe("GET /v1/mcp_servers/{id}/tools", () => {
  it("lists each tool with the pin a pinned mcp step then accepts, and which tools allowed_tools lets through", async ({
    expect,
  }) => {
    const server = uniqueId("srv");
    const key = uniqueId("key");
    await register({
      mcp_servers: [
        {
          id: server,
          url: `${mcpServer()}/k/${key}/mcp`,
          headers: { authorization: "$env:MCP_TOKEN" },
          allowed_tools: ["echo"],
        },
      ],
    });
    const listed = await api("GET", `/v1/mcp_servers/${server}/tools`);
    expect(listed.status).toBe(200);
    expect(listed.json.server).toEqual({ id: server, version: 1 });
    const echo = listed.json.tools.find((tool: { name: string }) => tool.name === "echo");
    expect(echo).toMatchObject({ name: "echo", pin: expect.stringMatching(/^sha256:[0-9a-f]{64}$/), allowed: true });
    expect(listed.json.tools.find((tool: { name: string }) => tool.name === "get-sum")).toMatchObject({
      allowed: false,
    });
    expect(JSON.stringify(listed.json)).not.toContain(TEST_SECRETS.MCP_TOKEN);

    const run = await runWorkflow(
      singleTaskWorkflow(uniqueId("wf"), [mcpStep("echo", server, "echo", { message: "pinned" }, { pin: echo.pin })], {
        tools: [`mcp:${server}/echo`],
      }),
    );
    expect(run.status, JSON.stringify(run.error)).toBe("completed");
  });

  it("answers 404 for an unknown server and the connection error for one that is down", async ({ expect }) => {
    expect((await api("GET", `/v1/mcp_servers/${uniqueId("nope")}/tools`)).json.error.code).toBe(
      "definition.not_found",
    );
    const server = uniqueId("srv");
    await register({ mcp_servers: [{ id: server, url: "http://127.0.0.1:1/mcp" }] });
    const down = await api("GET", `/v1/mcp_servers/${server}/tools`);
    expect(down.status).toBeGreaterThanOrEqual(400);
    expect(down.json.error.code).toBe("mcp.connection");
  });
});

/** The echo tool's input schema as RFC 8785 writes it (its keys sorted at every level). */
function canonicalEchoSchema(schema: unknown): string {
  const sort = (value: unknown): unknown =>
    Array.isArray(value)
      ? value.map(sort)
      : value !== null && typeof value === "object"
        ? Object.fromEntries(
            Object.keys(value)
              .sort()
              .map((name) => [name, sort((value as Record<string, unknown>)[name])]),
          )
        : value;
  return JSON.stringify(sort(schema));
}
