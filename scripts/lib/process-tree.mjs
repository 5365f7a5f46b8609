/**
 * Ending a process and everything it started: its descendants (from `ps`) and,
 * optionally, its process group; and a detached watchdog process that does so
 * when this process goes away without cleaning up, or after a hard limit.
 * Used by scripts/lib/wrangler-dev.mjs and scripts/dev.mjs for `wrangler dev`
 * and its workerd processes.
 */
import { execFileSync, spawn } from "node:child_process";
import { rmSync } from "node:fs";
import { fileURLToPath } from "node:url";

const THIS_FILE = fileURLToPath(import.meta.url);
/** The watchdog's hard limit when the caller gives none: 2 h. */
export const DEFAULT_MAX_LIFETIME_MS = 2 * 60 * 60_000;

/**
 * All descendants of `pid` (children first-level first), from `ps`. Empty where
 * `ps` is unavailable.
 * @param {number} pid
 * @returns {number[]}
 */
function descendants(pid) {
  let table;
  try {
    table = execFileSync("ps", ["-A", "-o", "pid=,ppid="], { encoding: "utf8", stdio: ["ignore", "pipe", "ignore"] });
  } catch {
    return [];
  }
  /** @type {Map<number, number[]>} */
  const children = new Map();
  for (const line of table.split("\n")) {
    const [p, pp] = line.trim().split(/\s+/).map(Number);
    if (!p || pp === undefined || Number.isNaN(pp)) continue;
    const list = children.get(pp) ?? [];
    list.push(p);
    children.set(pp, list);
  }
  /** @type {number[]} */
  const out = [];
  const queue = [pid];
  while (queue.length) {
    const next = /** @type {number} */ (queue.shift());
    for (const c of children.get(next) ?? []) {
      if (!out.includes(c)) {
        out.push(c);
        queue.push(c);
      }
    }
  }
  return out;
}

/**
 * Sends `signal` to `pid`, all its descendants and, with `group`, its process group.
 * Never throws.
 * @param {number} pid
 * @param {NodeJS.Signals} signal
 * @param {{ group?: boolean }} [options]
 */
export function killTree(pid, signal, { group = false } = {}) {
  const tree = descendants(pid);
  if (group && process.platform !== "win32") {
    try {
      process.kill(-pid, signal);
    } catch {
      /* group gone */
    }
  }
  for (const p of [pid, ...tree]) {
    try {
      process.kill(p, signal);
    } catch {
      /* already gone */
    }
  }
}

/**
 * Starts a detached watchdog process that ends `pid`'s tree (its process group
 * too with `group`) when this process goes away without cleaning up (its stdin
 * pipe closes), or after `maxLifetimeMs`. It exits by itself once the target is
 * gone. Call the returned `dispose()` after stopping the target normally.
 * `removeDir`, if given, is deleted after the watchdog ends the target.
 * @param {{ pid: number, group?: boolean, maxLifetimeMs?: number, removeDir?: string }} options
 * @returns {{ dispose(): void }}
 */
export function startWatchdog({ pid, group = false, maxLifetimeMs = DEFAULT_MAX_LIFETIME_MS, removeDir = "" }) {
  const args = [THIS_FILE, "--watchdog", String(pid), group ? "group" : "tree", String(maxLifetimeMs), removeDir];
  const dog = spawn(process.execPath, args, {
    detached: true,
    stdio: ["pipe", "ignore", "ignore"],
  });
  dog.on("error", () => {});
  dog.stdin?.on("error", () => {});
  dog.unref();
  /** @type {any} */ (dog.stdin)?.unref?.();
  return {
    dispose() {
      try {
        if (dog.pid) process.kill(dog.pid, "SIGKILL");
      } catch {
        /* already gone */
      }
      dog.stdin?.destroy();
    },
  };
}

/** The watchdog itself: `node process-tree.mjs --watchdog <pid> <group|tree> <maxLifetimeMs> [removeDir]`. */
function runWatchdog(/** @type {string[]} */ args) {
  const pid = Number(args[0]);
  const group = args[1] === "group";
  const maxLifetimeMs = Number(args[2]) || DEFAULT_MAX_LIFETIME_MS;
  const removeDir = args[3];
  const alive = () => {
    try {
      process.kill(group ? -pid : pid, 0);
      return true;
    } catch {
      return false;
    }
  };
  let killing = false;
  const end = () => {
    if (killing) return;
    killing = true;
    killTree(pid, "SIGTERM", { group });
    setTimeout(() => {
      killTree(pid, "SIGKILL", { group });
      if (removeDir) rmSync(removeDir, { recursive: true, force: true });
      process.exit(0);
    }, 3_000);
  };
  process.stdin.on("end", end);
  process.stdin.on("close", end);
  process.stdin.on("error", end);
  process.stdin.resume();
  setTimeout(end, maxLifetimeMs);
  setInterval(() => {
    if (!killing && !alive()) process.exit(0);
  }, 2_000);
  for (const sig of /** @type {NodeJS.Signals[]} */ (["SIGINT", "SIGHUP"])) process.on(sig, () => {}); // only die on purpose
}

if (process.argv[1] === THIS_FILE && process.argv[2] === "--watchdog") {
  runWatchdog(process.argv.slice(3));
}
