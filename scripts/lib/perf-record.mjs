/**
 * A native CPU profile of workerd with Linux `perf`, for `npm run bench --
 * --perf[=<scenario>]`. The inspector's profiler (`--profile`) charges each
 * call from JavaScript into workerd's C++ far more than it costs; `perf`
 * samples the whole process, SQLite, BoringSSL, V8's compiler threads and the
 * kernel included.
 *
 * JavaScript is named from V8's jitdump ({@link perfV8Flags}; miniflare passes
 * `MINIFLARE_WORKERD_V8_FLAGS` to workerd): V8 records each piece of code it
 * generates with the time it did, and `perf inject --jit` gives every sample
 * the code that was at its address then, e.g. `signParts index.js:83458`. The
 * simpler perf map (`--perf-basic-prof`, one address → name list per process)
 * misnames samples once V8 has thrown code away and put other code at the same
 * address, which a run does whenever a garbage collection deoptimizes: it
 * showed a fan-out's signing as zod's `parse`.
 */
import { execFileSync, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/**
 * V8 flags for a profiled workerd: write a jitdump into `dir` and keep
 * interpreted frames on the native stack. `--perf-prof` turns V8's event log
 * on too, which would leave an `isolate-…-v8.log` per isolate in the working
 * directory: it goes to /dev/null.
 * @param {string} dir
 */
export function perfV8Flags(dir) {
  return (
    `--perf-prof --perf-prof-path=${dir} --interpreted-frames-native-stack ` +
    "--no-logfile-per-isolate --logfile=/dev/null"
  );
}

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
 * {@link FREQUENCY} Hz into `file`, on the monotonic clock V8's jitdump uses.
 * @param {number[]} pids @param {string} file
 */
export async function startPerf(pids, file) {
  const args = ["record", "-k", "mono", "-F", String(FREQUENCY), "-g", "-o", file, "-p", pids.join(",")];
  const perf = spawn("perf", args, { stdio: ["ignore", "ignore", "inherit"] });
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
 * Names the JavaScript of a recording from the jitdump in `jitDir` (`perf
 * inject --jit`, which writes one small `.so` per piece of generated code
 * beside the dump: tens of thousands, ≈ 30 s), then prints the CPU per run,
 * the share of each binary, the JavaScript functions with the most samples
 * under them, the native symbols with the most samples of their own, and the
 * samples by part ({@link partsOf}).
 * @param {string} recorded @param {string} jitDir @param {string} scenario @param {number} runs
 */
export function reportPerf(recorded, jitDir, scenario, runs) {
  const file = recorded.replace(/\.data$/, "") + ".jit.data";
  console.log(`\nperf inject --jit: naming JavaScript from the jitdump in ${jitDir} …`);
  execFileSync("perf", ["inject", "--jit", "-i", recorded, "-o", file], { stdio: ["ignore", "ignore", "inherit"] });
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
  console.log("by binary:\n" + share(byBinary(byDso.rows), 6));
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
  const parts = partsOf(perfScript(file));
  console.log(
    `the engine's own code, with all it calls (its bundle's JavaScript on the stack): ${parts.own.toFixed(1)}%\n` +
      "by part, each sample to its innermost part (% of all samples):\n" +
      share(parts.rows, PARTS.length + 3),
  );
  console.log(`open it: perf report -i ${file} (it names JavaScript from the .so files in ${jitDir}, left for it)`);
}

/**
 * What a sample's innermost frame belongs to, tried in order on each frame from
 * the leaf outwards; a JavaScript frame ends the search (the sample is that
 * code's own work). Names as `perf script` demangles them.
 */
const PARTS = [
  { name: "SQLite (statements and commits)", test: /sqlite3|SqliteDatabase|ActorSqlite/ },
  { name: "fsync and write-back (kernel)", test: /fsync|writepages|jbd2|ext4_/ },
  { name: "Workers RPC (capnp, serialization)", test: /JsRpc|capnp|ValueSerializer|ValueDeserializer/ },
  { name: "HTTP client", test: /hyper|httparse|HttpClient|kj_hyper/ },
  { name: "Ed25519 and SHA-2 (BoringSSL)", test: /ED25519|ed25519|x25519|curve25519|sha256_block|sha512_block/ },
  { name: "V8 garbage collector", test: /Heap::|Scavenge|MarkCompact|Sweeper|cppgc|HeapTracer/ },
  { name: "V8 compiler", test: /compiler::|maglev::|Maglev|turboshaft|baseline::/ },
  { name: "JSON (V8's parser and stringifier)", test: /JsonParser|JsonStringifier/ },
];

/** Frames named after a module `index.js`: the engine's bundle (wrangler builds it so), or one of Miniflare's own workers. */
const INDEX_FRAME = /^JS:[*+^~]?'?([\w$.]*) index\.js:(\d+):(\d+)/;

/**
 * Miniflare's own workers whose module is also named `index.js`: the outbound
 * interceptor every `fetch` of a Worker passes through under `wrangler dev`
 * (it strips `CF-Connecting-IP`), and the Access identity worker.
 */
const DEV_SERVER_INDEX_WORKERS = ["core/outbound.worker.js", "access/access-identity.worker.js"];

/**
 * The `name index.js:line:column` positions in Miniflare's `index.js` workers
 * where a name is followed by `(`, as V8 names a function's code: the frames
 * in them are the dev server's, though they carry the bundle's file name.
 * @param {string[]} sources the workers' text
 */
export function devServerPositions(sources) {
  const positions = new Set();
  for (const source of sources) {
    source.split("\n").forEach((line, index) => {
      for (const match of line.matchAll(/([\w$]+)\s*\(/g)) {
        positions.add(`${match[1]} ${index + 1}:${(match.index ?? 0) + match[0].length}`);
      }
    });
  }
  return positions;
}

/** {@link devServerPositions} of the installed Miniflare (none if it is not where wrangler has it). */
function installedDevServerPositions() {
  try {
    const miniflare = dirname(createRequire(import.meta.url).resolve("miniflare"));
    const dir = join(miniflare, "workers");
    const sources = DEV_SERVER_INDEX_WORKERS.flatMap((file) => {
      try {
        return [readFileSync(join(dir, file), "utf8")];
      } catch {
        return [];
      }
    });
    return devServerPositions(sources);
  } catch {
    return new Set();
  }
}

/**
 * Whether a frame is the engine's own JavaScript: its bundle's `index.js`, and
 * not a Miniflare worker's at one of `devServer`'s positions.
 * @param {string} frame @param {Set<string>} devServer
 */
function isOwnFrame(frame, devServer) {
  const match = INDEX_FRAME.exec(frame);
  return match !== null && !devServer.has(`${match[1]} ${match[2]}:${match[3]}`);
}

/**
 * The samples of a `perf script -F comm,tid,time,ip,sym` text (a header line,
 * then one tab-indented frame a line, leaf first) by part: the share with the
 * engine's own JavaScript anywhere on the stack, and each part's share of
 * innermost frames ({@link PARTS}, then the bundle's JavaScript, the dev
 * server's, and everything else).
 * @param {string} text
 * @param {Set<string>} [devServer] positions of the dev server's `index.js` workers ({@link devServerPositions})
 * @returns {{ samples: number, own: number, rows: { name: string, percent: number }[] }}
 */
export function partsOf(text, devServer = installedDevServerPositions()) {
  const counts = new Map();
  let samples = 0;
  let own = 0;
  for (const frames of stacksOf(text)) {
    samples += 1;
    if (frames.some((frame) => isOwnFrame(frame, devServer))) {
      own += 1;
    }
    const part = innermostPart(frames, devServer);
    counts.set(part, (counts.get(part) ?? 0) + 1);
  }
  const percent = (/** @type {number} */ count) => (samples === 0 ? 0 : (100 * count) / samples);
  const rows = [...counts]
    .map(([name, count]) => ({ name, percent: percent(count) }))
    .sort((a, b) => b.percent - a.percent);
  return { samples, own: percent(own), rows };
}

/** @param {string[]} frames @param {Set<string>} devServer */
function innermostPart(frames, devServer) {
  for (const frame of frames) {
    if (frame.startsWith("JS:")) {
      return isOwnFrame(frame, devServer) ? "JavaScript: the engine's own" : "JavaScript: the dev server's";
    }
    const part = PARTS.find((each) => each.test.test(frame));
    if (part !== undefined) {
      return part.name;
    }
  }
  return "other (workerd, the kernel, the allocator)";
}

/**
 * The stacks of a `perf script` text, each its frames' symbols, leaf first.
 * @param {string} text
 */
function* stacksOf(text) {
  /** @type {string[] | null} */
  let frames = null;
  for (const line of text.split("\n")) {
    if (line.trim() === "") {
      continue;
    }
    if (!line.startsWith("\t") && !line.startsWith(" ")) {
      if (frames !== null) {
        yield frames;
      }
      frames = [];
    } else if (frames !== null) {
      frames.push(line.trim().replace(/^[0-9a-f]+ /, ""));
    }
  }
  if (frames !== null) {
    yield frames;
  }
}

/**
 * The samples of a recording with their call chains, as text.
 * @param {string} file
 */
function perfScript(file) {
  return execFileSync("perf", ["script", "-i", file, "-F", "comm,tid,time,ip,sym"], {
    encoding: "utf8",
    maxBuffer: 1024 * 1024 * 1024,
    stdio: ["ignore", "pipe", "ignore"],
  });
}

/**
 * The binaries' rows with V8's generated code, one `jitted-<pid>-<n>.so` per
 * piece after `perf inject --jit`, summed into one `[JIT]` row.
 * @param {{ percent: number, count: number | undefined, name: string }[]} rows
 */
export function byBinary(rows) {
  const jit = { percent: 0, count: 0, name: "[JIT] V8's generated code" };
  const others = [];
  for (const row of rows) {
    if (/^jitted-\d+-\d+\.so$/.test(row.name)) {
      jit.percent += row.percent;
      jit.count += row.count ?? 0;
    } else {
      others.push(row);
    }
  }
  return [...others, ...(jit.count > 0 || jit.percent > 0 ? [jit] : [])].sort((a, b) => b.percent - a.percent);
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
