/**
 * The shell server: the small HTTP server that runs inside every Trellis
 * container (containers/Dockerfile) and, unchanged, as a local process in
 * `npm run dev` and the tests (local mode; see docs/containers.md). Plain Node
 * (22+), no dependencies, so the image needs nothing but this folder.
 *
 * Two kinds of credential, each sent as `Authorization: Bearer <token>` and
 * compared in constant time (as SHA-256 digests):
 * - the **server token** (`SHELL_SERVER_TOKEN`), which only registers a
 *   workspace (`PUT /v1/workspaces/:id`) and reads `/healthz`;
 * - a **workspace token**, one per workspace, chosen by whoever registered it
 *   (the Sandbox Durable Object that owns the container) and the only key to
 *   that workspace's routes. The server token does not open any workspace, and
 *   one workspace's token does not open another.
 * So a holder of the server token can create new workspaces, but never enter
 * one registered by someone else. Registrations are kept on disk
 * (`<root>/.registry/<encoded id>`, the token's SHA-256, never the token), so
 * a restart on the same root locks out no one and lets no one in.
 *
 * A request without the right credential answers 401 (`unauthorized`, or
 * `workspace_not_registered` for a workspace nobody registered: register it,
 * then retry). Bodies and answers are JSON. Errors answer
 * `{ "error": { "code", "message" } }`.
 *
 *   GET    /healthz                          (server token) 200 { ok: true, version, running, isolation: "uid" | "none" }
 *   PUT    /v1/workspaces/:id                (server token) { token } → { registered: true, created };
 *                                            409 workspace_taken if it is registered with another token.
 *                                            A workspace registered anew starts empty.
 *   (every route below: the workspace's own token)
 *   POST   /v1/workspaces/:id/exec           run one command (below)
 *   POST   /v1/workspaces/:id/files/read     { path, encoding?, max_bytes? } → { path, content, encoding, size, truncated }
 *   POST   /v1/workspaces/:id/files/write    { path, content, encoding?, append?, create_dirs? } → { path, size }
 *   POST   /v1/workspaces/:id/files/list     { path?, recursive?, include_hidden?, max_entries? } → { entries: [{ path, type, size }], truncated }
 *   POST   /v1/workspaces/:id/files/delete   { path, recursive? } → { path, deleted }
 *   DELETE /v1/workspaces/:id                kills the workspace's commands, deletes its files and its
 *                                            registration → { deleted }
 *
 * Workspaces: one directory per `:id` (a container's durable name, URL-encoded
 * in the path), `<root>/<encoded id>`, created on first use; its commands get
 * their own HOME in `<root>/.homes/<encoded id>` and TMPDIR in
 * `<root>/.tmp/<encoded id>`. In the image the root is `/workspaces`; locally
 * it is a fresh temporary directory. File paths are relative to the workspace
 * and may not leave it (`..`, absolute paths and symlinks pointing out are
 * refused with `path_outside_workspace`).
 *
 * exec body: `{ command?: string, argv?: string[], cwd?, env?, timeout_ms?,
 * max_output_bytes?, stdin? }` (exactly one of `command`, run by `bash -c` or
 * `sh -c`, and `argv`, run without a shell). Answer: `{ exit_code, signal,
 * timed_out, stdout, stderr, stdout_bytes, stderr_bytes, truncated,
 * duration_ms }`.
 * - The command runs in its own process group (a new session). On timeout
 *   the whole group is killed (SIGKILL) and `timed_out` is true. When the
 *   command ends, whatever it left running in its group is killed too, so
 *   no step leaves processes behind (a process that starts its own session,
 *   e.g. with `setsid`, escapes the group: the container's end takes it).
 * - Output: each stream keeps at most `max_output_bytes` (default 1 MiB): the
 *   first half and the last half, joined by a line saying how many bytes were
 *   left out; `stdout_bytes` / `stderr_bytes` count everything the command
 *   wrote and `truncated` says whether anything was left out.
 * - Environment: only PATH, HOME, LANG, TERM, TMPDIR, GIT_TERMINAL_PROMPT=0 and
 *   TRELLIS_WORKSPACE, plus the request's `env`: the server's own environment
 *   (and so, locally, the developer's) never reaches a command.
 *
 * Isolation between workspaces on one server (local mode serves every run
 * from one server; in production each container has one run's workspace and
 * its own server):
 * - **As root** (`isolation: "auto"`, the default, or `"uid"`), every
 *   workspace gets its own unprivileged uid and gid, recorded with its
 *   registration (workspace-users.mjs): its directory, HOME and TMPDIR belong
 *   to that uid, mode 0700, inside a root owned by root (0711) whose registry
 *   (0700) no workspace can read; its commands run as that uid with no
 *   supplementary groups and umask 077; the server's own file operations for
 *   it run in a helper process with that uid (file-agent.mjs). A command can
 *   then neither read, list, change nor signal anything of another workspace.
 *   Deleting a workspace ends every process of its uid, `setsid` leftovers too.
 * - **Not as root** (or `isolation: "none"`), every command runs as the
 *   server's own user and can read and change every workspace of this server
 *   through the file system (`cat ../<other workspace>/…`). The server says so
 *   on stderr when it starts ({@link NO_ISOLATION_WARNING}).
 *
 * Standalone: `SHELL_SERVER_TOKEN=… node containers/shell-server/server.mjs
 * [--host 127.0.0.1] [--port 8080] [--workspace-root DIR] [--watch-stdin]
 * [--max-lifetime-ms N] [--isolation auto|uid|none]` prints one JSON line `{ url, workspace_root }` and
 * runs until SIGINT/SIGTERM, or until its standard input closes with
 * `--watch-stdin` (its parent went away), or after `--max-lifetime-ms`.
 *
 * The modules, by concern (this folder is the image's whole server): routes.mjs
 * (routing, and which token opens what), registry.mjs (token digests and the
 * registrations on disk), workspaces.mjs (a workspace's places, its deletion,
 * the set-up of a uid per workspace), exec.mjs (commands), files.mjs (file
 * operations, which file-agent.mjs runs with a workspace's uid), paths.mjs
 * (ids, and paths that may not leave a workspace), http.mjs (JSON in and out),
 * workspace-users.mjs (uids and their processes) and file-agents.mjs (the file
 * helpers).
 */
import { randomBytes } from "node:crypto";
import { existsSync } from "node:fs";
import { mkdir, mkdtemp, realpath, rm } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { killGroup } from "./exec.mjs";
import { sendError } from "./http.mjs";
import { encodeWorkspaceId } from "./paths.mjs";
import { loadRegistry, sha256 } from "./registry.mjs";
import { handle } from "./routes.mjs";
import { adoptRegistrations, prepareIsolation } from "./workspaces.mjs";
import { idOf, isRoot, killAllOf } from "./workspace-users.mjs";

export {
  createCapture,
  DEFAULT_MAX_OUTPUT_BYTES,
  DEFAULT_TIMEOUT_MS,
  MAX_CONCURRENT_COMMANDS,
  MAX_OUTPUT_BYTES,
  MAX_TIMEOUT_MS,
} from "./exec.mjs";
export { MAX_READ_BYTES, runFileOperation } from "./files.mjs";
export { MAX_BODY_BYTES } from "./http.mjs";
export { decodeWorkspaceId, encodeWorkspaceId } from "./paths.mjs";
export { SHELL_SERVER_VERSION } from "./routes.mjs";

/** @typedef {import("./workspaces.mjs").Context} Context */

/** What the server prints on stderr, once, when it cannot keep workspaces apart. */
export const NO_ISOLATION_WARNING =
  "shell-server: WARNING: workspaces are NOT isolated from each other: every command runs as this server's own " +
  "user, so a command in one workspace can read, change and delete the files of every other workspace of this " +
  "server (and anything else that user can reach). Run the server as root to give each workspace its own uid " +
  '(docs/containers.md, "Local mode"). A server that serves one workspace only (a production container) is not affected.';

/**
 * @typedef {object} ShellServer
 * @property {string} url             e.g. `http://127.0.0.1:41234` (no trailing slash)
 * @property {number} port
 * @property {string} token           the server token: registers workspaces (and reads /healthz), opens none
 * @property {string} workspaceRoot   where workspaces live
 * @property {"uid" | "none"} isolation  "uid": each workspace has its own uid; "none": commands run as the server's user
 * @property {(id: string) => string} workspacePath  the directory of one workspace
 * @property {() => Promise<void>} close  stops the server, kills running commands, removes a temporary root
 */

/**
 * Starts the shell server.
 * @param {{ port?: number, host?: string, token?: string, workspaceRoot?: string, maxLifetimeMs?: number, isolation?: "auto" | "uid" | "none" }} [options]
 *   `port` 0 (default) picks a free port; `host` defaults to 127.0.0.1; `token`
 *   defaults to a fresh random one; `workspaceRoot` defaults to a fresh
 *   temporary directory (removed by close()); `maxLifetimeMs` closes the
 *   server after that long (never by default); `isolation` (default "auto":
 *   "uid" when the process runs as root, else "none") says whether each
 *   workspace gets its own uid; "uid" without root is an error.
 * @returns {Promise<ShellServer>}
 */
export async function startShellServer({
  port = 0,
  host = "127.0.0.1",
  token,
  workspaceRoot,
  maxLifetimeMs,
  isolation = "auto",
} = {}) {
  const secret = token ?? randomBytes(24).toString("base64url");
  if (secret.length < 16) throw new Error("the shell server token must have at least 16 characters");
  if (isolation === "uid" && !isRoot()) throw new Error('isolation "uid" needs a shell server running as root');
  const isolated = isolation === "uid" || (isolation === "auto" && isRoot());
  const ownsRoot = workspaceRoot === undefined;
  const root = ownsRoot ? await mkdtemp(join(tmpdir(), "trellis-shell-")) : resolve(workspaceRoot);
  await mkdir(root, { recursive: true });
  const rootReal = await realpath(root);
  const context = await createContext(rootReal, secret, isolated);
  const server = createHttpServer(context);

  await new Promise((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolveListen(undefined));
  });
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  const shownHost = host === "0.0.0.0" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;
  const close = createClose(server, context, ownsRoot, maxLifetimeMs);

  return {
    url: `http://${shownHost}:${address.port}`,
    port: address.port,
    token: secret,
    workspaceRoot: rootReal,
    isolation: isolated ? "uid" : "none",
    workspacePath: (id) => join(rootReal, encodeWorkspaceId(id)),
    close,
  };
}

/**
 * The server's state: its root, its shell, its running commands, the server
 * token's digest, the registrations read back from the root and, with a uid
 * per workspace, the uid allocator and file helpers.
 * @param {string} rootReal
 * @param {string} secret
 * @param {boolean} isolated
 * @returns {Promise<Context>}
 */
async function createContext(rootReal, secret, isolated) {
  const shell = existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";
  /** @type {Map<number, string>} running command pid (= process group id) → workspace id */
  const running = new Map();

  /** @type {Context} */
  const context = {
    root: rootReal,
    shell,
    running,
    serverDigest: sha256(secret),
    registry: await loadRegistry(rootReal),
    users: isolated ? await prepareIsolation(rootReal) : undefined,
  };
  if (context.users) await adoptRegistrations(context, context.users);
  else process.stderr.write(`${NO_ISOLATION_WARNING}\n`);
  return context;
}

/**
 * The HTTP server over {@link handle}: an unexpected error answers 500, a
 * malformed request 400, and no request is ever timed out.
 * @param {Context} context
 */
function createHttpServer(context) {
  const server = createServer((req, res) => {
    handle(req, res, context).catch((err) => {
      try {
        if (!res.headersSent) sendError(res, 500, "internal", String(err?.message ?? err));
        else res.destroy();
      } catch {
        /* socket gone */
      }
    });
  });
  server.on("clientError", (_err, socket) => {
    try {
      socket.end("HTTP/1.1 400 Bad Request\r\nconnection: close\r\ncontent-length: 0\r\n\r\n");
    } catch {
      /* ignore */
    }
  });
  // Commands may run for an hour: never time a request out.
  server.requestTimeout = 0;
  server.headersTimeout = 60_000;
  server.keepAliveTimeout = 5_000;
  return server;
}

/**
 * The server's close(), once: kills every command (and, with a uid per
 * workspace, every process of those uids), stops the server and removes a
 * temporary root. Commands are killed when the process exits too, and the
 * server closes itself after `maxLifetimeMs`.
 * @param {import("node:http").Server} server
 * @param {Context} context
 * @param {boolean} ownsRoot
 * @param {number | undefined} maxLifetimeMs
 * @returns {() => Promise<void>}
 */
function createClose(server, context, ownsRoot, maxLifetimeMs) {
  const killAll = () => {
    for (const pid of context.running.keys()) killGroup(pid);
    context.users?.agents.stopAll();
  };
  process.on("exit", killAll);
  /** @type {ReturnType<typeof setTimeout> | undefined} */
  let lifetime;
  /** @type {Promise<void> | undefined} */
  let closing;
  const close = () =>
    (closing ??= (async () => {
      if (lifetime) clearTimeout(lifetime);
      process.off("exit", killAll);
      killAll();
      if (context.users)
        await Promise.all(
          [...context.registry.values()].map((entry) =>
            entry.uid === undefined ? undefined : killAllOf(idOf(entry.uid), context.shell),
          ),
        );
      await new Promise((done) => {
        server.close(() => done(undefined));
        server.closeAllConnections();
      });
      if (ownsRoot) await rm(context.root, { recursive: true, force: true }).catch(() => {});
    })());
  if (maxLifetimeMs !== undefined && maxLifetimeMs > 0) {
    lifetime = setTimeout(() => void close(), maxLifetimeMs);
    lifetime.unref();
  }
  return close;
}

// ───────────────────────────── standalone ─────────────────────────────

/**
 * @param {string | boolean | undefined} value
 * @returns {"auto" | "uid" | "none"}
 */
function parseIsolation(value) {
  if (value === undefined || value === "auto" || value === "uid" || value === "none") return value ?? "auto";
  process.stderr.write("shell-server: --isolation is auto, uid or none\n");
  process.exit(2);
}

/** @param {string[]} argv */
function parseArgs(argv) {
  /** @type {Record<string, string | boolean>} */
  const options = {};
  for (let i = 0; i < argv.length; i += 1) {
    const arg = argv[i] ?? "";
    if (!arg.startsWith("--")) continue;
    const name = arg.slice(2);
    const next = argv[i + 1];
    if (name === "watch-stdin") options[name] = true;
    else if (next !== undefined) {
      options[name] = next;
      i += 1;
    }
  }
  return options;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const options = parseArgs(process.argv.slice(2));
  const token = process.env.SHELL_SERVER_TOKEN;
  if (!token) {
    process.stderr.write("shell-server: set SHELL_SERVER_TOKEN (at least 16 characters)\n");
    process.exit(2);
  }
  const server = await startShellServer({
    token,
    host: typeof options.host === "string" ? options.host : "127.0.0.1",
    port: typeof options.port === "string" ? Number(options.port) : 0,
    workspaceRoot: typeof options["workspace-root"] === "string" ? options["workspace-root"] : undefined,
    isolation: parseIsolation(options.isolation),
  });
  process.stdout.write(`${JSON.stringify({ url: server.url, workspace_root: server.workspaceRoot })}\n`);
  const stop = () => {
    server.close().finally(() => process.exit(0));
    setTimeout(() => process.exit(0), 3_000).unref();
  };
  const maxLifetimeMs = typeof options["max-lifetime-ms"] === "string" ? Number(options["max-lifetime-ms"]) : 0;
  if (maxLifetimeMs > 0) setTimeout(stop, maxLifetimeMs).unref();
  if (options["watch-stdin"] === true) {
    process.stdin.on("end", stop);
    process.stdin.on("close", stop);
    process.stdin.on("error", stop);
    process.stdin.resume();
  }
  process.once("SIGINT", stop);
  process.once("SIGTERM", stop);
  process.once("SIGHUP", stop);
}
