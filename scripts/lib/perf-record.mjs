/**
 * A native CPU profile of workerd with Linux `perf`, for `npm run bench --
 * --perf[=<scenario>]`. The inspector's profiler (`--profile`) charges each
 * call from JavaScript into workerd's C++ far more than it costs; `perf`
 * samples the whole process, SQLite, BoringSSL, V8's compiler threads and the
 * kernel included. V8 names its generated code in `/tmp/perf-<pid>.map` when
 * started with {@link PERF_V8_FLAGS} (miniflare passes
 * `MINIFLARE_WORKERD_V8_FLAGS` to workerd), so JavaScript functions show up by
 * name, e.g. `signParts index.js:83458`.
 */
import { execFileSync, spawn } from "node:child_process";

/**
 * V8 flags that write perf map files and keep interpreted frames on the native
 * stack. `--perf-basic-prof` turns V8's event log on too, which would leave an
 * `isolate-…-v8.log` per isolate in the working directory: it goes to /dev/null.
 */
export const PERF_V8_FLAGS =
  "--perf-basic-prof --interpreted-frames-native-stack --no-logfile-per-isolate --logfile=/dev/null";
/** Samples per second per CPU. */
const FREQUENCY = 2000;

/** Throws, saying what to install, unless `perf` runs here. */
export function assertPerfAvailable() {
  try {
    execFileSync("perf", ["--version"], { stdio: "ignore" });
  } catch {
    throw new Error("--perf needs Linux perf on the PATH (Debian: apt-get install -y linux-perf)");
  }
}

/**
 * Records the processes `pids` until {@link stop}: call-graph samples at
 * {@link FREQUENCY} Hz into `file`.
 * @param {number[]} pids @param {string} file
 */
export async function startPerf(pids, file) {
  const perf = spawn("perf", ["record", "-F", String(FREQUENCY), "-g", "-o", file, "-p", pids.join(",")], {
    stdio: ["ignore", "ignore", "inherit"],
  });
  const exited = new Promise((resolve) => perf.once("exit", resolve));
  // perf attaches asynchronously; samples before it has are lost, not wrong.
  await new Promise((resolve) => setTimeout(resolve, 300));
  return {
    /** Stops recording (perf writes the file on SIGINT). */
    stop: async () => {
      perf.kill("SIGINT");
      await exited;
    },
  };
}

/**
 * Prints the CPU per run, the share of each binary, the JavaScript
 * functions with the most samples under them, and the native symbols with
 * the most samples of their own.
 * @param {string} file @param {string} scenario @param {number} runs @param {number[]} pids
 */
export function reportPerf(file, scenario, runs, pids) {
  const bySymbol = perfReport(file, ["--children", "--sort", "sym"]);
  const byDso = perfReport(file, ["--no-children", "--sort", "dso", "-n"]);
  const self = perfReport(file, ["--no-children", "--sort", "sym"]);
  const samples = byDso.rows.reduce((sum, row) => sum + (row.count ?? 0), 0);
  const share = (/** @type {{ percent: number, name: string }[]} */ rows, count = 12) =>
    rows
      .slice(0, count)
      .map((row) => `  ${row.percent.toFixed(1).padStart(5)}%  ${row.name}`)
      .join("\n");
  console.log(`\nperf profile of ${scenario} (${runs} runs): ${file}`);
  console.log(
    `  ${samples} samples at ${FREQUENCY} Hz: ≈ ${Math.round((samples / FREQUENCY / runs) * 1000)} ms of CPU per run`,
  );
  console.log("by binary:\n" + share(byDso.rows, 6));
  // V8 names each tier's code apart (`JS:~f` interpreted, `JS:^f` baseline, `JS:*f` optimized): one row per function.
  const js = new Map();
  for (const row of bySymbol.rows.filter((each) => each.name.startsWith("JS:"))) {
    const name = row.name.replace(/^JS:[*+^~]?'?/, "") || "(anonymous)";
    js.set(name, (js.get(name) ?? 0) + row.percent);
  }
  const jsRows = [...js].map(([name, percent]) => ({ name, percent })).sort((a, b) => b.percent - a.percent);
  console.log("JavaScript functions, with what they call (% of all samples):\n" + share(jsRows, 25));
  console.log(
    "native symbols, self (% of all samples):\n" +
      share(
        self.rows.filter((row) => !row.name.startsWith("JS:")),
        20,
      ),
  );
  const maps = pids.map((pid) => `/tmp/perf-${pid}.map`).join(", ");
  console.log(`open it: perf report -i ${file} (it names JavaScript from ${maps}, left for it)`);
}

/**
 * One `perf report`, read by {@link parsePerfReport}.
 * @param {string} file @param {string[]} args
 */
function perfReport(file, args) {
  const raw = execFileSync("perf", ["report", "-i", file, "--stdio", "-g", "none", ...args], {
    encoding: "utf8",
    maxBuffer: 256 * 1024 * 1024,
    stdio: ["ignore", "pipe", "ignore"],
  });
  return { rows: parsePerfReport(raw) };
}

/**
 * The rows of `perf report --stdio -g none`: percent, sample count (with `-n`)
 * and name. The percent is a line's first (with `--children`, the samples
 * under the symbol); `[.]` and `[k]` are dropped from names; comments skipped.
 * @param {string} raw
 * @returns {{ percent: number, count: number | undefined, name: string }[]}
 */
export function parsePerfReport(raw) {
  const rows = [];
  for (const line of raw.split("\n")) {
    // `12.34%` [`0.56%` with --children | a sample count with -n] [`[.]` or `[k]`] name
    const match = /^\s*([\d.]+)%\s+(?:[\d.]+%\s+|(\d+)\s+)?(?:\[(?:\.|k)\]\s+)?(.+?)\s*$/.exec(line);
    if (match && !line.startsWith("#")) {
      rows.push({
        percent: Number(match[1]),
        count: match[2] === undefined ? undefined : Number(match[2]),
        name: match[3] ?? "",
      });
    }
  }
  return rows;
}
