import { cloudflareTest } from "@cloudflare/vitest-plugin";
import { defineConfig, defineProject } from "vitest/config";

/**
 * Two projects:
 * - `workers`: everything that runs in production runs here, inside workerd,
 *   against real Durable Objects, SQLite and service bindings.
 * - `node`: the tools that run on a developer's machine (the journal verifier
 *   CLI, the local test peers), tested as ordinary Node modules.
 *
 * `test/global-setup.ts` starts the local peers (on 127.0.0.1) and provides
 * their addresses and a fresh journal key to the Worker's bindings.
 */
export default defineConfig({
  test: {
    projects: [
      defineProject({
        plugins: [
          cloudflareTest(({ inject }) => ({
            wrangler: { configPath: "./wrangler.toml" },
            miniflare: {
              bindings: {
                API_TOKENS: "test-token,second-token",
                JOURNAL_SIGNING_KEY: inject<string>("journalSigningKey"),
                HTTP_TARGET_URL: inject<string>("httpTargetUrl"),
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
