import { Container } from "@cloudflare/containers";
import { EngineError } from "../lib/errors.ts";
import type { SandboxReleaseResult, SandboxReply } from "../schemas/sandbox.ts";
import {
  SandboxCore,
  type OwnerRecord,
  type OwnerStore,
  type SandboxOperation,
  type ShellTransport,
} from "./sandbox-core.ts";

/** The port the shell server listens on inside the image (containers/Dockerfile). */
export const SHELL_SERVER_PORT = 8080;
/**
 * How long a container stays up without requests when `SANDBOX_SLEEP_AFTER`
 * is not set. A container's disk does not survive a stop, so this bounds how
 * long a run may pause (e.g. at a human gate) and still find its workspace.
 */
export const DEFAULT_SLEEP_AFTER = "1h";

const OWNER_KEY = "sandbox:owner";
/** Production: the token the container's shell server is started with (its server token). */
const TOKEN_KEY = "sandbox:token";
/** Both modes: the workspace's own credential, registered with the shell server on first use. */
const WORKSPACE_TOKEN_KEY = "sandbox:workspace-token";

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
 * workspace directory. `npm run dev` and the tests use it.
 *
 * Credentials: the Sandbox makes a random **workspace token** on first use and
 * keeps it in its own storage; nobody else ever sees it (not the executor, not
 * the run). It registers that token for its workspace with the shell server's
 * **server token** (`PUT /v1/workspaces/<name>`) the first time the server does
 * not know the workspace, and then sends only the workspace token. The server
 * token opens no workspace, so whoever holds it (in local mode it is a Worker
 * secret; in production each container gets its own, made here) can never
 * enter another run's workspace. Release deletes the workspace and its
 * registration, then forgets both tokens. Built on
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
    this.ctx.storage.kv.delete(WORKSPACE_TOKEN_KEY);
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
      return createLocalTransport(settings, () => storedToken(kv, WORKSPACE_TOKEN_KEY));
    }
    if (!hasContainer) {
      throw EngineError.terminal(
        "container.unavailable",
        "containers are not enabled here (no Docker, or dev.enable_containers = false): set CONTAINER_MODE=local with SHELL_SERVER_URL and SHELL_SERVER_TOKEN to use a local shell server (docs/containers.md)",
      );
    }
    return this.#createContainerTransport(kv);
  }

  /**
   * Production: the container's own port. Its server token is made per
   * container and handed to it at start; the workspace inside is registered
   * like a local one (after a container restart too, since a new container
   * starts with an empty registry).
   */
  #createContainerTransport(kv: SyncKvStorage): ShellTransport {
    const serverToken = () => {
      const value = storedToken(kv, TOKEN_KEY);
      this.envVars = { SHELL_SERVER_TOKEN: value };
      return value;
    };
    const workspace = createWorkspaceClient(
      async (method, path, token, body) => {
        serverToken(); // containerFetch starts a stopped container with the envVars set now
        return this.containerFetch(`http://container${path}`, jsonInit(method, token, body), SHELL_SERVER_PORT);
      },
      { server: serverToken, workspace: () => storedToken(kv, WORKSPACE_TOKEN_KEY) },
    );
    return {
      request: workspace.request,
      shutdown: async () => {
        if (this.ctx.container?.running === true) {
          await this.destroy();
        }
      },
    };
  }
}

/** One HTTP request to a shell server with a bearer token. */
type SendRequest = (method: string, path: string, token: string, body: unknown) => Promise<Response>;

/**
 * Requests to a workspace carry the workspace's own token. When the server
 * answers that nobody registered the workspace (the first use, a new
 * container, a shell server restarted on a fresh root), the workspace is
 * registered with the server token and the request is sent once more.
 */
function createWorkspaceClient(
  send: SendRequest,
  tokens: { server: () => string; workspace: () => string },
): Pick<ShellTransport, "request"> {
  const register = async (workspace: string) => {
    const response = await send("PUT", `/v1/workspaces/${encodeURIComponent(workspace)}`, tokens.server(), {
      token: tokens.workspace(),
    });
    const json = await readJson(response);
    if (response.status === 200) {
      return;
    }
    if (response.status === 409 || response.status === 401) {
      const why =
        response.status === 409
          ? "has this workspace registered with another credential"
          : "refused the Sandbox's server token (SHELL_SERVER_TOKEN)";
      throw EngineError.terminal("container.unauthorized", `the shell server ${why}: ${errorMessage(json)}`);
    }
    if (response.status === 429 || response.status >= 500) {
      throw EngineError.retryable(
        "container.unavailable",
        `registering the workspace answered ${response.status}: ${errorMessage(json)}`,
      );
    }
    throw EngineError.terminal(
      "container.bad_request",
      `registering the workspace answered ${response.status}: ${errorMessage(json)}`,
    );
  };
  return {
    async request(method, path, body, workspace) {
      let response = await send(method, path, tokens.workspace(), body);
      let json = await readJson(response);
      if (response.status === 401 && errorCode(json) === "workspace_not_registered") {
        await register(workspace);
        response = await send(method, path, tokens.workspace(), body);
        json = await readJson(response);
      }
      return { status: response.status, json };
    },
  };
}

/**
 * Local mode: the shell server started by `npm run dev` or the test setup,
 * reached with `workspaceToken` (the Sandbox's own, see {@link Sandbox}).
 */
export function createLocalTransport(
  settings: SandboxEnv,
  workspaceToken: () => string,
  fetcher: typeof fetch = (input, init) => fetch(input, init),
): ShellTransport {
  const base = settings.SHELL_SERVER_URL?.replace(/\/+$/, "");
  const serverToken = settings.SHELL_SERVER_TOKEN;
  if (!base || !serverToken) {
    throw EngineError.terminal(
      "container.unavailable",
      "CONTAINER_MODE=local needs SHELL_SERVER_URL and SHELL_SERVER_TOKEN (docs/containers.md)",
    );
  }
  const client = createWorkspaceClient(
    (method, path, token, body) => fetcher(`${base}${path}`, jsonInit(method, token, body)),
    { server: () => serverToken, workspace: workspaceToken },
  );
  return {
    request: client.request,
    async shutdown(workspace) {
      const answer = await client.request(
        "DELETE",
        `/v1/workspaces/${encodeURIComponent(workspace)}`,
        undefined,
        workspace,
      );
      if (answer.status !== 200) {
        throw EngineError.retryable(
          "container.unavailable",
          `deleting the local workspace answered ${answer.status}: ${errorMessage(answer.json)}`,
        );
      }
    },
  };
}

/** A random token kept under `key`, made on first use. */
function storedToken(kv: SyncKvStorage, key: string): string {
  let value = kv.get<string>(key);
  if (value === undefined) {
    value = randomToken();
    kv.put(key, value);
  }
  return value;
}

function errorCode(json: unknown): string | undefined {
  const error =
    typeof json === "object" && json !== null && "error" in json ? (json as { error: unknown }).error : undefined;
  const code =
    typeof error === "object" && error !== null && "code" in error ? (error as { code: unknown }).code : undefined;
  return typeof code === "string" ? code : undefined;
}

function errorMessage(json: unknown): string {
  const error =
    typeof json === "object" && json !== null && "error" in json ? (json as { error: unknown }).error : undefined;
  const message =
    typeof error === "object" && error !== null && "message" in error
      ? (error as { message: unknown }).message
      : undefined;
  return typeof message === "string" ? message : (JSON.stringify(json)?.slice(0, 200) ?? "no body");
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
  throw EngineError.terminal(
    "container.unavailable",
    "no container runtime here: the Sandbox runs in local mode or containers are disabled",
  );
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
