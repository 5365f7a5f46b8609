/**
 * CPU time of the workerd processes one `wrangler dev` started, from the
 * kernel's accounting (Linux only): the sum of `utime + stime` in
 * /proc/<pid>/stat over every workerd process in wrangler's process tree
 * (wrangler 4 starts two: the entry proxy and the Worker's own runtime). The
 * benchmarks read it before and after a run; the difference is what that run
 * cost, whatever thread it ran on. The kernel reports it in clock ticks
 * (`getconf CLK_TCK`, 100 on Linux: 10 ms), per process, so a difference is
 * exact to about one tick per process.
 *
 *   const meter = cpuMeter(dev.pid);
 *   const before = meter.read();
 *   // … run …
 *   const cpuMs = meter.read() - before;
 */
import { execFileSync } from "node:child_process";
import { readFileSync } from "node:fs";

/** Milliseconds per clock tick of /proc/<pid>/stat. */
export const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync("getconf", ["CLK_TCK"], { encoding: "utf8" }).trim());
  } catch {
    return 10;
  }
})();

/**
 * `root` and every process below it, with its command, from `ps`.
 * @param {number} root
 * @returns {{ pid: number, comm: string }[]}
 */
export function processTree(root) {
  const table = execFileSync("ps", ["-A", "-o", "pid=,ppid=,comm="], { encoding: "utf8" });
  /** @type {Map<number, { pid: number, comm: string }[]>} */
  const children = new Map();
  let self = { pid: root, comm: "" };
  for (const line of table.split("\n")) {
    const [pid, ppid, comm] = line.trim().split(/\s+/);
    if (comm === undefined) {
      continue;
    }
    const list = children.get(Number(ppid)) ?? [];
    list.push({ pid: Number(pid), comm });
    children.set(Number(ppid), list);
    if (Number(pid) === root) {
      self = { pid: root, comm };
    }
  }
  const found = [self];
  for (let i = 0; i < found.length; i += 1) {
    found.push(...(children.get(found[i].pid) ?? []));
  }
  return found;
}

/**
 * The pids of `root`'s descendants whose command is `name`.
 * @param {number} root @param {string} name
 */
export function descendantsNamed(root, name) {
  return processTree(root)
    .slice(1)
    .filter((process) => process.comm === name)
    .map((process) => process.pid);
}

/**
 * utime + stime in ticks of one process (`/proc/<pid>/stat`) or of one of its
 * threads (`/proc/<pid>/task/<tid>/stat`), or null once it is gone.
 * @param {string} path
 */
function ticksOf(path) {
  let stat;
  try {
    stat = readFileSync(path, "utf8");
  } catch {
    return null;
  }
  // The command (field 2) is in parentheses and may hold spaces: count fields after its `)`.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  // Fields 14 and 15 of proc(5) are utime and stime; fields[0] here is field 3.
  return Number(fields[11]) + Number(fields[12]);
}

/** @param {string[]} paths */
function sumTicks(paths) {
  const ticks = paths.map(ticksOf);
  if (ticks.includes(null)) {
    // wrangler restarted a runtime: a difference across that would be meaningless.
    throw new Error("a workerd process went away during the benchmark");
  }
  return ticks.reduce((sum, value) => sum + Number(value), 0);
}

/** @typedef {ReturnType<typeof cpuMeter>} CpuMeter */

/** How often `quiet()` reads the meter. */
const SAMPLE_MS = 5;

/**
 * A meter of the CPU time of the workerd processes under `wranglerPid`.
 * `read()` gives their total so far in ms; `readMain()` the part of it spent
 * on each process's main thread, the one that runs JavaScript (the rest is
 * V8's compiler and garbage collector threads and workerd's I/O helpers);
 * `pids` the processes it sums;
 * `quiet()` waits until the total has not moved for `quietMs` (workerd is
 * idle: a run has ended, or waits on I/O) or `maxMs` passed, and gives the
 * total then.
 * @param {number} wranglerPid
 */
export function cpuMeter(wranglerPid) {
  if (process.platform !== "linux") {
    throw new Error("CPU is measured from /proc/<pid>/stat: Linux only");
  }
  const pids = descendantsNamed(wranglerPid, "workerd");
  if (pids.length === 0) {
    throw new Error(`no workerd process under wrangler (pid ${wranglerPid})`);
  }
  return {
    get pids() {
      return [...pids];
    },
    read() {
      return sumTicks(pids.map((pid) => `/proc/${pid}/stat`)) * TICK_MS;
    },
    readMain() {
      return sumTicks(pids.map((pid) => `/proc/${pid}/task/${pid}/stat`)) * TICK_MS;
    },
    /** @param {number} [quietMs] @param {number} [maxMs] @returns {Promise<number>} */
    async quiet(quietMs = 50, maxMs = 1_000) {
      const started = Date.now();
      let last = this.read();
      let changedAt = started;
      for (;;) {
        await new Promise((resolve) => setTimeout(resolve, SAMPLE_MS));
        const now = Date.now();
        const total = this.read();
        if (total !== last) {
          [last, changedAt] = [total, now];
        }
        if (now - changedAt >= quietMs || now - started >= maxMs) {
          return last;
        }
      }
    },
  };
}
