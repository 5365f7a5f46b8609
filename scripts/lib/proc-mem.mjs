/**
 * Memory of one `wrangler dev` and its state on disk (Linux only), for
 * `npm run bench:events`:
 *
 * - `memoryOf(wranglerPid)`: the resident memory (`VmRSS`, and its anonymous
 *   part `RssAnon`: heap and stacks, not mapped files) of the workerd
 *   processes under wrangler, and of the whole tree (wrangler's Node process,
 *   workerd, anything else it started), from `/proc/<pid>/status`.
 * - `liveObjects(pids, stateDir)`: how many Durable Objects of each class
 *   workerd has open: local workerd opens each object's SQLite file
 *   (`<state>/v3/do/<worker>-<Class>/<id>.sqlite`) when the object starts and
 *   closes it when it evicts the object, so the open files are the live
 *   objects.
 * - `diskUsage(dir)`: the files under a directory, their bytes and the blocks
 *   allocated to them.
 * - `jsHeap(inspectorPort)`: the V8 heap of the Worker's isolate, in use and
 *   reserved (the part of the RSS that is JavaScript objects).
 */
import { readdirSync, readFileSync, readlinkSync, statSync } from "node:fs";
import { join } from "node:path";
import { processTree } from "./proc-cpu.mjs";

/**
 * The `kB` fields of one `/proc/<pid>/status`, or null once it is gone.
 * @param {number} pid
 * @returns {{ rssKiB: number, anonKiB: number } | null}
 */
export function statusMemory(pid) {
  let status;
  try {
    status = readFileSync(`/proc/${pid}/status`, "utf8");
  } catch {
    return null;
  }
  const field = (/** @type {string} */ name) =>
    Number(new RegExp(`^${name}:\\s+(\\d+) kB`, "m").exec(status)?.[1] ?? 0);
  return { rssKiB: field("VmRSS"), anonKiB: field("RssAnon") };
}

/**
 * Resident memory of the workerd processes under `wranglerPid` and of its whole tree, in KiB.
 * @param {number} wranglerPid
 */
export function memoryOf(wranglerPid) {
  const sum = {
    workerd: { rssKiB: 0, anonKiB: 0 },
    tree: { rssKiB: 0, anonKiB: 0 },
    workerdPids: /** @type {number[]} */ ([]),
  };
  for (const { pid, comm } of processTree(wranglerPid)) {
    const memory = statusMemory(pid);
    if (memory === null) {
      continue;
    }
    sum.tree.rssKiB += memory.rssKiB;
    sum.tree.anonKiB += memory.anonKiB;
    if (comm === "workerd") {
      sum.workerd.rssKiB += memory.rssKiB;
      sum.workerd.anonKiB += memory.anonKiB;
      sum.workerdPids.push(pid);
    }
  }
  return sum;
}

/**
 * How many objects of each Durable Object class the processes `pids` have open
 * under `stateDir` (each live object holds its `<id>.sqlite` open), by class
 * directory name (e.g. `trellis-Coordinator`).
 * @param {number[]} pids @param {string} stateDir
 * @returns {Record<string, number>}
 */
export function liveObjects(pids, stateDir) {
  const prefix = join(stateDir, "v3", "do") + "/";
  /** @type {Record<string, number>} */
  const counts = {};
  for (const pid of pids) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      let target;
      try {
        target = readlinkSync(`/proc/${pid}/fd/${fd}`);
      } catch {
        continue;
      }
      const match = target.startsWith(prefix)
        ? /^([^/]+)\/(?!metadata\.)[^/]+\.sqlite$/.exec(target.slice(prefix.length))
        : null;
      if (match !== null) {
        counts[match[1]] = (counts[match[1]] ?? 0) + 1;
      }
    }
  }
  return counts;
}

/**
 * The regular files under `dir` (recursively): how many, their bytes, and the bytes of the blocks allocated to them.
 * @param {string} dir
 */
export function diskUsage(dir) {
  const usage = { files: 0, bytes: 0, allocated: 0 };
  /** @type {import("node:fs").Dirent[]} */
  let entries;
  try {
    entries = readdirSync(dir, { withFileTypes: true });
  } catch {
    return usage;
  }
  for (const entry of entries) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      const inner = diskUsage(path);
      usage.files += inner.files;
      usage.bytes += inner.bytes;
      usage.allocated += inner.allocated;
    } else if (entry.isFile()) {
      let stat;
      try {
        stat = statSync(path);
      } catch {
        continue; // gone meanwhile (a -wal file of an object that closed)
      }
      usage.files += 1;
      usage.bytes += stat.size;
      usage.allocated += stat.blocks * 512;
    }
  }
  return usage;
}

/** How long `jsHeap` waits for each answer of the inspector. */
const INSPECTOR_TIMEOUT_MS = 10_000;

/**
 * The V8 heap of the Worker's isolate (every Durable Object of the Worker runs
 * in it under `wrangler dev`), from `Runtime.getHeapUsage` through wrangler's
 * inspector on `port`: bytes in use and reserved, or null when it does not answer.
 * @param {number} port
 * @returns {Promise<{ usedBytes: number, totalBytes: number } | null>}
 */
export async function jsHeap(port) {
  const targets = await (await fetch(`http://127.0.0.1:${port}/json`)).json();
  // wrangler's inspector proxy accepts local origins only; `ws` lets us send one.
  const { default: WebSocket } = await import("ws");
  const socket = new WebSocket(targets[0].webSocketDebuggerUrl, { headers: { origin: "http://127.0.0.1" } });
  /** @type {Map<number, (result: Record<string, number>) => void>} */
  const pending = new Map();
  socket.on("message", (data) => {
    const message = JSON.parse(String(data));
    pending.get(message.id)?.(message.result ?? {});
    pending.delete(message.id);
  });
  let nextId = 1;
  /** @param {string} method @returns {Promise<Record<string, number> | null>} */
  const send = (method) => {
    const id = nextId++;
    socket.send(JSON.stringify({ id, method, params: {} }));
    return Promise.race([
      new Promise((resolve) => pending.set(id, resolve)),
      new Promise((resolve) => setTimeout(() => resolve(null), INSPECTOR_TIMEOUT_MS)),
    ]);
  };
  try {
    await new Promise((resolve, reject) => {
      socket.once("open", resolve);
      socket.once("error", reject);
    });
    // The inspector answers getHeapUsage only once the Runtime domain is enabled.
    await send("Runtime.enable");
    const usage = await send("Runtime.getHeapUsage");
    return usage === null ? null : { usedBytes: usage.usedSize, totalBytes: usage.totalSize };
  } finally {
    socket.close();
  }
}
