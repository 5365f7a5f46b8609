/**
 * A workspace's places (its directory, HOME and TMPDIR, given to its uid when
 * it has one), its deletion, and, when each workspace gets its own uid, the
 * root's set-up and the adoption of registrations read back from disk.
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { chmod, lchown, lstat, mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import { killGroup } from "./exec.mjs";
import { resolveAgentRuntime } from "./agent-runtime.mjs";
import { createFileAgents } from "./file-agents.mjs";
import { encodeWorkspaceId, HOMES_DIR, REGISTRY_DIR, TMP_DIR } from "./paths.mjs";
import { claimOwner, saveRegistration } from "./registry.mjs";
import { createUidAllocator, idOf, killAllOf } from "./workspace-users.mjs";

/**
 * @typedef {import("./registry.mjs").Registration} Registration
 * @typedef {{ allocator: Awaited<ReturnType<typeof createUidAllocator>>, agents: ReturnType<typeof createFileAgents> }} Users
 * @typedef {{ root: string, shell: string, running: Map<number, string>, serverDigest: Buffer, registry: Map<string, Registration>, users: Users | undefined }} Context
 *   `registry`: workspace id → its registration; `users`: set when each workspace has its own uid.
 */

/**
 * A workspace's places, its registration, and its uid when it has one (its gid is the same number).
 * @typedef {{ dir: string, home: string, tmp: string, registration: Registration, uid?: number }} Workspace
 */

/**
 * The workspace's directory, HOME and TMPDIR, made on first use; with a uid,
 * they belong to it, mode 0700, so no other workspace may enter them.
 * @param {Context} context
 * @param {string} id
 * @param {Registration} entry
 * @returns {Promise<Workspace>}
 */
export async function ensureWorkspace(context, id, entry) {
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
export function deleteWorkspace(context, id, entry) {
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
export async function removeWorkspaceFiles(context, id, uid) {
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

/**
 * Makes the root ready for a uid per workspace: the root and the folders of
 * HOMEs and TMPDIRs belong to root, 0711 (each uid may pass through to its
 * own folder, none may list them); the registry is root's alone, 0700. Checks
 * that such a uid can do its work.
 * @param {string} root
 * @returns {Promise<Users>}
 */
export async function prepareIsolation(root) {
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
  const runtime = await resolveAgentRuntime(root);
  return { allocator: await createUidAllocator({ label: root }), agents: createFileAgents(runtime) };
}

/**
 * Gives every registration read back from disk a uid of its own: the one it
 * recorded, when the machine-wide claim still names it; else a new one (a
 * registry written without isolation, or a claim lost), and its files are
 * handed to that uid (`chown -R -h`, which follows no link).
 * @param {Context} context
 * @param {Users} users
 */
export async function adoptRegistrations(context, users) {
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
