/**
 * What the code expects of `wrangler.toml`, binding by binding: every member
 * of `Env` in env.d.ts has a row here (test/node/deploy-check.test.ts holds
 * them equal), so a binding the code starts to use cannot be forgotten by the
 * check that `npm run deploy:check` runs before a deploy.
 */
import { existsSync } from "node:fs";
import { isAbsolute, join } from "node:path";

/**
 * @typedef {{ kind: "durable_object", className: string }
 *   | { kind: "service", entrypoint: string }
 *   | { kind: "d1" } | { kind: "r2" } | { kind: "ai" } | { kind: "vectorize" } | { kind: "analytics_engine" }
 *   | { kind: "dead_letter_queue" }
 *   | { kind: "var" } | { kind: "secret" } | { kind: "local" } | { kind: "assets" } | { kind: "version_metadata" }} Expectation
 */

/** @type {Record<string, Expectation>} */
export const EXPECTED = {
  COORDINATOR: { kind: "durable_object", className: "Coordinator" },
  CATALOG: { kind: "durable_object", className: "Catalog" },
  SANDBOX: { kind: "durable_object", className: "Sandbox" },
  EVENT_HUB: { kind: "durable_object", className: "EventHub" },
  SCHEDULE_HUB: { kind: "durable_object", className: "ScheduleHub" },
  LIMITS: { kind: "durable_object", className: "LimitKeeper" },
  EXECUTOR: { kind: "service", entrypoint: "Executor" },
  RUN_INDEX: { kind: "d1" },
  ARTIFACTS: { kind: "r2" },
  // Large values, content-addressed (blobs/store.ts).
  BLOBS: { kind: "r2" },
  AI: { kind: "ai" },
  VECTORIZE: { kind: "vectorize" },
  METRICS: { kind: "analytics_engine" },
  // Where the events queue's consumer sends messages that are not events (src/queue.ts): the consumer's own DLQ.
  EVENTS_DLQ: { kind: "dead_letter_queue" },
  // Keys the shared snapshot cache by deployment (catalog/snapshots.ts).
  CF_VERSION_METADATA: { kind: "version_metadata" },
  WORKFLOW_SECRETS: { kind: "var" },
  WORKFLOW_VARS: { kind: "var" },
  // Hubs per event name (events/route.ts); 1 when unset.
  EVENT_HUB_SHARDS: { kind: "var" },
  // How long a step's slot of a limit stays held without a renewal (limits/route.ts); 30000 when unset.
  LIMIT_LEASE_MS: { kind: "var" },
  // A value over this many bytes (canonical JSON, UTF-8) is stored as a blob (blobs/offload.ts); 65536 when unset.
  BLOB_THRESHOLD_BYTES: { kind: "var" },
  API_TOKENS: { kind: "secret" },
  JOURNAL_SIGNING_KEY: { kind: "secret" },
  JOURNAL_RETIRED_KEYS: { kind: "var" },
  // The key stored tokens are hashed with (POST /v1/tokens); JOURNAL_SIGNING_KEY's derived key when unset.
  TOKEN_HASH_KEY: { kind: "secret" },
  // Cloudflare Access (docs/security.md): verified when the team domain and audience are set; roles by ACCESS_ROLES.
  ACCESS_TEAM_DOMAIN: { kind: "var" },
  ACCESS_AUD: { kind: "var" },
  ACCESS_ROLES: { kind: "var" },
  // Tests only: where the key set is fetched instead of the team's (a deploy must not redirect it).
  ACCESS_CERTS_URL: { kind: "local" },
  // Local development only (docs/containers.md): a deploy must not set them.
  CONTAINER_MODE: { kind: "local" },
  SHELL_SERVER_URL: { kind: "local" },
  SHELL_SERVER_TOKEN: { kind: "local" },
  SANDBOX_SLEEP_AFTER: { kind: "var" },
  // "allow" lets a plan request pre-approve high-risk steps (docs/plans.md); off when unset.
  PLAN_PREAPPROVAL: { kind: "var" },
  // OpenTelemetry export of runs as traces (docs/telemetry.md): off unless the endpoint is set.
  OTEL_EXPORTER_OTLP_ENDPOINT: { kind: "var" },
  // The collector's headers (an API key): a secret, never in [vars].
  OTEL_EXPORTER_OTLP_HEADERS: { kind: "secret" },
  OTEL_SERVICE_NAME: { kind: "var" },
  // Retention (docs/architecture.md#retention): days a run is kept per end status, and archiving; unset: kept.
  RETENTION_COMPLETED_DAYS: { kind: "var" },
  RETENTION_FAILED_DAYS: { kind: "var" },
  RETENTION_CANCELLED_DAYS: { kind: "var" },
  RETENTION_ARCHIVE: { kind: "var" },
  USAGE_METER: { kind: "var" },
};

/**
 * Checks a wrangler config (as wrangler's `unstable_readConfig` returns it)
 * against {@link EXPECTED}: one `{ ok, what }` line per expectation.
 * @param {any} config
 * @returns {{ ok: boolean, what: string }[]}
 */
export function checkConfig(config) {
  /** @type {{ ok: boolean, what: string }[]} */
  const lines = [];
  const line = (/** @type {boolean} */ ok, /** @type {string} */ what) => lines.push({ ok, what });
  const vars = config.vars ?? {};
  for (const [name, expected] of Object.entries(EXPECTED)) {
    lines.push(...checkBinding(config, name, expected, vars));
  }
  const sqliteClasses = new Set((config.migrations ?? []).flatMap((m) => m.new_sqlite_classes ?? []));
  for (const binding of config.durable_objects?.bindings ?? []) {
    line(sqliteClasses.has(binding.class_name), `${binding.class_name} is created by a migration as a SQLite class`);
  }
  for (const container of config.containers ?? []) {
    const image = isAbsolute(container.image) ? container.image : join(process.cwd(), container.image);
    line(existsSync(image), `container ${container.class_name}: its image ${container.image} exists`);
  }
  return lines;
}

/** @returns {{ ok: boolean, what: string }[]} */
function checkBinding(
  /** @type {any} */ config,
  /** @type {string} */ name,
  /** @type {Expectation} */ expected,
  /** @type {Record<string, unknown>} */ vars,
) {
  const one = (/** @type {boolean} */ ok, /** @type {string} */ what) => [{ ok, what: `${name}: ${what}` }];
  switch (expected.kind) {
    case "durable_object": {
      const binding = config.durable_objects?.bindings?.find((b) => b.name === name);
      return one(binding?.class_name === expected.className, `Durable Object binding of class ${expected.className}`);
    }
    case "service": {
      const binding = config.services?.find((s) => s.binding === name);
      return one(
        binding?.service === config.name && binding?.entrypoint === expected.entrypoint,
        `service binding to this Worker (${config.name}), entrypoint ${expected.entrypoint}`,
      );
    }
    case "d1": {
      const binding = config.d1_databases?.find((d) => d.binding === name);
      const dir = binding?.migrations_dir;
      return one(Boolean(binding && dir && existsSync(dir)), `D1 database with its migrations_dir (${dir ?? "none"})`);
    }
    case "r2":
      return one(Boolean(config.r2_buckets?.some((b) => b.binding === name)), "R2 bucket");
    case "ai":
      return one(config.ai?.binding === name, "Workers AI binding");
    case "vectorize":
      return one(Boolean(config.vectorize?.some((v) => v.binding === name)), "Vectorize index");
    case "analytics_engine":
      return one(
        Boolean(config.analytics_engine_datasets?.some((a) => a.binding === name)),
        "Analytics Engine dataset",
      );
    case "dead_letter_queue": {
      const producer = config.queues?.producers?.find((p) => p.binding === name);
      const consumer = config.queues?.consumers?.find((c) => producer && c.dead_letter_queue === producer.queue);
      return one(
        Boolean(producer && consumer),
        `queue producer to the dead-letter queue of a consumer (${consumer?.queue ?? "none"} → ${producer?.queue ?? "none"})`,
      );
    }
    case "version_metadata":
      return one(config.version_metadata?.binding === name, "version metadata binding");
    case "var":
      return one(typeof vars[name] === "string" || !(name in vars), "a plain var (or unset)");
    case "secret":
      return one(!(name in vars), "a secret, never in [vars] (set it with `wrangler secret put`)");
    case "local":
      return one(!(name in vars), "local development only, not in [vars] of a deploy");
    default:
      return one(true, expected.kind);
  }
}
