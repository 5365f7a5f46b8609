/** The Worker's bindings (wrangler.toml) and secrets. */
interface Env {
  COORDINATOR: DurableObjectNamespace<import("./coordinator/coordinator.ts").Coordinator>;
  CATALOG: DurableObjectNamespace<import("./catalog/catalog.ts").Catalog>;
  /** This Worker's own `Executor` entrypoint. Typed narrowly: results are parsed at the call site. */
  EXECUTOR: ExecutorBinding;
  /** One container Durable Object per (run, declared resource), named `<run_id>/<resource>`. */
  SANDBOX?: SandboxNamespace;
  /** Comma-separated bearer tokens accepted by the HTTP API. */
  API_TOKENS: string;
  /** Base64 PKCS#8 Ed25519 private key that signs journals. */
  JOURNAL_SIGNING_KEY: string;
  /** Optional JWKS (JSON) of retired journal keys still served for verification. */
  JOURNAL_RETIRED_KEYS?: string;
}

declare namespace Cloudflare {
  interface Env extends globalThis.Env {}
}

/** The executor's RPC surface as the coordinator sees it (the full `Service<Executor>` type is too deep for tsc). */
interface ExecutorBinding {
  runTask(payload: unknown): Promise<unknown>;
  runTasks(payloads: unknown[]): Promise<ReadableStream<Uint8Array>>;
}

/** What the coordinator uses of the container namespace (see containers/). */
interface SandboxNamespace {
  idFromName(name: string): DurableObjectId;
  get(id: DurableObjectId): { release(): Promise<unknown> };
}
