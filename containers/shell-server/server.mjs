/**
 * The shell server: the small HTTP server that runs inside every Trellis
 * container (containers/Dockerfile) and, unchanged, as a local process in
 * `npm run dev` and the tests (local mode; see docs/containers.md). Plain Node
 * (22+), no dependencies, so the image needs nothing but this file.
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
 *   GET    /healthz                          (server token) 200 { ok: true, version, running }
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
 * their own HOME in `<root>/.homes/<encoded id>`. In the image the root is
 * `/workspaces`; locally it is a fresh temporary directory. File paths are
 * relative to the workspace and may not leave it (`..`, absolute paths and
 * symlinks pointing out are refused with `path_outside_workspace`).
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
 * Local mode isolates workspaces on the network API only: a command runs as
 * the user who started the server, with their file permissions, so it can
 * read other workspaces (and anything else that user can) through the file
 * system. It is for development and tests; in production each container has
 * one run's workspace and its own server.
 *
 * Standalone: `SHELL_SERVER_TOKEN=… node containers/shell-server/server.mjs
 * [--host 127.0.0.1] [--port 8080] [--workspace-root DIR] [--watch-stdin]
 * [--max-lifetime-ms N]` prints one JSON line `{ url, workspace_root }` and
 * runs until SIGINT/SIGTERM, or until its standard input closes with
 * `--watch-stdin` (its parent went away), or after `--max-lifetime-ms`.
 */
import { spawn } from "node:child_process";
import { createHash, randomBytes, timingSafeEqual } from "node:crypto";
import { existsSync } from "node:fs";
import { appendFile, lstat, mkdir, mkdtemp, open, readdir, readFile, realpath, rename, rm, stat, writeFile } from "node:fs/promises";
import { createServer } from "node:http";
import { tmpdir } from "node:os";
import { dirname, isAbsolute, join, relative, resolve, sep } from "node:path";
import { fileURLToPath } from "node:url";

export const SHELL_SERVER_VERSION = "1";

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
 * @property {(id: string) => string} workspacePath  the directory of one workspace
 * @property {() => Promise<void>} close  stops the server, kills running commands, removes a temporary root
 */

/**
 * Starts the shell server.
 * @param {{ port?: number, host?: string, token?: string, workspaceRoot?: string, maxLifetimeMs?: number }} [options]
 *   `port` 0 (default) picks a free port; `host` defaults to 127.0.0.1; `token`
 *   defaults to a fresh random one; `workspaceRoot` defaults to a fresh
 *   temporary directory (removed by close()); `maxLifetimeMs` closes the
 *   server after that long (never by default).
 * @returns {Promise<ShellServer>}
 */
export async function startShellServer({ port = 0, host = "127.0.0.1", token, workspaceRoot, maxLifetimeMs } = {}) {
  const secret = token ?? randomBytes(24).toString("base64url");
  if (secret.length < 16) throw new Error("the shell server token must have at least 16 characters");
  const ownsRoot = workspaceRoot === undefined;
  const root = ownsRoot ? await mkdtemp(join(tmpdir(), "trellis-shell-")) : resolve(workspaceRoot);
  await mkdir(root, { recursive: true });
  const rootReal = await realpath(root);
  const shell = existsSync("/bin/bash") ? "/bin/bash" : "/bin/sh";
  /** @type {Map<number, string>} running command pid (= process group id) → workspace id */
  const running = new Map();

  /** @type {Context} */
  const context = { root: rootReal, shell, running, serverDigest: sha256(secret), registry: await loadRegistry(rootReal) };

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
 * @typedef {{ root: string, shell: string, running: Map<number, string>, serverDigest: Buffer, registry: Map<string, Buffer> }} Context
 *   `registry`: workspace id → SHA-256 of its token.
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
    if (!digestsEqual(presented, context.serverDigest)) return unauthorized(res, "unauthorized", "/healthz needs the server token");
    return sendJson(res, 200, { ok: true, version: SHELL_SERVER_VERSION, running: context.running.size });
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
    return unauthorized(res, "workspace_not_registered", `no workspace "${id}" is registered: register it with PUT /v1/workspaces/:id and the server token first`);
  }
  if (!digestsEqual(presented, registered)) {
    req.resume();
    const why = digestsEqual(presented, context.serverDigest) ? "the server token does not open a workspace" : "this is not the workspace's token";
    return unauthorized(res, "unauthorized", `${why}: send the token the workspace was registered with`);
  }
  if (route === "DELETE ") {
    req.resume();
    return sendJson(res, 200, await deleteWorkspace(context, id));
  }
  let body;
  try {
    body = await readJsonBody(req);
  } catch (err) {
    const e = /** @type {RequestError} */ (err);
    return sendError(res, e.status ?? 400, e.code ?? "bad_request", e.message);
  }
  const workspace = await ensureWorkspace(context, id);
  try {
    const result = await /** @type {NonNullable<typeof handler>} */ (handler)(body, workspace, context, id);
    return sendJson(res, 200, result);
  } catch (err) {
    if (err instanceof RequestError) return sendError(res, err.status, err.code, err.message);
    const code = /** @type {NodeJS.ErrnoException} */ (err)?.code;
    if (code === "ENOENT") return sendError(res, 404, "no_such_file", String(/** @type {Error} */ (err).message));
    if (code === "EISDIR") return sendError(res, 400, "is_a_directory", String(/** @type {Error} */ (err).message));
    if (code === "ENOTDIR") return sendError(res, 400, "not_a_directory", String(/** @type {Error} */ (err).message));
    throw err;
  }
}

/** @type {Record<string, (body: Record<string, unknown>, workspace: Workspace, context: Context, id: string) => Promise<unknown>>} */
const ROUTES = {
  "POST /exec": execRoute,
  "POST /files/read": readRoute,
  "POST /files/write": writeRoute,
  "POST /files/list": listRoute,
  "POST /files/delete": deleteRoute,
};

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
  const existing = context.registry.get(id);
  if (existing !== undefined) {
    if (digestsEqual(digest, existing)) return sendJson(res, 200, { registered: true, created: false });
    return sendError(res, 409, "workspace_taken", `workspace "${id}" is registered with another token`);
  }
  // Claimed before anything is awaited, so two registrations cannot both win.
  context.registry.set(id, digest);
  try {
    await removeWorkspaceFiles(context, id);
    await saveRegistration(context.root, id, digest);
  } catch (err) {
    context.registry.delete(id);
    throw err;
  }
  return sendJson(res, 200, { registered: true, created: true });
}

/** @param {string} text */
function sha256(text) {
  return createHash("sha256").update(text, "utf8").digest();
}

// ───────────────────────────── workspaces and paths ─────────────────────────────

/** @typedef {{ dir: string, home: string }} Workspace */

/**
 * @param {Context} context
 * @param {string} id
 * @returns {Promise<Workspace>}
 */
async function ensureWorkspace(context, id) {
  const name = encodeWorkspaceId(id);
  const dir = join(context.root, name);
  const home = join(context.root, ".homes", name);
  await mkdir(dir, { recursive: true });
  await mkdir(home, { recursive: true });
  return { dir, home };
}

/**
 * @param {Context} context
 * @param {string} id
 */
async function deleteWorkspace(context, id) {
  const existed = await removeWorkspaceFiles(context, id);
  await rm(join(context.root, REGISTRY_DIR, encodeWorkspaceId(id)), { force: true });
  context.registry.delete(id);
  return { deleted: existed };
}

/**
 * Kills the workspace's commands and deletes its directory and HOME; says whether the directory existed.
 * @param {Context} context
 * @param {string} id
 */
async function removeWorkspaceFiles(context, id) {
  for (const [pid, owner] of context.running) {
    if (owner === id) killGroup(pid);
  }
  const name = encodeWorkspaceId(id);
  const dir = join(context.root, name);
  const existed = existsSync(dir);
  await rm(dir, { recursive: true, force: true, maxRetries: 3 });
  await rm(join(context.root, ".homes", name), { recursive: true, force: true, maxRetries: 3 });
  return existed;
}

/** Where registrations are kept, under the root (a name no encoded workspace id can take). */
const REGISTRY_DIR = ".registry";

/**
 * Reads the registrations kept under `root`: one file per workspace, named by
 * its encoded id, holding the hex SHA-256 of its token.
 * @param {string} root
 * @returns {Promise<Map<string, Buffer>>}
 */
async function loadRegistry(root) {
  const dir = join(root, REGISTRY_DIR);
  await mkdir(dir, { recursive: true });
  /** @type {Map<string, Buffer>} */
  const registry = new Map();
  for (const name of await readdir(dir)) {
    const id = decodeWorkspaceId(name);
    const hex = (await readFile(join(dir, name), "utf8").catch(() => "")).trim();
    if (id !== undefined && /^[0-9a-f]{64}$/.test(hex)) registry.set(id, Buffer.from(hex, "hex"));
  }
  return registry;
}

/**
 * @param {string} root
 * @param {string} id
 * @param {Buffer} digest
 */
async function saveRegistration(root, id, digest) {
  const file = join(root, REGISTRY_DIR, encodeWorkspaceId(id));
  const temporary = `${file}.${randomBytes(6).toString("hex")}.tmp`;
  await writeFile(temporary, `${digest.toString("hex")}\n`, { mode: 0o600 });
  await rename(temporary, file);
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
 * @param {Workspace} workspace
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
        throw new RequestError(400, "path_outside_workspace", `"${path}" leads out of the workspace through a symbolic link`);
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
  const cwd = spec.cwd === undefined ? workspace.dir : await resolveInside(workspace, spec.cwd);
  const cwdStat = await stat(cwd).catch(() => undefined);
  if (!cwdStat?.isDirectory()) {
    throw new RequestError(400, "bad_cwd", `working directory "${spec.cwd}" does not exist in the workspace`);
  }
  const env = {
    PATH: process.env.PATH ?? "/usr/local/bin:/usr/bin:/bin",
    HOME: workspace.home,
    LANG: "C.UTF-8",
    TERM: "dumb",
    TMPDIR: process.env.TMPDIR ?? tmpdir(),
    GIT_TERMINAL_PROMPT: "0",
    TRELLIS_WORKSPACE: workspace.dir,
    ...spec.env,
  };
  const [file, args] = spec.command !== undefined ? [context.shell, ["-c", spec.command]] : [spec.argv[0] ?? "", spec.argv.slice(1)];
  return runCommand({ file, args, cwd, env, timeoutMs: spec.timeoutMs, maxOutputBytes: spec.maxOutputBytes, stdin: spec.stdin }, context, id);
}

/**
 * @param {Record<string, unknown>} body
 * @returns {{ command?: string, argv: string[], cwd?: string, env: Record<string, string>, timeoutMs: number, maxOutputBytes: number, stdin?: string }}
 */
function parseExec(body) {
  const { command, argv, cwd, env, timeout_ms, max_output_bytes, stdin } = body;
  const hasCommand = command !== undefined;
  const hasArgv = argv !== undefined;
  if (hasCommand === hasArgv) throw new RequestError(400, "bad_request", "give exactly one of `command` (a string) and `argv` (an array of strings)");
  if (hasCommand && (typeof command !== "string" || command === "" || command.includes("\0"))) {
    throw new RequestError(400, "bad_request", "`command` must be a non-empty string without NUL");
  }
  if (hasArgv && (!Array.isArray(argv) || argv.length === 0 || !argv.every((a) => typeof a === "string" && !a.includes("\0")))) {
    throw new RequestError(400, "bad_request", "`argv` must be a non-empty array of strings without NUL");
  }
  if (cwd !== undefined && typeof cwd !== "string") throw new RequestError(400, "bad_request", "`cwd` must be a string");
  /** @type {Record<string, string>} */
  const environment = {};
  if (env !== undefined) {
    if (typeof env !== "object" || env === null || Array.isArray(env)) throw new RequestError(400, "bad_request", "`env` must be an object of strings");
    for (const [name, value] of Object.entries(env)) {
      if (!ENV_NAME.test(name)) throw new RequestError(400, "bad_request", `"${name}" is not a valid environment variable name`);
      if (typeof value !== "string" || value.includes("\0")) throw new RequestError(400, "bad_request", `env.${name} must be a string without NUL`);
      environment[name] = value;
    }
  }
  const timeoutMs = optionalInt(timeout_ms, "timeout_ms", 1, MAX_TIMEOUT_MS) ?? DEFAULT_TIMEOUT_MS;
  const maxOutputBytes = optionalInt(max_output_bytes, "max_output_bytes", 0, MAX_OUTPUT_BYTES) ?? DEFAULT_MAX_OUTPUT_BYTES;
  if (stdin !== undefined && typeof stdin !== "string") throw new RequestError(400, "bad_request", "`stdin` must be a string");
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
 * Runs one process in its own process group and collects its output.
 * @param {{ file: string, args: string[], cwd: string, env: Record<string, string>, timeoutMs: number, maxOutputBytes: number, stdin?: string }} spec
 * @param {Context} context
 * @param {string} id
 */
function runCommand(spec, context, id) {
  const started = Date.now();
  return new Promise((resolveRun, reject) => {
    const child = spawn(spec.file, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true, // a new session, so a new process group whose id is the child's pid
      stdio: [spec.stdin === undefined ? "ignore" : "pipe", "pipe", "pipe"],
    });
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
      reject(code === "ENOENT" ? new RequestError(400, "command_not_found", `cannot run "${spec.file}": ${err.message}`) : err);
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
 * @param {Workspace} workspace
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
    return { path: body.path, content: data.toString(encoding), encoding, size: info.size, truncated: info.size > bytesRead };
  } finally {
    await handle.close();
  }
}

/**
 * @param {Record<string, unknown>} body
 * @param {Workspace} workspace
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
 * @param {Workspace} workspace
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
      entries.push({ path: relative(workspace.dir, full).split(sep).join("/"), type, size: entry.isFile() ? entry.size : 0 });
      if (recursive && type === "dir") queue.push(full);
    }
  }
  return { entries, truncated };
}

/**
 * @param {Record<string, unknown>} body
 * @param {Workspace} workspace
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
  res.writeHead(status, { "content-type": "application/json; charset=utf-8", "content-length": Buffer.byteLength(text), ...headers });
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
