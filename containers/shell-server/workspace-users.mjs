/**
 * One unprivileged Unix user per workspace, for a shell server that runs as
 * root (local mode on a root machine or in CI; see docs/containers.md, "Local
 * mode"). With it, a command of one workspace cannot read, list, change or
 * signal anything of another workspace, nor the server's registry: the kernel
 * refuses (`Permission denied`), whatever path or symbolic link it tries.
 *
 * - **Ids.** Each workspace gets a uid, and a gid of the same number, claimed
 *   machine-wide in {@link UID_CLAIMS_DIR} (one file per uid, created with
 *   O_EXCL, never removed): two shell servers on one machine, on different
 *   roots, never hand out the same uid, and a uid is never used twice, so
 *   nothing a deleted workspace left behind (a file in /tmp, a process) passes
 *   to a later one. Claims start at {@link DEFAULT_UID_BASE}; a uid or gid that
 *   the system knows (`getent passwd` / `getent group`) or that /etc/subuid or
 *   /etc/subgid delegates is skipped. The workspace's registration records its
 *   uid, so a restart on the same root keeps it.
 * - **Commands** run with that uid and gid and no supplementary groups (libuv
 *   drops them when a uid is given), umask 077.
 * - **File operations** that the server performs for a workspace (read, write,
 *   list, delete, resolving a working directory) run in a helper process with
 *   the workspace's uid (`file-agent.mjs`), one per active workspace, ended
 *   after 15 s without work (file-agents.mjs). The path checks stay as
 *   they were (no `..`, no absolute path, no symbolic link out), and the kernel
 *   now enforces them too: a link swapped in between the check and the open
 *   leads only where that uid may go.
 */
import { spawn } from "node:child_process";
import { lstat, mkdir, open, readFile, rename, rm, writeFile } from "node:fs/promises";
import { dirname, join } from "node:path";
import { STATE_DIR } from "./agent-runtime.mjs";

/** Where uids are claimed, machine-wide: root-owned, mode 0700 (its parent 0711). */
export const UID_CLAIMS_DIR = join(STATE_DIR, "uids");
/** The first uid (and gid) handed to a workspace. */
export const DEFAULT_UID_BASE = 200_000;
/** Node's spawn takes a uid up to 2^31 - 1; one below, so the last claim never overflows. */
const MAX_UID = 2 ** 31 - 2;
/** How many uids are claimed (and checked with `getent`) at a time. */
const UID_BATCH = 16;

/** @typedef {{ uid: number, gid: number }} Identity */

/** Whether this process may give its children other uids: it runs as root. */
export function isRoot() {
  return typeof process.getuid === "function" && process.getuid() === 0;
}

// ───────────────────────────── uid claims ─────────────────────────────

/**
 * Makes sure the claims directory exists, belongs to root and nobody else may
 * write it (a claim anyone could remove would let a uid be used twice).
 * @param {string} dir
 */
async function ensureClaimsDir(dir) {
  await mkdir(dir, { recursive: true, mode: 0o700 });
  for (const path of [dirname(dir), dir]) {
    const info = await lstat(path);
    if (!info.isDirectory() || info.uid !== 0 || (info.mode & 0o022) !== 0) {
      throw new Error(`${path} must be a directory owned by root that only root may write`);
    }
  }
}

/**
 * Claims `uid` for `owner` (O_EXCL): true when this call made the claim, or,
 * with `orSame`, when the claim already names the same owner (a registration
 * read back after a restart).
 * @param {string} dir
 * @param {number} uid
 * @param {string} owner
 * @param {boolean} orSame
 */
async function claim(dir, uid, owner, orSame) {
  const file = join(dir, String(uid));
  try {
    const handle = await open(file, "wx", 0o600);
    try {
      await handle.writeFile(`${owner}\n`);
    } finally {
      await handle.close();
    }
    return true;
  } catch (err) {
    if (/** @type {NodeJS.ErrnoException} */ (err).code !== "EEXIST") throw err;
    if (!orSame) return false;
    const held = await readFile(file, "utf8").catch(() => "");
    return held === `${owner}\n`;
  }
}

/**
 * Ranges that /etc/subuid or /etc/subgid delegate to someone (rootless
 * containers map their users there).
 * @returns {Promise<Array<[number, number]>>}
 */
async function loadDelegatedRanges() {
  /** @type {Array<[number, number]>} */
  const ranges = [];
  for (const file of ["/etc/subuid", "/etc/subgid"]) {
    const text = await readFile(file, "utf8").catch(() => "");
    for (const line of text.split("\n")) {
      const [, start, count] = line.trim().split(":");
      const first = Number(start);
      const size = Number(count);
      if (Number.isSafeInteger(first) && Number.isSafeInteger(size) && size > 0) ranges.push([first, first + size - 1]);
    }
  }
  return ranges;
}

/**
 * Which of `ids` the system already knows as a user or a group (through NSS,
 * so directory services count), by one `getent` per database; by /etc/passwd
 * and /etc/group when there is no `getent`.
 * @param {number[]} ids
 * @returns {Promise<Set<number>>}
 */
async function findKnownIds(ids) {
  /** @type {Set<number>} */
  const known = new Set();
  for (const database of ["passwd", "group"]) {
    const listed = await new Promise((resolveListed) => {
      // Exit code 2 when some key is missing: the entries found are still printed.
      const child = spawn("getent", [database, ...ids.map(String)], { stdio: ["ignore", "pipe", "ignore"] });
      let text = "";
      child.stdout?.on("data", (chunk) => (text += chunk));
      child.once("error", () => resolveListed(undefined));
      child.once("close", () => resolveListed(text));
    });
    const text = listed ?? (await readFile(`/etc/${database}`, "utf8").catch(() => ""));
    for (const line of text.split("\n")) known.add(Number(line.split(":")[2]));
  }
  return known;
}

/**
 * Where the next search starts: only a hint (claims decide), written whole.
 * @param {string} file
 * @param {number} uid
 */
async function saveHint(file, uid) {
  const temporary = `${file}.${process.pid}.${Date.now()}.tmp`;
  try {
    await writeFile(temporary, `${uid}\n`, { mode: 0o600 });
    await rename(temporary, file);
  } catch {
    await rm(temporary, { force: true }).catch(() => {});
  }
}

/**
 * Hands out uids: claims free ones machine-wide, a batch ahead (so that
 * registering a workspace waits for no `getent`), and gives each to one
 * workspace. Spare claims left when the server stops are never used.
 * @param {{ claimsDir?: string, base?: number, label: string }} options
 *   `label` names this server in its spare claims (its root)
 */
export async function createUidAllocator({ claimsDir = UID_CLAIMS_DIR, base = DEFAULT_UID_BASE, label }) {
  await ensureClaimsDir(claimsDir);
  const delegated = await loadDelegatedRanges();
  const hintFile = join(claimsDir, "next");
  /** @type {number[]} claimed, checked against the system's users and groups, not yet given */
  const spare = [];
  /** Serialises allocations of this process; claims keep other processes apart. */
  let queue = Promise.resolve(0);

  async function refill() {
    const hinted = Number((await readFile(hintFile, "utf8").catch(() => "")).trim());
    let uid = Number.isSafeInteger(hinted) && hinted > base ? hinted : base;
    /** @type {number[]} */
    const claimed = [];
    for (; uid <= MAX_UID && claimed.length < UID_BATCH; uid += 1) {
      if (delegated.some(([first, last]) => uid >= first && uid <= last)) continue;
      // A claim is kept even when the system knows the id, so nobody tries it again.
      if (await claim(claimsDir, uid, `${label}\t(spare)`, false)) claimed.push(uid);
    }
    if (claimed.length === 0) throw new Error(`no free uid left between ${base} and ${MAX_UID}`);
    await saveHint(hintFile, uid);
    const known = await findKnownIds(claimed);
    spare.push(...claimed.filter((id) => !known.has(id)));
  }

  /** @param {string} owner */
  async function allocate(owner) {
    while (spare.length === 0) await refill();
    const uid = /** @type {number} */ (spare.shift());
    await writeFile(join(claimsDir, String(uid)), `${owner}\n`, { mode: 0o600 });
    if (spare.length === 0) void refill().catch(() => {});
    return uid;
  }

  await refill();
  return {
    /**
     * A new uid for `owner` (a text naming the root and the workspace).
     * @param {string} owner
     * @returns {Promise<number>}
     */
    allocate(owner) {
      const next = queue.then(() => allocate(owner));
      queue = next.catch(() => 0);
      return next;
    },
    /**
     * Whether `uid`, read from a registration, is still this owner's (or
     * free, and now claimed for it).
     * @param {number} uid
     * @param {string} owner
     */
    confirm(uid, owner) {
      return claim(claimsDir, uid, owner, true);
    },
  };
}

// ───────────────────────────── processes ─────────────────────────────

/**
 * Ends every process of `identity`, whatever session or group it is in (a
 * `setsid` leftover too): `kill -9 -1` run as that uid signals exactly the
 * processes that uid owns. Repeated until none is left (at most 8 rounds).
 * Never run as root: -1 would mean every process.
 * @param {Identity} identity
 * @param {string} shell
 */
export function killAllOf(identity, shell) {
  if (!Number.isInteger(identity.uid) || identity.uid <= 0) return Promise.resolve();
  return new Promise((resolveKill) => {
    const child = spawn(shell, ["-c", "for i in 1 2 3 4 5 6 7 8; do kill -9 -1 2>/dev/null || exit 0; done"], {
      uid: identity.uid,
      gid: identity.gid,
      cwd: "/",
      env: { PATH: "/usr/bin:/bin" },
      stdio: "ignore",
    });
    child.once("error", () => resolveKill(undefined));
    child.once("exit", () => resolveKill(undefined));
  });
}

/**
 * Spawns with a umask of 077, so files a command creates outside its private
 * directories (in /tmp, say) are its own. Node has no umask option for spawn,
 * but the fork happens inside this synchronous call and copies the mask, so
 * it is set just around it; files created meanwhile by other threads of this
 * process get the stricter mask, never a looser one. Worker threads may not
 * change the umask: there the child keeps the process's.
 * @param {() => import("node:child_process").ChildProcess} start
 */
export function spawnPrivate(start) {
  let previous;
  try {
    previous = process.umask(0o077);
  } catch {
    previous = undefined;
  }
  try {
    return start();
  } finally {
    if (previous !== undefined) process.umask(previous);
  }
}

/**
 * A workspace's identity: its uid, and a gid of the same number.
 * @param {number} uid
 * @returns {Identity}
 */
export function idOf(uid) {
  return { uid, gid: uid };
}
