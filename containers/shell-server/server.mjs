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
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import {
  appendFile,
  chmod,
  lchown,
  lstat,
  mkdir,
  mkdtemp,
  open,
  readdir,
  readFile,
  realpath,
  rename,
  rm,
  stat,
  writeFile,
} from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";
import {
  createFileAgents,
  createUidAllocator,
  isRoot,
  killAllOf,
  probeWorkspaceUser,
  spawnPrivate,
} from "./workspace-users.mjs";

export const SHELL_SERVER_VERSION = "1";

/** What the server prints on stderr, once, when it cannot keep workspaces apart. */
export const NO_ISOLATION_WARNING =
  "shell-server: WARNING: workspaces are NOT isolated from each other: every command runs as this server's own " +
  "user, so a command in one workspace can read, change and delete the files of every other workspace of this " +
  "server (and anything else that user can reach). Run the server as root to give each workspace its own uid " +
  '(docs/containers.md, "Local mode"). A server that serves one workspace only (a production container) is not affected.';

/** A command's bound when the request gives none. */
export const DEFAULT_TIMEOUT_MS = 60_000;
/** The longest a command may run: 1 hour. */
export const MAX_TIMEOUT_MS = 3_600_000;
/** Output kept per stream when the request gives no `max_output_bytes`: 1 MiB. */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024;
/** The most output a request may ask to keep per stream: 16 MiB. */
export const MAX_OUTPUT_BYTES = 16 * 1024 * 1024;
/** Largest request body (a base64 file write): 48 MiB. */
export const MAX_BODY_BYTES = 48 * 1024 * 1024;
/** Largest file read in one request: 32 MiB. */
export const MAX_READ_BYTES = 32 * 1024 * 1024;
/** Commands running at once, over all workspaces; past it requests answer 429. */
export const MAX_CONCURRENT_COMMANDS = 32;
/** After a command exits, how long its output pipes may stay open (held by leftovers) before they are cut. */
const DRAIN_GRACE_MS = 2_000;
const MAX_LIST_ENTRIES = 10_000;
const DEFAULT_LIST_ENTRIES = 1_000;
const MAX_ID_LENGTH = 256;
const ENV_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;

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

  await new Promise((resolveListen, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => resolveListen(undefined));
  });
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  const shownHost = host === "0.0.0.0" ? "127.0.0.1" : host.includes(":") ? `[${host}]` : host;

  const killAll = () => {
    for (const pid of running.keys()) killGroup(pid);
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
            entry.uid === undefined ? undefined : killAllOf(idOf(entry.uid), shell),
          ),
        );
      await new Promise((done) => {
        server.close(() => done(undefined));
        server.closeAllConnections();
      });
      if (ownsRoot) await rm(rootReal, { recursive: true, force: true }).catch(() => {});
    })());
  if (maxLifetimeMs !== undefined && maxLifetimeMs > 0) {
    lifetime = setTimeout(() => void close(), maxLifetimeMs);
    lifetime.unref();
  }

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
 * The directory name of a workspace id: letters, digits, `_` and `-` stay,
 * every other byte becomes `.xx` (hex), so names are unambiguous, never `.`
 * or `..`, and never contain a separator.
 * @param {string} id
 */
export function encodeWorkspaceId(id) {
  let out = "";
  for (const byte of Buffer.from(id, "utf8")) {
    const c = String.fromCharCode(byte);
    out += /[A-Za-z0-9_-]/.test(c) ? c : `.${byte.toString(16).padStart(2, "0")}`;
  }
  return out;
}

// ───────────────────────────── routing ─────────────────────────────

/**
 * @typedef {{ digest: Buffer, uid?: number, ready?: Promise<void>, prepared?: Promise<void>, closing?: boolean, deleting?: Promise<{ deleted: boolean }> }} Registration
 *   `digest`: the SHA-256 of the workspace's token; `uid`: its own uid (and
 *   gid) when the server isolates workspaces; `ready`: settles when the
 *   registration is complete; `prepared`: settles when its directories are
 *   made and handed to its uid; `closing` and `deleting`: it is being
 *   deleted (it stays registered until that is done, refusing work).
 * @typedef {{ allocator: Awaited<ReturnType<typeof createUidAllocator>>, agents: ReturnType<typeof createFileAgents> }} Users
 * @typedef {{ root: string, shell: string, running: Map<number, string>, serverDigest: Buffer, registry: Map<string, Registration>, users: Users | undefined }} Context
 *   `registry`: workspace id → its registration; `users`: set when each workspace has its own uid.
 */

/**
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 */
async function handle(req, res, context) {
  const presented = bearerDigest(req.headers.authorization);
  let url;
  try {
    url = new URL(req.url ?? "/", "http://shell-server");
  } catch {
    req.resume();
    return sendError(res, 400, "bad_request", "bad URL");
  }
  const method = (req.method ?? "GET").toUpperCase();
  if (url.pathname === "/healthz" && method === "GET") {
    req.resume();
    if (!digestsEqual(presented, context.serverDigest))
      return unauthorized(res, "unauthorized", "/healthz needs the server token");
    return sendJson(res, 200, {
      ok: true,
      version: SHELL_SERVER_VERSION,
      running: context.running.size,
      isolation: context.users ? "uid" : "none",
    });
  }
  const match = /^\/v1\/workspaces\/([^/]+)(\/.*)?$/.exec(url.pathname);
  if (!match) {
    req.resume();
    return sendError(res, 404, "not_found", `no route ${method} ${url.pathname}`);
  }
  let id;
  try {
    id = decodeURIComponent(match[1] ?? "");
  } catch {
    id = "";
  }
  if (id === "" || id.length > MAX_ID_LENGTH) {
    req.resume();
    return sendError(res, 400, "bad_request", `a workspace id has 1 to ${MAX_ID_LENGTH} characters`);
  }
  const route = `${method} ${match[2] ?? ""}`;
  if (route === "PUT ") {
    return registerRoute(req, res, context, id, presented);
  }
  const handler = ROUTES[route];
  if (!handler && route !== "DELETE ") {
    req.resume();
    return sendError(res, 404, "not_found", `no route ${method} ${url.pathname}`);
  }
  const registered = context.registry.get(id);
  if (registered === undefined) {
    req.resume();
    return unauthorized(
      res,
      "workspace_not_registered",
      `no workspace "${id}" is registered: register it with PUT /v1/workspaces/:id and the server token first`,
    );
  }
  if (!digestsEqual(presented, registered.digest)) {
    req.resume();
    const why = digestsEqual(presented, context.serverDigest)
      ? "the server token does not open a workspace"
      : "this is not the workspace's token";
    return unauthorized(res, "unauthorized", `${why}: send the token the workspace was registered with`);
  }
  try {
    await registered.ready;
  } catch {
    req.resume();
    return unauthorized(
      res,
      "workspace_not_registered",
      `workspace "${id}" could not be registered: register it again`,
    );
  }
  if (route === "DELETE ") {
    req.resume();
    return sendJson(res, 200, await deleteWorkspace(context, id, registered));
  }
  if (registered.closing) {
    // Not `workspace_not_registered`: its owner would register the same token again while it goes.
    req.resume();
    return sendError(res, 409, "workspace_deleted", `workspace "${id}" is being deleted`);
  }
  let body;
  try {
    body = await readJsonBody(req);
  } catch (err) {
    const e = /** @type {RequestError} */ (err);
    return sendError(res, e.status ?? 400, e.code ?? "bad_request", e.message);
  }
  try {
    const workspace = await ensureWorkspace(context, id, registered);
    const result = await /** @type {NonNullable<typeof handler>} */ (handler)(body, workspace, context, id);
    return sendJson(res, 200, result);
  } catch (err) {
    const e = toRequestError(err);
    return sendError(res, e.status, e.code, e.message);
  }
}

/** @type {Record<string, (body: Record<string, unknown>, workspace: Workspace, context: Context, id: string) => Promise<unknown>>} */
const ROUTES = {
  "POST /exec": execRoute,
  "POST /files/read": (body, workspace, context, id) => fileOperation(context, id, workspace, "read", body),
  "POST /files/write": (body, workspace, context, id) => fileOperation(context, id, workspace, "write", body),
  "POST /files/list": (body, workspace, context, id) => fileOperation(context, id, workspace, "list", body),
  "POST /files/delete": (body, workspace, context, id) => fileOperation(context, id, workspace, "delete", body),
};

/**
 * What the server does on a workspace's files, by name: run in this process
 * when workspaces share the server's user, else by the workspace's file
 * helper with its own uid (file-agent.mjs).
 * @type {Record<string, (body: Record<string, unknown>, workspace: { dir: string }) => Promise<unknown>>}
 */
const FILE_OPERATIONS = {
  read: readRoute,
  write: writeRoute,
  list: listRoute,
  delete: deleteRoute,
  cwd: cwdRoute,
};

/**
 * Runs one file operation here and answers it as data (the file helper's
 * protocol): `{ value }` or `{ error: { status, code, message } }`.
 * @param {string} op
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 * @returns {Promise<{ value: unknown } | { error: { status: number, code: string, message: string } }>}
 */
export async function runFileOperation(op, body, workspace) {
  const run = Object.hasOwn(FILE_OPERATIONS, op) ? FILE_OPERATIONS[op] : undefined;
  if (run === undefined) return { error: { status: 400, code: "bad_request", message: `no file operation "${op}"` } };
  try {
    return { value: await run(body, workspace) };
  } catch (err) {
    const { status, code, message } = toRequestError(err);
    return { error: { status, code, message } };
  }
}

/**
 * A file operation for workspace `id`, with its uid when it has one.
 * @param {Context} context
 * @param {string} id
 * @param {Workspace} workspace
 * @param {string} op
 * @param {Record<string, unknown>} body
 */
async function fileOperation(context, id, workspace, op, body) {
  if (workspace.registration.closing)
    throw new RequestError(409, "workspace_deleted", "the workspace is being deleted");
  const answer =
    context.users && workspace.uid !== undefined
      ? await context.users.agents.request(
          id,
          { uid: workspace.uid, gid: workspace.uid, dir: workspace.dir, home: workspace.home },
          op,
          body,
        )
      : toAgentAnswer(await runFileOperation(op, body, workspace));
  if (!answer.ok) throw new RequestError(answer.error.status, answer.error.code, answer.error.message);
  return answer.value;
}

/**
 * @param {{ value: unknown } | { error: { status: number, code: string, message: string } }} result
 * @returns {import("./workspace-users.mjs").AgentAnswer}
 */
function toAgentAnswer(result) {
  return "error" in result ? { ok: false, error: result.error } : { ok: true, value: result.value };
}

/**
 * The answer an error deserves: a RequestError as it is, a file system error
 * by its errno code, anything else a 500.
 * @param {unknown} err
 * @returns {RequestError}
 */
function toRequestError(err) {
  if (err instanceof RequestError) return err;
  const code = /** @type {NodeJS.ErrnoException} */ (err)?.code;
  const message = String(/** @type {Error} */ (err)?.message ?? err);
  if (code === "ENOENT") return new RequestError(404, "no_such_file", message);
  if (code === "EISDIR") return new RequestError(400, "is_a_directory", message);
  if (code === "ENOTDIR") return new RequestError(400, "not_a_directory", message);
  if (code === "EACCES" || code === "EPERM") return new RequestError(403, "permission_denied", message);
  return new RequestError(500, "internal", message);
}

class RequestError extends Error {
  /**
   * @param {number} status
   * @param {string} code
   * @param {string} message
   */
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

/**
 * The SHA-256 of the bearer token a request carries, or undefined.
 * @param {string | undefined} header
 */
function bearerDigest(header) {
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header ?? "");
  return match?.[1] ? sha256(match[1]) : undefined;
}

/**
 * Digests have equal length, so the comparison takes the same time whatever was sent.
 * @param {Buffer | undefined} presented
 * @param {Buffer} expected
 */
function digestsEqual(presented, expected) {
  return presented !== undefined && timingSafeEqual(presented, expected);
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {string} code
 * @param {string} message
 */
function unauthorized(res, code, message) {
  return sendError(res, 401, code, message, { "www-authenticate": "Bearer" });
}

/**
 * `PUT /v1/workspaces/:id` with the server token and `{ token }`: registers the
 * workspace's own token. Registering again with the same token is a no-op; with
 * another token it is refused. A workspace registered anew starts empty, so
 * files left behind by an earlier owner never pass to a new one.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 * @param {string} id
 * @param {Buffer | undefined} presented
 */
async function registerRoute(req, res, context, id, presented) {
  if (!digestsEqual(presented, context.serverDigest)) {
    req.resume();
    return unauthorized(res, "unauthorized", "registering a workspace needs the server token");
  }
  let body;
  try {
    body = await readJsonBody(req);
  } catch (err) {
    const e = /** @type {RequestError} */ (err);
    return sendError(res, e.status ?? 400, e.code ?? "bad_request", e.message);
  }
  const token = body.token;
  if (typeof token !== "string" || token.length < 16 || !/^\S+$/.test(token)) {
    return sendError(res, 400, "bad_request", "`token` must be a string of at least 16 characters without spaces");
  }
  const digest = sha256(token);
  if (digestsEqual(digest, context.serverDigest)) {
    return sendError(res, 400, "bad_request", "a workspace token must differ from the server token");
  }
  let existing = context.registry.get(id);
  if (existing?.deleting) {
    // Registered anew once the deletion is over, never into a workspace that is going.
    await existing.deleting.catch(() => undefined);
    existing = context.registry.get(id);
  }
  if (existing !== undefined) {
    if (!digestsEqual(digest, existing.digest))
      return sendError(res, 409, "workspace_taken", `workspace "${id}" is registered with another token`);
    await existing.ready;
    return sendJson(res, 200, { registered: true, created: false });
  }
  // Claimed before anything is awaited, so two registrations cannot both win;
  // requests for the workspace wait for `ready`.
  /** @type {Registration} */
  const entry = { digest };
  context.registry.set(id, entry);
  entry.ready = (async () => {
    await removeWorkspaceFiles(context, id);
    if (context.users) entry.uid = await context.users.allocator.allocate(claimOwner(context, id));
    await saveRegistration(context.root, id, entry);
  })();
  try {
    await entry.ready;
  } catch (err) {
    if (context.registry.get(id) === entry) context.registry.delete(id);
    throw err;
  }
  return sendJson(res, 200, { registered: true, created: true });
}

/** @param {string} text */
function sha256(text) {
  return createHash("sha256").update(text, "utf8").digest();
}

// ───────────────────────────── workspaces and paths ─────────────────────────────

/**
 * A workspace's places, its registration, and its uid when it has one (its gid is the same number).
 * @typedef {{ dir: string, home: string, tmp: string, registration: Registration, uid?: number }} Workspace
 */

/** The folders under the root that hold every workspace's HOME and TMPDIR (names no encoded id can take). */
const HOMES_DIR = ".homes";
const TMP_DIR = ".tmp";

/**
 * The workspace's directory, HOME and TMPDIR, made on first use; with a uid,
 * they belong to it, mode 0700, so no other workspace may enter them.
 * @param {Context} context
 * @param {string} id
 * @param {Registration} entry
 * @returns {Promise<Workspace>}
 */
async function ensureWorkspace(context, id, entry) {
  const name = encodeWorkspaceId(id);
  const workspace = {
    dir: join(context.root, name),
    home: join(context.root, HOMES_DIR, name),
    tmp: join(context.root, TMP_DIR, name),
    registration: entry,
  };
  const { uid } = entry;
  if (uid === undefined) {
    // Made again on every request: a command running as the server's user may remove them.
    await Promise.all([workspace.dir, workspace.home, workspace.tmp].map((dir) => mkdir(dir, { recursive: true })));
    return workspace;
  }
  entry.prepared ??= Promise.all(
    [workspace.dir, workspace.home, workspace.tmp].map((dir) => makePrivateDir(dir, uid)),
  ).then(() => undefined);
  try {
    await entry.prepared;
  } catch (err) {
    entry.prepared = undefined;
    throw err;
  }
  return { ...workspace, uid };
}

/**
 * Makes `dir` (its parent belongs to root, so no workspace can have put
 * anything there) and gives it to `uid`, mode 0700.
 * @param {string} dir
 * @param {number} uid
 */
async function makePrivateDir(dir, uid) {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  const info = await lstat(dir);
  if (!info.isDirectory()) throw new Error(`${dir} is not a directory`);
  await lchown(dir, uid, uid);
  await chmod(dir, 0o700);
}

/**
 * Deletes a workspace: it refuses new work at once (and stays registered, so
 * its owner does not register it again meanwhile), its commands are ended
 * (with its uid: every process of that uid), then its files and its
 * registration go. A second DELETE meanwhile waits for the first.
 * @param {Context} context
 * @param {string} id
 * @param {Registration} entry
 * @returns {Promise<{ deleted: boolean }>}
 */
function deleteWorkspace(context, id, entry) {
  entry.closing = true;
  entry.deleting ??= (async () => {
    try {
      const existed = await removeWorkspaceFiles(context, id, entry.uid);
      await rm(join(context.root, REGISTRY_DIR, encodeWorkspaceId(id)), { force: true });
      return { deleted: existed };
    } finally {
      if (context.registry.get(id) === entry) context.registry.delete(id);
    }
  })();
  return entry.deleting;
}

/**
 * Kills the workspace's commands and deletes its directory, HOME and TMPDIR;
 * says whether the directory existed. With `uid`, every process of that uid
 * is ended first, so nothing of it changes the tree while root deletes it.
 * @param {Context} context
 * @param {string} id
 * @param {number} [uid]
 */
async function removeWorkspaceFiles(context, id, uid) {
  for (const [pid, owner] of context.running) {
    if (owner === id) killGroup(pid);
  }
  if (uid !== undefined && context.users) {
    context.users.agents.stop(id);
    await killAllOf(idOf(uid), context.shell);
  }
  const name = encodeWorkspaceId(id);
  const dir = join(context.root, name);
  const existed = existsSync(dir);
  for (const path of [dir, join(context.root, HOMES_DIR, name), join(context.root, TMP_DIR, name)]) {
    await rm(path, { recursive: true, force: true, maxRetries: 3 });
  }
  return existed;
}

/** @param {number} uid */
function idOf(uid) {
  return { uid, gid: uid };
}

/** Where registrations are kept, under the root (a name no encoded workspace id can take). */
const REGISTRY_DIR = ".registry";

/**
 * Reads the registrations kept under `root`: one file per workspace, named by
 * its encoded id, holding the hex SHA-256 of its token and, when workspaces
 * have their own uids, the uid (`<hex> <uid>`).
 * @param {string} root
 * @returns {Promise<Map<string, Registration>>}
 */
async function loadRegistry(root) {
  const dir = join(root, REGISTRY_DIR);
  await mkdir(dir, { recursive: true, mode: 0o700 });
  /** @type {Map<string, Registration>} */
  const registry = new Map();
  for (const name of await readdir(dir)) {
    const id = decodeWorkspaceId(name);
    const match = /^([0-9a-f]{64})(?: (\d{1,10}))?$/.exec(
      (await readFile(join(dir, name), "utf8").catch(() => "")).trim(),
    );
    if (id === undefined || !match) continue;
    const uid = match[2] === undefined ? undefined : Number(match[2]);
    registry.set(id, { digest: Buffer.from(match[1] ?? "", "hex"), ...(uid === undefined ? {} : { uid }) });
  }
  return registry;
}

/**
 * @param {string} root
 * @param {string} id
 * @param {Registration} entry
 */
async function saveRegistration(root, id, entry) {
  const file = join(root, REGISTRY_DIR, encodeWorkspaceId(id));
  const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  const uid = entry.uid === undefined ? "" : ` ${entry.uid}`;
  await writeFile(temporary, `${entry.digest.toString("hex")}${uid}\n`, { mode: 0o600 });
  await rename(temporary, file);
}

/**
 * What a uid claim names: this root and the workspace.
 * @param {Context} context
 * @param {string} id
 */
function claimOwner(context, id) {
  return `${context.root}\t${encodeWorkspaceId(id)}`;
}

/**
 * Makes the root ready for a uid per workspace: the root and the folders of
 * HOMEs and TMPDIRs belong to root, 0711 (each uid may pass through to its
 * own folder, none may list them); the registry is root's alone, 0700. Checks
 * that such a uid can do its work.
 * @param {string} root
 * @returns {Promise<Users>}
 */
async function prepareIsolation(root) {
  const info = await lstat(root);
  if (info.uid !== 0)
    throw new Error(`the workspace root ${root} must belong to root when each workspace has its own uid`);
  await chmod(root, 0o711);
  for (const [name, mode] of /** @type {const} */ ([
    [HOMES_DIR, 0o711],
    [TMP_DIR, 0o711],
    [REGISTRY_DIR, 0o700],
  ])) {
    const dir = join(root, name);
    await mkdir(dir, { recursive: true, mode });
    const made = await lstat(dir);
    if (!made.isDirectory()) throw new Error(`${dir} is not a directory`);
    await lchown(dir, 0, 0);
    await chmod(dir, mode);
  }
  await probeWorkspaceUser(root);
  return { allocator: await createUidAllocator({ label: root }), agents: createFileAgents() };
}

/**
 * Gives every registration read back from disk a uid of its own: the one it
 * recorded, when the machine-wide claim still names it; else a new one (a
 * registry written without isolation, or a claim lost), and its files are
 * handed to that uid (`chown -R -h`, which follows no link).
 * @param {Context} context
 * @param {Users} users
 */
async function adoptRegistrations(context, users) {
  for (const [id, entry] of context.registry) {
    const owner = claimOwner(context, id);
    if (entry.uid !== undefined && (await users.allocator.confirm(entry.uid, owner))) continue;
    entry.uid = await users.allocator.allocate(owner);
    await saveRegistration(context.root, id, entry);
    const name = encodeWorkspaceId(id);
    const paths = [
      join(context.root, name),
      join(context.root, HOMES_DIR, name),
      join(context.root, TMP_DIR, name),
    ].filter((path) => existsSync(path));
    if (paths.length > 0) await runQuietly("chown", ["-R", "-h", `${entry.uid}:${entry.uid}`, "--", ...paths]);
  }
}

/**
 * Runs a program to its end; fails when it fails.
 * @param {string} file
 * @param {string[]} args
 */
function runQuietly(file, args) {
  return new Promise((resolveRun, reject) => {
    const child = spawn(file, args, { stdio: ["ignore", "ignore", "pipe"] });
    let stderr = "";
    child.stderr?.on("data", (chunk) => (stderr += chunk));
    child.once("error", reject);
    child.once("close", (code) =>
      code === 0 ? resolveRun(undefined) : reject(new Error(`${file} failed: ${stderr.trim()}`)),
    );
  });
}

/**
 * The inverse of {@link encodeWorkspaceId}; undefined for a name it never makes.
 * @param {string} name
 */
export function decodeWorkspaceId(name) {
  if (!/^(?:[A-Za-z0-9_-]|\.[0-9a-f]{2})+$/.test(name)) return undefined;
  const bytes = [];
  for (let i = 0; i < name.length; i += 1) {
    if (name[i] === ".") {
      bytes.push(Number.parseInt(name.slice(i + 1, i + 3), 16));
      i += 2;
    } else {
      bytes.push(name.charCodeAt(i));
    }
  }
  const id = Buffer.from(bytes).toString("utf8");
  return encodeWorkspaceId(id) === name ? id : undefined;
}

/**
 * Resolves a workspace-relative path, refusing anything that leaves the
 * workspace: absolute paths, `..` past the top, and symlinks pointing out
 * (checked on the deepest part of the path that exists).
 * @param {{ dir: string }} workspace
 * @param {unknown} path
 * @returns {Promise<string>}
 */
async function resolveInside(workspace, path) {
  if (typeof path !== "string" || path === "" || path.includes("\0")) {
    throw new RequestError(400, "bad_request", "`path` must be a non-empty string");
  }
  if (isAbsolute(path)) {
    throw new RequestError(400, "path_outside_workspace", `"${path}" is absolute; paths are relative to the workspace`);
  }
  const full = resolve(workspace.dir, path);
  if (!isWithin(workspace.dir, full)) {
    throw new RequestError(400, "path_outside_workspace", `"${path}" leaves the workspace`);
  }
  let probe = full;
  for (;;) {
    try {
      const real = await realpath(probe);
      if (!isWithin(await realpath(workspace.dir), real)) {
        throw new RequestError(
          400,
          "path_outside_workspace",
          `"${path}" leads out of the workspace through a symbolic link`,
        );
      }
      return full;
    } catch (err) {
      if (err instanceof RequestError) throw err;
      if (probe === workspace.dir) return full;
      probe = dirname(probe);
    }
  }
}

/**
 * @param {string} parent
 * @param {string} child
 */
function isWithin(parent, child) {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}

// ───────────────────────────── exec ─────────────────────────────

/**
 * @param {Record<string, unknown>} body
 * @param {Workspace} workspace
 * @param {Context} context
 * @param {string} id
 */
async function execRoute(body, workspace, context, id) {
  const spec = parseExec(body);
  if (context.running.size >= MAX_CONCURRENT_COMMANDS) {
    throw new RequestError(429, "busy", `${MAX_CONCURRENT_COMMANDS} commands are already running`);
  }
  // Checked with the workspace's rights (its uid, when it has one), so the answer tells nothing of other workspaces.
  // The helper's answer is the workspace's to tamper with: it must still name a place inside the workspace.
  const cwd =
    spec.cwd === undefined ? workspace.dir : await fileOperation(context, id, workspace, "cwd", { path: spec.cwd });
  if (typeof cwd !== "string" || !isAbsolute(cwd) || !isWithin(workspace.dir, cwd)) {
    throw new RequestError(
      500,
      "file_agent_failed",
      "the workspace's file helper named a working directory outside the workspace",
    );
  }
  const env = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: workspace.home,
    LANG: "C.UTF-8",
    TERM: "dumb",
    TMPDIR: workspace.tmp,
    GIT_TERMINAL_PROMPT: "0",
    TRELLIS_WORKSPACE: workspace.dir,
    // No passwd entry names a workspace's uid: tools that ask for a user name (Python's getpass) read these.
    ...(workspace.uid === undefined ? {} : { USER: "trellis", LOGNAME: "trellis" }),
    ...spec.env,
  };
  const [file, args] =
    spec.command !== undefined ? [context.shell, ["-c", spec.command]] : [spec.argv[0] ?? "", spec.argv.slice(1)];
  if (workspace.registration.closing)
    throw new RequestError(409, "workspace_deleted", "the workspace is being deleted");
  const identity = workspace.uid === undefined ? undefined : idOf(workspace.uid);
  return runCommand(
    {
      file,
      args,
      cwd,
      env,
      identity,
      timeoutMs: spec.timeoutMs,
      maxOutputBytes: spec.maxOutputBytes,
      stdin: spec.stdin,
    },
    context,
    id,
  );
}

/**
 * `cwd`: a working directory inside the workspace → its full path, or `bad_cwd`.
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 */
async function cwdRoute(body, workspace) {
  const cwd = await resolveInside(workspace, body.path);
  const cwdStat = await stat(cwd).catch(() => undefined);
  if (!cwdStat?.isDirectory()) {
    throw new RequestError(400, "bad_cwd", `working directory "${body.path}" does not exist in the workspace`);
  }
  return cwd;
}

/**
 * @param {Record<string, unknown>} body
 * @returns {{ command?: string, argv: string[], cwd?: string, env: Record<string, string>, timeoutMs: number, maxOutputBytes: number, stdin?: string }}
 */
function parseExec(body) {
  const { command, argv, cwd, env, timeout_ms, max_output_bytes, stdin } = body;
  const hasCommand = command !== undefined;
  const hasArgv = argv !== undefined;
  if (hasCommand === hasArgv)
    throw new RequestError(
      400,
      "bad_request",
      "give exactly one of `command` (a string) and `argv` (an array of strings)",
    );
  if (hasCommand && (typeof command !== "string" || command === "" || command.includes("\0"))) {
    throw new RequestError(400, "bad_request", "`command` must be a non-empty string without NUL");
  }
  if (
    hasArgv &&
    (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && !a.includes("\0")))
  ) {
    throw new RequestError(400, "bad_request", "`argv` must be a non-empty array of strings without NUL");
  }
  if (cwd !== undefined && typeof cwd !== "string")
    throw new RequestError(400, "bad_request", "`cwd` must be a string");
  /** @type {Record<string, string>} */
  const environment = {};
  if (env !== undefined) {
    if (typeof env !== "object" || env === null || Array.isArray(env))
      throw new RequestError(400, "bad_request", "`env` must be an object of strings");
    for (const [name, value] of Object.entries(env)) {
      if (!ENV_NAME.test(name))
        throw new RequestError(400, "bad_request", `"${name}" is not a valid environment variable name`);
      if (typeof value !== "string" || value.includes("\0"))
        throw new RequestError(400, "bad_request", `env.${name} must be a string without NUL`);
      environment[name] = value;
    }
  }
  const timeoutMs = optionalInt(timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS;
  const maxOutputBytes =
    optionalInt(max_output_bytes, "max_output_bytes", 0, MAX_OUTPUT_BYTES) ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (stdin !== undefined && typeof stdin !== "string")
    throw new RequestError(400, "bad_request", "`stdin` must be a string");
  return {
    ...(hasCommand ? { command: /** @type {string} */ (command) } : {}),
    argv: hasArgv ? /** @type {string[]} */ (argv) : [],
    ...(cwd === undefined ? {} : { cwd }),
    env: environment,
    timeoutMs,
    maxOutputBytes,
    ...(stdin === undefined ? {} : { stdin }),
  };
}

/**
 * @param {unknown} value
 * @param {string} name
 * @param {number} min
 * @param {number} max
 */
function optionalInt(value, name, min, max) {
  if (value === undefined) return undefined;
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw new RequestError(400, "bad_request", `\`${name}\` must be an integer from ${min} to ${max}`);
  }
  return value;
}

/**
 * Runs one process in its own process group and collects its output; with
 * `identity`, as that uid and gid, no supplementary groups, umask 077.
 * @param {{ file: string, args: string[], cwd: string, env: Record<string, string>, identity?: { uid: number, gid: number }, timeoutMs: number, maxOutputBytes: number, stdin?: string }} spec
 * @param {Context} context
 * @param {string} id
 */
function runCommand(spec, context, id) {
  const started = Date.now();
  return new Promise((resolveRun, reject) => {
    /** @type {import("node:child_process").SpawnOptions} */
    const options = {
      cwd: spec.cwd,
      env: spec.env,
      detached: true, // a new session, so a new process group whose id is the child's pid
      stdio: [spec.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    };
    // libuv calls setgroups(0, NULL) before setgid/setuid when a uid is given: no supplementary groups remain.
    const child =
      spec.identity === undefined
        ? spawn(spec.file, spec.args, options)
        : spawnPrivate(() => spawn(spec.file, spec.args, { ...options, ...spec.identity }));
    const stdout = createCapture(spec.maxOutputBytes);
    const stderr = createCapture(spec.maxOutputBytes);
    child.stdout?.on("data", (chunk) => stdout.push(chunk));
    child.stderr?.on("data", (chunk) => stderr.push(chunk));
    if (spec.stdin !== undefined && child.stdin) {
      child.stdin.on("error", () => {}); // the command may not read its input
      child.stdin.end(spec.stdin);
    }
    const pid = child.pid;
    if (pid !== undefined) context.running.set(pid, id);
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      if (pid !== undefined) killGroup(pid);
    }, spec.timeoutMs);

    /** @type {{ code: number | null, signal: NodeJS.Signals | null } | undefined} */
    let exit;
    let settled = false;
    const finish = () => {
      if (settled || !exit) return;
      settled = true;
      clearTimeout(timer);
      clearTimeout(drainTimer);
      if (pid !== undefined) {
        killGroup(pid);
        context.running.delete(pid);
      }
      child.stdout?.destroy();
      child.stderr?.destroy();
      const out = stdout.result();
      const err = stderr.result();
      resolveRun({
        exit_code: exit.code,
        signal: exit.signal,
        timed_out: timedOut,
        stdout: out.text,
        stderr: err.text,
        stdout_bytes: out.bytes,
        stderr_bytes: err.bytes,
        truncated: out.truncated || err.truncated,
        duration_ms: Date.now() - started,
      });
    };
    /** @type {ReturnType<typeof setTimeout> | undefined} */
    let drainTimer;
    child.once("exit", (code, signal) => {
      exit = { code, signal };
      // Leftovers of the group may still hold the pipes open: end them, then give the pipes a moment.
      if (pid !== undefined) killGroup(pid);
      drainTimer = setTimeout(finish, DRAIN_GRACE_MS);
    });
    child.once("close", (code, signal) => {
      exit ??= { code, signal };
      finish();
    });
    child.once("error", (err) => {
      clearTimeout(timer);
      if (pid !== undefined) context.running.delete(pid);
      if (settled) return;
      settled = true;
      const code = /** @type {NodeJS.ErrnoException} */ (err).code;
      // EACCES too: with a workspace's uid, a PATH entry it may not search (under /root, say) ends the lookup so.
      const notFound = code === "ENOENT" || code === "EACCES";
      reject(notFound ? new RequestError(400, "command_not_found", `cannot run "${spec.file}": ${err.message}`) : err);
    });
  });
}

/**
 * Sends SIGKILL to a whole process group. Never throws.
 * @param {number} pgid
 */
function killGroup(pgid) {
  try {
    process.kill(-pgid, "SIGKILL");
  } catch {
    /* the group is gone */
  }
}

/**
 * Keeps the first and last halves of at most `limit` bytes of a stream.
 * @param {number} limit
 */
export function createCapture(limit) {
  const headLimit = Math.ceil(limit / 2);
  const tailLimit = limit - headLimit;
  /** @type {Buffer[]} */
  const head = [];
  let headLength = 0;
  /** @type {Buffer[]} */
  let tail = [];
  let tailLength = 0;
  let total = 0;
  return {
    /** @param {Buffer} chunk */
    push(chunk) {
      total += chunk.length;
      let rest = chunk;
      if (headLength < headLimit) {
        const take = rest.subarray(0, headLimit - headLength);
        head.push(Buffer.from(take));
        headLength += take.length;
        rest = rest.subarray(take.length);
      }
      if (rest.length === 0 || tailLimit === 0) return;
      if (rest.length >= tailLimit) {
        tail = [Buffer.from(rest.subarray(rest.length - tailLimit))];
        tailLength = tailLimit;
        return;
      }
      tail.push(Buffer.from(rest));
      tailLength += rest.length;
      while (tail.length > 1 && tailLength - (tail[0]?.length ?? 0) >= tailLimit) {
        tailLength -= tail.shift()?.length ?? 0;
      }
    },
    /** @returns {{ text: string, bytes: number, truncated: boolean }} */
    result() {
      const headText = Buffer.concat(head).toString("utf8");
      const joined = Buffer.concat(tail);
      if (total <= limit) return { text: headText + joined.toString("utf8"), bytes: total, truncated: false };
      const omitted = total - headLength - tailLimit;
      const tailText = joined.subarray(joined.length - tailLimit).toString("utf8");
      return { text: `${headText}\n… [${omitted} bytes omitted] …\n${tailText}`, bytes: total, truncated: true };
    },
  };
}

// ───────────────────────────── files ─────────────────────────────

/**
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 */
async function readRoute(body, workspace) {
  const path = await resolveInside(workspace, body.path);
  const encoding = parseEncoding(body.encoding);
  const maxBytes = optionalInt(body.max_bytes, "max_bytes", 0, MAX_READ_BYTES) ?? MAX_READ_BYTES;
  const info = await stat(path);
  if (info.isDirectory()) throw new RequestError(400, "is_a_directory", `"${body.path}" is a directory`);
  const handle = await open(path, "r");
  try {
    const length = Math.min(info.size, maxBytes);
    const buffer = Buffer.alloc(length);
    const { bytesRead } = await handle.read(buffer, 0, length, 0);
    const data = buffer.subarray(0, bytesRead);
    return {
      path: body.path,
      content: data.toString(encoding),
      encoding,
      size: info.size,
      truncated: info.size > bytesRead,
    };
  } finally {
    await handle.close();
  }
}

/**
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 */
async function writeRoute(body, workspace) {
  const path = await resolveInside(workspace, body.path);
  if (path === workspace.dir) throw new RequestError(400, "is_a_directory", "cannot write the workspace itself");
  if (typeof body.content !== "string") throw new RequestError(400, "bad_request", "`content` must be a string");
  const data = Buffer.from(body.content, parseEncoding(body.encoding));
  if (body.create_dirs !== false) await mkdir(dirname(path), { recursive: true });
  if (body.append === true) await appendFile(path, data);
  else await writeFile(path, data);
  return { path: body.path, size: (await stat(path)).size };
}

/**
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 */
async function listRoute(body, workspace) {
  const start = await resolveInside(workspace, body.path ?? ".");
  const recursive = body.recursive === true;
  const includeHidden = body.include_hidden === true;
  const limit = optionalInt(body.max_entries, "max_entries", 1, MAX_LIST_ENTRIES) ?? DEFAULT_LIST_ENTRIES;
  const info = await stat(start);
  if (!info.isDirectory()) throw new RequestError(400, "not_a_directory", `"${body.path}" is not a directory`);
  /** @type {{ path: string, type: string, size: number }[]} */
  const entries = [];
  let truncated = false;
  const queue = [start];
  while (queue.length > 0 && !truncated) {
    const dir = /** @type {string} */ (queue.shift());
    const names = (await readdir(dir)).sort();
    for (const name of names) {
      if (!includeHidden && name.startsWith(".")) continue;
      if (entries.length >= limit) {
        truncated = true;
        break;
      }
      const full = join(dir, name);
      const entry = await lstat(full);
      const type = entry.isFile() ? "file" : entry.isDirectory() ? "dir" : entry.isSymbolicLink() ? "symlink" : "other";
      entries.push({
        path: relative(workspace.dir, full).split(sep).join("/"),
        type,
        size: entry.isFile() ? entry.size : 0,
      });
      if (recursive && type === "dir") queue.push(full);
    }
  }
  return { entries, truncated };
}

/**
 * @param {Record<string, unknown>} body
 * @param {{ dir: string }} workspace
 */
async function deleteRoute(body, workspace) {
  const path = await resolveInside(workspace, body.path);
  if (path === workspace.dir) throw new RequestError(400, "bad_request", "cannot delete the workspace itself");
  const info = await lstat(path).catch(() => undefined);
  if (!info) return { path: body.path, deleted: false };
  if (info.isDirectory() && body.recursive !== true) {
    throw new RequestError(400, "is_a_directory", `"${body.path}" is a directory: pass recursive: true to delete it`);
  }
  await rm(path, { recursive: body.recursive === true, force: true });
  return { path: body.path, deleted: true };
}

/**
 * @param {unknown} value
 * @returns {"utf8" | "base64"}
 */
function parseEncoding(value) {
  if (value === undefined || value === "utf8") return "utf8";
  if (value === "base64") return "base64";
  throw new RequestError(400, "bad_request", '`encoding` is "utf8" or "base64"');
}

// ───────────────────────────── HTTP plumbing ─────────────────────────────

/**
 * @param {import("node:http").IncomingMessage} req
 * @returns {Promise<Record<string, unknown>>}
 */
function readJsonBody(req) {
  return new Promise((resolveBody, reject) => {
    /** @type {Buffer[]} */
    const chunks = [];
    let size = 0;
    let failed = false;
    req.on("data", (chunk) => {
      if (failed) return;
      size += chunk.length;
      if (size > MAX_BODY_BYTES) {
        failed = true;
        reject(new RequestError(413, "too_large", `request bodies are limited to ${MAX_BODY_BYTES} bytes`));
        return;
      }
      chunks.push(chunk);
    });
    req.on("end", () => {
      if (failed) return;
      const text = Buffer.concat(chunks).toString("utf8");
      if (text.trim() === "") return resolveBody({});
      try {
        const value = JSON.parse(text);
        if (typeof value !== "object" || value === null || Array.isArray(value)) throw new Error("not an object");
        resolveBody(value);
      } catch {
        reject(new RequestError(400, "bad_request", "the body must be a JSON object"));
      }
    });
    req.on("error", reject);
  });
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {unknown} value
 * @param {Record<string, string>} [headers]
 */
function sendJson(res, status, value, headers = {}) {
  const text = JSON.stringify(value);
  res.writeHead(status, {
    "content-type": "application/json; charset=utf-8",
    "content-length": Buffer.byteLength(text),
    ...headers,
  });
  res.end(text);
}

/**
 * @param {import("node:http").ServerResponse} res
 * @param {number} status
 * @param {string} code
 * @param {string} message
 * @param {Record<string, string>} [headers]
 */
function sendError(res, status, code, message, headers = {}) {
  sendJson(res, status, { error: { code, message } }, headers);
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
