/**
 * Workspace ids and paths: the directory name of each workspace id, the
 * folders under the root that no id can name, and the check that a
 * workspace-relative path stays inside its workspace.
 */
import { realpath } from "node:fs/promises";
import { dirname, isAbsolute, relative, resolve, sep } from "node:path";
import { RequestError } from "./http.mjs";

/** The folders under the root that hold every workspace's HOME and TMPDIR (names no encoded id can take). */
export const HOMES_DIR = ".homes";
export const TMP_DIR = ".tmp";
/** Where registrations are kept, under the root (a name no encoded workspace id can take). */
export const REGISTRY_DIR = ".registry";

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
export async function resolveInside(workspace, path) {
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
export function isWithin(parent, child) {
  const rel = relative(parent, child);
  return rel === "" || (!rel.startsWith(`..${sep}`) && rel !== ".." && !isAbsolute(rel));
}
