import { generateKeyPairSync } from "node:crypto";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import type TypeScript from "typescript";
import type { TestProject } from "vitest/node";
import { startShellServer } from "../containers/shell-server/server.mjs";
import { startHttpTarget } from "../scripts/lib/http-target.mjs";
import { startLlmServer } from "../scripts/lib/llm-server.mjs";
import { startMcpPeer } from "../scripts/lib/mcp-peer.mjs";
import { startOtlpReceiver } from "../scripts/lib/otlp-receiver.mjs";
import { TEST_SECRETS } from "./secrets.ts";

declare module "vitest" {
  export interface ProvidedContext {
    journalSigningKey: string;
    httpTargetUrl: string;
    llmServerUrl: string;
    mcpServerUrl: string;
    mcpSseServerUrl: string;
    shellServerUrl: string;
    shellServerToken: string;
    otlpReceiverUrl: string;
    callerScript: string;
  }
}

/** Starts the local peers once for the whole run and hands their addresses to the Worker. */
export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const { privateKey } = generateKeyPairSync("ed25519");
  project.provide("journalSigningKey", privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"));
  const target = await startHttpTarget({ port: 0 });
  project.provide("httpTargetUrl", target.url);
  // The llm and mcp actions' peers: an OpenAI/Anthropic-compatible server and the reference MCP server.
  const llm = await startLlmServer({ port: 0 });
  project.provide("llmServerUrl", llm.url);
  const mcp = await startMcpPeer({ sse: true });
  project.provide("mcpServerUrl", mcp.url);
  project.provide("mcpSseServerUrl", mcp.sseUrl ?? "");
  // The container path in local mode: the Sandbox forwards to this shell server (docs/containers.md).
  const shell = await startShellServer({ port: 0 });
  project.provide("shellServerUrl", shell.url);
  project.provide("shellServerToken", shell.token);
  // The collector runs are exported to as traces (docs/telemetry.md); it wants the key the Worker is given.
  const otlp = await startOtlpReceiver({ port: 0, authorization: `Bearer ${TEST_SECRETS.OTLP_API_KEY}` });
  project.provide("otlpReceiverUrl", otlp.url);
  // The example caller Worker (examples/caller), run beside the Worker under test (vitest.config.ts).
  project.provide("callerScript", callerScript());
  return async () => {
    await target.close();
    await llm.close();
    await mcp.close();
    await shell.close();
    await otlp.close();
  };
}

/**
 * examples/caller/src/index.ts as JavaScript: an auxiliary Worker is not
 * bundled by the test runner, and the caller imports only types, so removing
 * them is the whole build.
 */
function callerScript(): string {
  // Loaded by Node, not through Vite's module runner (which looks for typescript.js's missing source map, noisily).
  const ts = createRequire(import.meta.url)("typescript") as typeof TypeScript;
  const source = readFileSync(new URL("../examples/caller/src/index.ts", import.meta.url), "utf8");
  return ts.transpileModule(source, {
    compilerOptions: { module: ts.ModuleKind.ESNext, target: ts.ScriptTarget.ES2024, verbatimModuleSyntax: true },
  }).outputText;
}
