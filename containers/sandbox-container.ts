import { Container } from "@cloudflare/containers";
import { EngineError } from "../lib/errors.ts";
import type { SandboxReleaseResult, SandboxReply } from "../schemas/index.ts";
import { SandboxCore, type OwnerRecord, type OwnerStore, type SandboxOperation, type ShellTransport } from "./sandbox-core.ts";

/** The port the shell server listens on inside the image (containers/Dockerfile). */
export const SHELL_SERVER_PORT = 8080;
/**
 * How long a container stays up without requests when `SANDBOX_SLEEP_AFTER`
 * is not set. A container's disk does not survive a stop, so this bounds how
 * long a run may pause (e.g. at a human gate) and still find its workspace.
 */
export const DEFAULT_SLEEP_AFTER = "1h";

const OWNER_KEY = "sandbox:owner";
const TOKEN_KEY = "sandbox:token";

/** The Sandbox's settings from the Worker's environment (wrangler vars and secrets). */
interface SandboxEnv {
  /** `local`: forward to the shell server at SHELL_SERVER_URL instead of starting a container. */
  CONTAINER_MODE?: string;
  SHELL_SERVER_URL?: string;
  SHELL_SERVER_TOKEN?: string;
  /** `sleepAfter` of the container, e.g. `30m` or `2h`; default {@link DEFAULT_SLEEP_AFTER}. */
  SANDBOX_SLEEP_AFTER?: string;
}

/**
 * The container Durable Object: one per (run, declared resource), named
 * `<run_id>/<resource>`. It owns one container running the shell server
 * (containers/shell-server/server.mjs) and forwards the executor's commands
 * and file operations to it, refusing any run but its owner (see
 * {@link SandboxCore}). `release()`, called by the coordinator when the run
 * ends, stops the container.
 *
 * Local mode (`CONTAINER_MODE=local`, with `SHELL_SERVER_URL` and
 * `SHELL_SERVER_TOKEN`): no container is started; requests go to a shell
 * server running as a local process, where each container name has its own
 * workspace directory. `npm run dev` and the tests use it. Built on
 * `@cloudflare/containers`, whose constructor insists on `ctx.container`:
 * where the runtime has none (containers disabled, as in local mode), a stub
 * that refuses to start stands in for it.
 */
export class Sandbox extends Container {
  override defaultPort = SHELL_SERVER_PORT;
  override sleepAfter = DEFAULT_SLEEP_AFTER;
  readonly #core: SandboxCore;
  readonly #local: boolean;

  constructor(ctx: DurableObjectState<{}>, env: Env) {
    const hasContainer = ctx.container !== undefined;
    super(hasContainer ? ctx : withStubContainer(ctx), env);
    const settings = env as SandboxEnv;
    this.#local = settings.CONTAINER_MODE === "local";
    // The library accepts "<n>s", "<n>m" or "<n>h" and throws on anything else: ignore a bad value.
    if (settings.SANDBOX_SLEEP_AFTER !== undefined && /^\d+[smh]$/.test(settings.SANDBOX_SLEEP_AFTER)) {
      this.sleepAfter = settings.SANDBOX_SLEEP_AFTER;
    }
    const store = createOwnerStore(ctx.storage.kv);
    let transport: ShellTransport | undefined;
    this.#core = new SandboxCore({
      store,
      name: ctx.id.name,
      now: () => new Date(),
      transport: () => (transport ??= this.#createTransport(settings, hasContainer, ctx.storage.kv)),
    });
  }

  /** Runs one command in the container's workspace (SandboxExecRequest → SandboxExecResult). */
  exec(request: unknown): Promise<SandboxReply<unknown>> {
    return this.#call("exec", request);
  }

  readFile(request: unknown): Promise<SandboxReply<unknown>> {
    return this.#call("readFile", request);
  }

  writeFile(request: unknown): Promise<SandboxReply<unknown>> {
    return this.#call("writeFile", request);
  }

  listFiles(request: unknown): Promise<SandboxReply<unknown>> {
    return this.#call("listFiles", request);
  }

  deleteFile(request: unknown): Promise<SandboxReply<unknown>> {
    return this.#call("deleteFile", request);
  }

  /**
   * Stops the container and deletes its workspace; the owner record stays
   * (marked released) so the container never passes to another run. Called
   * by the coordinator when the run ends; safe to call again.
   */
  async release(): Promise<SandboxReleaseResult> {
    const result = await this.#core.release();
    this.ctx.storage.kv.delete(TOKEN_KEY);
    return result;
  }

  /** Local mode starts no container, so the library's alarm loop has nothing to watch. */
  override async alarm(alarmProps?: AlarmInvocationInfo): Promise<void> {
    if (this.#local || this.ctx.container === undefined || isStub(this.ctx.container)) {
      await this.ctx.storage.deleteAlarm();
      return;
    }
    await super.alarm(alarmProps);
  }

  #call(operation: SandboxOperation, request: unknown): Promise<SandboxReply<unknown>> {
    return this.#core.call(operation, request);
  }

  #createTransport(settings: SandboxEnv, hasContainer: boolean, kv: SyncKvStorage): ShellTransport {
    if (this.#local) {
      return createLocalTransport(settings);
    }
    if (!hasContainer) {
      throw EngineError.terminal(
        "container.unavailable",
        "containers are not enabled here (no Docker, or dev.enable_containers = false): set CONTAINER_MODE=local with SHELL_SERVER_URL and SHELL_SERVER_TOKEN to use a local shell server (docs/containers.md)",
      );
    }
    return this.#createContainerTransport(kv);
  }

  /** Production: the container's own port. The token is made per container and handed to it at start. */
  #createContainerTransport(kv: SyncKvStorage): ShellTransport {
    const token = () => {
      let value = kv.get<string>(TOKEN_KEY);
      if (value === undefined) {
        value = randomToken();
        kv.put(TOKEN_KEY, value);
      }
      this.envVars = { SHELL_SERVER_TOKEN: value };
      return value;
    };
    return {
      request: async (method, path, body) => {
        const response = await this.containerFetch(`http://container${path}`, jsonInit(method, token(), body), SHELL_SERVER_PORT);
        return { status: response.status, json: await readJson(response) };
      },
      shutdown: async () => {
        if (this.ctx.container?.running === true) {
          await this.destroy();
        }
      },
    };
  }
}

/** Local mode: the shell server started by `npm run dev` or the test setup. */
export function createLocalTransport(settings: SandboxEnv, fetcher: typeof fetch = (input, init) => fetch(input, init)): ShellTransport {
  const base = settings.SHELL_SERVER_URL?.replace(/\/+$/, "");
  const token = settings.SHELL_SERVER_TOKEN;
  if (!base || !token) {
    throw EngineError.terminal("container.unavailable", "CONTAINER_MODE=local needs SHELL_SERVER_URL and SHELL_SERVER_TOKEN (docs/containers.md)");
  }
  return {
    async request(method, path, body) {
      const response = await fetcher(`${base}${path}`, jsonInit(method, token, body));
      return { status: response.status, json: await readJson(response) };
    },
    async shutdown(workspace) {
      const response = await fetcher(`${base}/v1/workspaces/${encodeURIComponent(workspace)}`, jsonInit("DELETE", token, undefined));
      await response.body?.cancel();
      if (response.status !== 200) {
        throw EngineError.retryable("container.unavailable", `deleting the local workspace answered ${response.status}`);
      }
    },
  };
}

function jsonInit(method: string, token: string, body: unknown): RequestInit {
  const headers: Record<string, string> = { authorization: `Bearer ${token}` };
  if (body !== undefined) {
    headers["content-type"] = "application/json";
  }
  return { method, headers, body: body === undefined ? undefined : JSON.stringify(body) };
}

async function readJson(response: Response): Promise<unknown> {
  const text = await response.text();
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return { error: { code: "bad_answer", message: text.slice(0, 200) } };
  }
}

function randomToken(): string {
  const bytes = crypto.getRandomValues(new Uint8Array(24));
  return Array.from(bytes, (byte) => byte.toString(16).padStart(2, "0")).join("");
}

function createOwnerStore(kv: SyncKvStorage): OwnerStore {
  return {
    get: () => kv.get<OwnerRecord>(OWNER_KEY),
    put: (record) => kv.put(OWNER_KEY, record),
  };
}

// ───────────────────────────── the stand-in for ctx.container ─────────────────────────────

const STUB_MARK = Symbol("trellis.stubContainer");

function refuse(): never {
  throw EngineError.terminal("container.unavailable", "no container runtime here: the Sandbox runs in local mode or containers are disabled");
}

/**
 * What the library sees as `ctx.container` where the runtime gives none:
 * never running, and refusing to start.
 */
const STUB_CONTAINER = {
  [STUB_MARK]: true,
  running: false,
  images: {},
  start: refuse,
  monitor: () => new Promise<void>(() => {}),
  destroy: async () => {},
  signal: () => {},
  getTcpPort: refuse,
  setInactivityTimeout: async () => {},
  interceptOutboundHttp: async () => {},
  interceptAllOutboundHttp: async () => {},
  interceptOutboundHttps: async () => {},
  snapshotContainer: refuse,
  exec: refuse,
  inspect: async () => null,
} as const;

function isStub(container: object): boolean {
  return STUB_MARK in container;
}

function withStubContainer(ctx: DurableObjectState<{}>): DurableObjectState<{}> {
  Object.defineProperty(ctx, "container", { value: STUB_CONTAINER, configurable: true });
  return ctx;
}
