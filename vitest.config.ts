import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import { defineConfig, defineProject } from "vitest/config";
import { TEST_SECRETS } from "./test/secrets.ts";

/**
 * Two projects:
 * - `workers`: everything that runs in production runs here, inside workerd,
 *   against real Durable Objects, SQLite and service bindings.
 * - `node`: the tools that run on a developer's machine (the journal verifier
 *   CLI, the local test peers), tested as ordinary Node modules.
 *
 * `test/global-setup.ts` starts the local peers (on 127.0.0.1) and provides
 * their addresses and a fresh journal key to the Worker's bindings. The run
 * index's D1 migrations (migrations/) are read here, in Node, and applied by
 * `test/workers/setup.ts` inside workerd.
 */
export default defineConfig({
  test: {
    projects: [
      defineProject({
        plugins: [
          cloudflareTest(async ({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            // The real Worker plus test doubles for the remote-only bindings (AI, Vectorize,
            // Analytics Engine): see test/worker.ts. Nothing here may reach Cloudflare.
            main: "./test/worker.ts",
            remoteBindings: false,
            miniflare: {
              bindings: {
                API_TOKENS: "test-token,second-token",
                JOURNAL_SIGNING_KEY: inject<string>("journalSigningKey"),
                HTTP_TARGET_URL: inject<string>("httpTargetUrl"),
                LLM_SERVER_URL: inject<string>("llmServerUrl"),
                MCP_SERVER_URL: inject<string>("mcpServerUrl"),
                MCP_SSE_SERVER_URL: inject<string>("mcpSseServerUrl"),
                // Secrets that model and MCP server definitions reference as `$env:…`; tests check they never leak.
                LLM_API_KEY: TEST_SECRETS.LLM_API_KEY,
                MCP_TOKEN: TEST_SECRETS.MCP_TOKEN,
                // The names definitions may use as `$env:NAME` (lib/secrets.ts); everything else is refused.
                WORKFLOW_SECRETS: "LLM_API_KEY, MCP_TOKEN, UNSET_SECRET",
                CONTAINER_MODE: "local",
                SHELL_SERVER_URL: inject<string>("shellServerUrl"),
                SHELL_SERVER_TOKEN: inject<string>("shellServerToken"),
                TEST_MIGRATIONS: await readD1Migrations(fileURLToPath(new URL("./migrations", import.meta.url))),
              },
            },
          })),
        ],
        test: {
          name: "workers",
          include: ["test/workers/**/*.test.ts"],
          globalSetup: ["./test/global-setup.ts"],
          setupFiles: ["./test/workers/setup.ts"],
          testTimeout: 30_000,
        },
      }),
      defineProject({
        test: {
          name: "node",
          include: ["test/node/**/*.test.ts"],
          environment: "node",
          testTimeout: 30_000,
        },
      }),
    ],
  },
});
