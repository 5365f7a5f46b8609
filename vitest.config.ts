import { cloudflareTest, readD1Migrations } from "@cloudflare/vitest-plugin";
import { fileURLToPath } from "node:url";
import type { Plugin } from "vite";
import { defineConfig, defineProject } from "vitest/config";
import { TEST_SECRETS, WEBHOOK_SECRETS } from "./test/secrets.ts";

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
/**
 * Vite's logger, less one warning: published packages (the MCP SDK, @cloudflare/containers)
 * ship source maps that name sources they do not ship. Nothing here can fix that, and a
 * screenful of it per run hides what matters. (Vitest installs its own logger, so the
 * filter wraps whichever logger the config resolved to.)
 */
const MISSING_SOURCES = /^Sourcemap for ".*node_modules.*" points to missing source files/;
const quietMissingSources: Plugin = {
  name: "trellis:quiet-missing-sources",
  configResolved(config) {
    const { logger } = config;
    const [warn, warnOnce] = [logger.warn.bind(logger), logger.warnOnce.bind(logger)];
    logger.warn = (message, options) => (MISSING_SOURCES.test(message) ? undefined : warn(message, options));
    logger.warnOnce = (message, options) => (MISSING_SOURCES.test(message) ? undefined : warnOnce(message, options));
  },
};

/** The events queue's consumer as wrangler.toml declares it (retried twice here, at once), and the dead-letter queue's. */
const QUEUE_CONSUMERS = {
  "trellis-events": {
    maxBatchSize: 10,
    maxBatchTimeout: 1,
    maxRetries: 2,
    retryDelay: 0,
    deadLetterQueue: "trellis-events-dlq",
  },
  "trellis-events-dlq": { maxBatchSize: 10, maxBatchTimeout: 1 },
};

export default defineConfig({
  plugins: [quietMissingSources],
  test: {
    projects: [
      defineProject({
        plugins: [
          quietMissingSources,
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
                // The secrets test webhooks verify deliveries with (test/workers/webhooks.test.ts).
                ...WEBHOOK_SECRETS,
                // The names definitions may use as `$env:NAME` (lib/secrets.ts); everything else is refused.
                WORKFLOW_SECRETS: `LLM_API_KEY, MCP_TOKEN, UNSET_SECRET, ${Object.keys(WEBHOOK_SECRETS).join(", ")}`,
                // Plain configuration definitions may name as `$env:NAME` (peers' base URLs); not scrubbed.
                WORKFLOW_VARS: "HTTP_TARGET_URL, LLM_SERVER_URL, MCP_SERVER_URL",
                // Every run is exported as a trace to the local OTLP receiver (docs/telemetry.md).
                OTEL_EXPORTER_OTLP_ENDPOINT: inject<string>("otlpReceiverUrl"),
                OTEL_EXPORTER_OTLP_HEADERS: `authorization=Bearer%20${TEST_SECRETS.OTLP_API_KEY}`,
                // Each run counts what it costs (coordinator/usage.ts): test/workers/usage.test.ts reads it.
                USAGE_METER: "on",
                CONTAINER_MODE: "local",
                SHELL_SERVER_URL: inject<string>("shellServerUrl"),
                SHELL_SERVER_TOKEN: inject<string>("shellServerToken"),
                TEST_MIGRATIONS: await readD1Migrations(fileURLToPath(new URL("./migrations", import.meta.url))),
              },
              // The events queue and its dead-letter queue, as wrangler.toml declares them, plus what only tests use:
              // a producer to the events queue (EVENTS_QUEUE), and a consumer of the dead-letter queue that keeps what
              // lands there in R2 (test/worker.ts), so a test reads it. Miniflare runs the queues locally.
              queueProducers: { EVENTS_QUEUE: "trellis-events", EVENTS_DLQ: "trellis-events-dlq" },
              queueConsumers: QUEUE_CONSUMERS,
              // The example caller Worker (examples/caller), beside the Worker under test: tests reach it through
              // CALLER, and it reaches Trellis through its own service binding to the TrellisApi entrypoint.
              serviceBindings: { CALLER: "trellis-caller" },
              workers: [
                {
                  name: "trellis-caller",
                  modules: true,
                  script: inject<string>("callerScript"),
                  compatibilityDate: "2026-11-01",
                  // The Worker under test runs as the plugin's runner, named after this project (`workers`).
                  serviceBindings: { TRELLIS: { name: "vitest-plugin-runner-workers", entrypoint: "TrellisApi" } },
                },
              ],
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
        plugins: [quietMissingSources],
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
