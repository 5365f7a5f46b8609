/**
 * The shell server's routing (server.mjs describes the API): which credential
 * each route needs, the registration of a workspace with the server token,
 * and the dispatch of a workspace's own routes once its token is checked.
 */
import { execRoute } from "./exec.mjs";
import { fileOperation } from "./files.mjs";
import { readJsonBody, sendError, sendJson, toRequestError, unauthorized } from "./http.mjs";
import { bearerDigest, claimOwner, digestsEqual, saveRegistration, sha256 } from "./registry.mjs";
import { deleteWorkspace, ensureWorkspace, removeWorkspaceFiles } from "./workspaces.mjs";

/**
 * @typedef {import("./http.mjs").RequestError} RequestError
 * @typedef {import("./registry.mjs").Registration} Registration
 * @typedef {import("./workspaces.mjs").Context} Context
 * @typedef {import("./workspaces.mjs").Workspace} Workspace
 */

export const SHELL_SERVER_VERSION = "1";
const MAX_ID_LENGTH = 256;

/**
 * Answers one request: `/healthz` and registration with the server token,
 * every other route of a workspace with that workspace's own token.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 */
export async function handle(req, res, context) {
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
    return healthz(res, context, presented);
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
  const registered = await openWorkspace(req, res, context, id, presented);
  if (registered === undefined) return;
  if (route === "DELETE ") {
    req.resume();
    return sendJson(res, 200, await deleteWorkspace(context, id, registered));
  }
  return serveWorkspace(req, res, context, id, registered, /** @type {NonNullable<typeof handler>} */ (handler));
}

/**
 * `GET /healthz` with the server token.
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 * @param {Buffer | undefined} presented
 */
function healthz(res, context, presented) {
  if (!digestsEqual(presented, context.serverDigest))
    return unauthorized(res, "unauthorized", "/healthz needs the server token");
  return sendJson(res, 200, {
    ok: true,
    version: SHELL_SERVER_VERSION,
    running: context.running.size,
    isolation: context.users ? "uid" : "none",
  });
}

/**
 * The registration of workspace `id` when the request carries its token and
 * the registration is complete; else answers 401 and gives undefined.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 * @param {string} id
 * @param {Buffer | undefined} presented
 * @returns {Promise<Registration | undefined>}
 */
async function openWorkspace(req, res, context, id, presented) {
  const registered = context.registry.get(id);
  if (registered === undefined) {
    req.resume();
    unauthorized(
      res,
      "workspace_not_registered",
      `no workspace "${id}" is registered: register it with PUT /v1/workspaces/:id and the server token first`,
    );
    return undefined;
  }
  if (!digestsEqual(presented, registered.digest)) {
    req.resume();
    const why = digestsEqual(presented, context.serverDigest)
      ? "the server token does not open a workspace"
      : "this is not the workspace's token";
    unauthorized(res, "unauthorized", `${why}: send the token the workspace was registered with`);
    return undefined;
  }
  try {
    await registered.ready;
  } catch {
    req.resume();
    unauthorized(res, "workspace_not_registered", `workspace "${id}" could not be registered: register it again`);
    return undefined;
  }
  return registered;
}

/**
 * Runs one of a workspace's own routes (its token checked) on the request's JSON body.
 * @param {import("node:http").IncomingMessage} req
 * @param {import("node:http").ServerResponse} res
 * @param {Context} context
 * @param {string} id
 * @param {Registration} registered
 * @param {WorkspaceRoute} handler
 */
async function serveWorkspace(req, res, context, id, registered, handler) {
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
    const result = await handler(body, workspace, context, id);
    return sendJson(res, 200, result);
  } catch (err) {
    const e = toRequestError(err);
    return sendError(res, e.status, e.code, e.message);
  }
}

/** @typedef {(body: Record<string, unknown>, workspace: Workspace, context: Context, id: string) => Promise<unknown>} WorkspaceRoute */

/** @type {Record<string, WorkspaceRoute>} */
const ROUTES = {
  "POST /exec": execRoute,
  "POST /files/read": (body, workspace, context, id) => fileOperation(context, id, workspace, "read", body),
  "POST /files/write": (body, workspace, context, id) => fileOperation(context, id, workspace, "write", body),
  "POST /files/list": (body, workspace, context, id) => fileOperation(context, id, workspace, "list", body),
  "POST /files/delete": (body, workspace, context, id) => fileOperation(context, id, workspace, "delete", body),
};

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
