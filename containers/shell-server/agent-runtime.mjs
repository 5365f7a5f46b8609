/**
 * What a workspace's uid runs its file helper with (file-agents.mjs): a node
 * binary and file-agent.mjs that an unprivileged uid can reach.
 *
 * Usually those are this process's own node and this folder's file-agent.mjs.
 * But a repository cloned as root into a folder only root may enter (`mktemp
 * -d`, `/root`, a 0700 home) hides both from every other uid, and so does a
 * node installed there (`node_modules/node`). Then the server stages a copy
 * of node and of the helper's modules in {@link RUNTIME_DIR}, a root-owned
 * folder every uid may read and nobody else may write, and runs them from
 * there. The copy is named by the SHA-256 of the binary and the modules' text
 * (hashing node takes about half a second, once per start that needs it), built in a temporary folder and renamed into place whole, so
 * servers of several clones share it and never see half of one. Nothing about
 * the workspaces changes: the helper still runs with the workspace's uid and
 * the kernel still checks every file operation with that uid's rights.
 */
import { spawn } from "node:child_process";
import { createHash, randomUUID } from "node:crypto";
import { constants, createReadStream } from "node:fs";
import { chmod, copyFile, lstat, mkdir, readFile, rename, rm, writeFile } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** The shell server's machine-wide state (uid claims, staged runtimes): root's, mode 0711. */
export const STATE_DIR = "/var/lib/trellis-shell-server";
/** Where node and the file helper are staged when the uids cannot reach them where they are. */
export const RUNTIME_DIR = join(STATE_DIR, "runtime");
/** The file helper, where this server's code is. */
export const AGENT_FILE = fileURLToPath(new URL("./file-agent.mjs", import.meta.url));
/** The uid and gid of the start-up probe: an unprivileged id with no files of ours. */
const PROBE_ID = 65_534;
const RELATIVE_IMPORT = /\bfrom\s+"(\.\/[\w.-]+\.mjs)"/g;

/** @typedef {{ node: string, agentFile: string }} AgentRuntime */

/**
 * The runtime a workspace's uid can use to run its file helper and reach
 * `root`: this process's own when an unprivileged uid can run it, else a copy
 * staged in `runtimeDir`. Throws, saying what failed, when neither works.
 * @param {string} root  the workspace root
 * @param {{ runtimeDir?: string }} [options]
 * @returns {Promise<AgentRuntime>}
 */
export async function resolveAgentRuntime(root, { runtimeDir = RUNTIME_DIR } = {}) {
  const own = { node: process.execPath, agentFile: AGENT_FILE };
  const direct = await probe(own, root);
  if (direct === "ok") return own;
  const staged = await stageRuntime(own, runtimeDir);
  const answer = await probe(staged, root);
  if (answer === "ok") return staged;
  throw new Error(
    `the shell server runs as root, so every workspace gets its own unprivileged uid, but such a uid cannot ` +
      `run ${own.node} on ${own.agentFile} (${direct}), nor the copy staged in ${dirname(staged.node)}, or ` +
      `cannot reach the workspace root ${root}: ${answer}. Give the workspace root a place other users may ` +
      `enter (--workspace-root), or start the server with isolation "none" (--isolation none), which leaves ` +
      `workspaces open to each other's commands`,
  );
}

/**
 * Runs the helper's probe as an unprivileged uid: "ok", or what went wrong.
 * @param {AgentRuntime} runtime
 * @param {string} root
 * @returns {Promise<string>}
 */
function probe(runtime, root) {
  return new Promise((resolveProbe) => {
    const child = spawn(runtime.node, [runtime.agentFile, "--probe", root], {
      uid: PROBE_ID,
      gid: PROBE_ID,
      cwd: "/",
      env: { PATH: process.env.PATH ?? "/usr/bin:/bin" },
      stdio: ["ignore", "pipe", "pipe"],
    });
    let text = "";
    child.stdout?.on("data", (chunk) => (text += chunk));
    child.stderr?.on("data", (chunk) => (text += chunk));
    child.once("error", (err) => resolveProbe(err.message));
    child.once("close", (code) => resolveProbe(code === 0 && text.trim() === "ok" ? "ok" : text.trim().slice(0, 500)));
  });
}

/**
 * The helper's modules: its entry file and every module it imports by a
 * relative path, transitively (they all sit in this folder).
 * @param {string} entry
 * @returns {Promise<Map<string, string>>} file name → source text
 */
export async function agentModules(entry) {
  const folder = dirname(entry);
  /** @type {Map<string, string>} */
  const modules = new Map();
  const pending = [basename(entry)];
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (modules.has(name)) continue;
    const text = await readFile(join(folder, name), "utf8");
    modules.set(name, text);
    for (const match of text.matchAll(RELATIVE_IMPORT)) pending.push(basename(match[1] ?? ""));
  }
  return modules;
}

/**
 * Copies node and the helper's modules into `runtimeDir/<key>` unless a copy
 * of the same binary and text is already there.
 * @param {AgentRuntime} own
 * @param {string} runtimeDir
 * @returns {Promise<AgentRuntime>}
 */
export async function stageRuntime(own, runtimeDir) {
  const modules = await agentModules(own.agentFile);
  const hash = createHash("sha256");
  for await (const chunk of createReadStream(own.node)) hash.update(chunk);
  for (const [name, text] of [...modules].sort(([a], [b]) => a.localeCompare(b))) hash.update(`${name}\0${text}\0`);
  const dir = join(runtimeDir, hash.digest("hex").slice(0, 32));
  const staged = { node: join(dir, "node"), agentFile: join(dir, basename(own.agentFile)) };
  await ensurePublicRootDir(runtimeDir);
  const present = await lstat(dir).catch(() => undefined);
  if (present?.isDirectory() && present.uid === 0) return staged;
  if (present !== undefined) throw new Error(`${dir} is not a directory of root's`);
  const building = join(runtimeDir, `.building-${randomUUID()}`);
  try {
    await mkdir(building, { mode: 0o755 });
    await copyFile(own.node, join(building, "node"), constants.COPYFILE_FICLONE);
    await chmod(join(building, "node"), 0o755);
    for (const [name, text] of modules) await writePublic(join(building, name), text);
    await chmod(building, 0o755);
    await rename(building, dir);
  } catch (err) {
    // Another server may have put the same copy in place first.
    if (!(await lstat(dir).catch(() => undefined))?.isDirectory()) throw err;
  } finally {
    await rm(building, { recursive: true, force: true });
  }
  return staged;
}

/**
 * @param {string} path
 * @param {string} text
 */
async function writePublic(path, text) {
  await writeFile(path, text, { mode: 0o644 });
  await chmod(path, 0o644);
}

/**
 * Makes `dir` and its parent root-owned folders that nobody else may write
 * and every uid may enter (the parent: only enter, 0711; `dir`: also read).
 * @param {string} dir
 */
async function ensurePublicRootDir(dir) {
  await mkdir(dir, { recursive: true, mode: 0o755 });
  for (const [path, mode] of /** @type {const} */ ([
    [dirname(dir), 0o711],
    [dir, 0o755],
  ])) {
    const info = await lstat(path);
    if (!info.isDirectory() || info.uid !== 0 || (info.mode & 0o022) !== 0) {
      throw new Error(`${path} must be a directory owned by root that only root may write`);
    }
    if ((info.mode & 0o777) !== mode) await chmod(path, mode);
  }
}
