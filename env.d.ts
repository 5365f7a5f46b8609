/** The Worker's bindings (wrangler.toml) and secrets. */
interface Env {
  COORDINATOR: DurableObjectNamespace<import("./coordinator/coordinator.ts").Coordinator>;
  CATALOG: DurableObjectNamespace<import("./catalog/catalog.ts").Catalog>;
  /** One event hub per event name and shard (events/): retained events, waits, deliveries. */
  EVENT_HUB: DurableObjectNamespace<import("./events/hub.ts").EventHub>;
  /** One object per schedule (schedules/), named by its id: its alarm starts each slot's run. */
  SCHEDULE_HUB: DurableObjectNamespace<import("./schedules/hub.ts").ScheduleHub>;
  /** One limit object per (limit id, key) (limits/): slots, windows and the queue of waiters. */
  LIMITS: DurableObjectNamespace<import("./limits/keeper.ts").LimitKeeper>;
  /** How long a step's slot of a limit stays held without a renewal, in ms (default 30000). */
  LIMIT_LEASE_MS?: string;
  /** Hubs per event name, `1` to `16` (default 1; events/route.ts). */
  EVENT_HUB_SHARDS?: string;
  /** The dead-letter queue of the events queue (wrangler.toml `queues.producers`): messages that are not events, with why (src/queue.ts). */
  EVENTS_DLQ?: Queue<import("./schemas/events.ts").DeadLetter>;
  /** This deployment's version (wrangler.toml `[version_metadata]`): keys the shared snapshot cache (catalog/snapshots.ts). */
  CF_VERSION_METADATA?: WorkerVersionMetadata;
  /** This Worker's own `Executor` entrypoint. Typed narrowly: results are parsed at the call site. */
  EXECUTOR: ExecutorBinding;
  /** One container Durable Object per (run, declared resource), named `<run_id>/<resource>`. */
  SANDBOX?: SandboxNamespace;
  /** The run index (D1, migrations/): one row per run, written by its coordinator, read by `GET /v1/runs`. */
  RUN_INDEX: D1Database;
  /** Days a completed run is kept, fractions allowed (a workflow's `retention` overrides it); unset: kept. */
  RETENTION_COMPLETED_DAYS?: string;
  /** Days a failed run is kept; unset: kept. */
  RETENTION_FAILED_DAYS?: string;
  /** Days a cancelled run is kept; unset: kept. */
  RETENTION_CANCELLED_DAYS?: string;
  /** `true`: archive the journal before deleting a run whose workflow's `retention` does not say (default false). */
  RETENTION_ARCHIVE?: string;
  /** `on`: each run's coordinator counts its Durable Object calls, rows and bytes and logs them when it ends (coordinator/usage.ts; the bench turns it on). */
  USAGE_METER?: string;
  /** Artifacts of the `write_artifact` tool (R2), keyed `runs/<run_id>/artifacts/<name>`. */
  ARTIFACTS?: R2Bucket;
  /**
   * Large values, once each, keyed `sha256/<hex>` (blobs/store.ts; docs/architecture.md, "Blobs"), and
   * archived journals, `archive/<run_id>/journal.json` (coordinator/retention.ts).
   */
  BLOBS: R2Bucket;
  /** A value whose canonical JSON is over this many bytes is stored as a blob (default 65536). */
  BLOB_THRESHOLD_BYTES?: string;
  /** `local`: the Sandbox forwards to the shell server at SHELL_SERVER_URL instead of a container (docs/containers.md). */
  CONTAINER_MODE?: string;
  SHELL_SERVER_URL?: string;
  /** Bearer token of the local shell server (local mode only). */
  SHELL_SERVER_TOKEN?: string;
  /** How long an idle container stays up, e.g. `30m`; default `1h`. */
  SANDBOX_SLEEP_AFTER?: string;
  /** Comma-separated names definitions may use as `$env:NAME` (lib/secrets.ts, docs/security.md). */
  WORKFLOW_SECRETS?: string;
  /** Comma-separated plain configuration names definitions may use as `$env:NAME`, not scrubbed (lib/secrets.ts). */
  WORKFLOW_VARS?: string;
  /** Comma-separated bearer tokens accepted by the HTTP API, each an admin (docs/security.md, "Roles"). */
  API_TOKENS: string;
  /** Cloudflare Access (docs/security.md): the team domain, `<team>.cloudflareaccess.com`; with ACCESS_AUD, assertions are verified. */
  ACCESS_TEAM_DOMAIN?: string;
  /** The Access application's audience (AUD) tag. */
  ACCESS_AUD?: string;
  /** JSON `{ default?, emails?, groups? }`: the roles of Access identities (schemas/access.ts). */
  ACCESS_ROLES?: string;
  /** Where the team's key set is fetched; default `https://<ACCESS_TEAM_DOMAIN>/cdn-cgi/access/certs` (tests point it at a local peer). */
  ACCESS_CERTS_URL?: string;
  /**
   * Optional: the key stored tokens' secrets are hashed with (src/auth.ts `tokenHash`); when absent, the
   * journal signing key. Set it to the old JOURNAL_SIGNING_KEY when rotating that key, so stored tokens keep working.
   */
  TOKEN_HASH_KEY?: string;
  /** Base64 PKCS#8 Ed25519 private key that signs journals. */
  JOURNAL_SIGNING_KEY: string;
  /**
   * `allow` lets a plan request pre-approve high-risk steps (`approved_steps` on POST /v1/plans):
   * they run without their approval gate. Off by default (docs/plans.md).
   */
  PLAN_PREAPPROVAL?: string;
  /** Optional JWKS (JSON) of retired journal keys still served for verification. */
  JOURNAL_RETIRED_KEYS?: string;
  /** Workers AI: `workers-ai` models and vector embeddings. Remote-only: absent under `wrangler dev --local`. */
  AI?: Ai;
  /** The default Vectorize index (`index: "default"`); an index `docs` is served by `VECTORIZE_DOCS`. Remote-only. */
  VECTORIZE?: Vectorize;
  /** Analytics Engine dataset that `metric` actions write to. */
  METRICS?: AnalyticsEngineDataset;
  /** The OTLP/HTTP base endpoint runs are exported to as traces (`<it>/v1/traces`); unset: no export (docs/telemetry.md). */
  OTEL_EXPORTER_OTLP_ENDPOINT?: string;
  /** Secret: headers of each export, `k=v,k2=v2` (values percent-encoded), e.g. the collector's API key. */
  OTEL_EXPORTER_OTLP_HEADERS?: string;
  /** The exported spans' `service.name`; default `trellis`. */
  OTEL_SERVICE_NAME?: string;
}

declare namespace Cloudflare {
  interface Env extends globalThis.Env {}
}

/** The executor's RPC surface as the coordinator sees it (the full `Service<Executor>` type is too deep for tsc). */
interface ExecutorBinding {
  runTasks(group: unknown): Promise<ReadableStream<Uint8Array>>;
  runTaskList(group: unknown): Promise<unknown[]>;
}

/**
 * The container namespace as the coordinator and the executor use it (see
 * containers/). Typed narrowly like EXECUTOR: requests and replies are the
 * schemas in schemas/sandbox.ts, parsed at the call site.
 */
interface SandboxNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): SandboxStub;
}

interface SandboxStub {
  exec(request: unknown): Promise<unknown>;
  readFile(request: unknown): Promise<unknown>;
  writeFile(request: unknown): Promise<unknown>;
  listFiles(request: unknown): Promise<unknown>;
  deleteFile(request: unknown): Promise<unknown>;
  release(): Promise<unknown>;
}
