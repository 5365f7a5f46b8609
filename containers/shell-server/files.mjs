/**
 * The file operations on a workspace (read, write, list, delete, and the
 * check of a command's working directory): run in the server's process when
 * workspaces share its user, else in the workspace's file helper with its own
 * uid (file-agent.mjs, which imports this module and nothing of the server).
 */
import { appendFile, lstat, mkdir, open, readdir, rm, stat, writeFile } from "node:fs/promises";
import { dirname, join, relative, sep } from "node:path";
import { optionalInt, RequestError, toRequestError } from "./http.mjs";
import { resolveInside } from "./paths.mjs";

/**
 * @typedef {import("./workspaces.mjs").Context} Context
 * @typedef {import("./workspaces.mjs").Workspace} Workspace
 */

/** Largest file read in one request: 32 MiB. */
export const MAX_READ_BYTES = 32 * 1024 * 1024;
const MAX_LIST_ENTRIES = 10_000;
const DEFAULT_LIST_ENTRIES = 1_000;

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
export async function fileOperation(context, id, workspace, op, body) {
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
 * @returns {import("./file-agents.mjs").AgentAnswer}
 */
function toAgentAnswer(result) {
  return "error" in result ? { ok: false, error: result.error } : { ok: true, value: result.value };
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
