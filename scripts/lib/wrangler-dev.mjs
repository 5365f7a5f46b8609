/**
 * Starts `wrangler dev` (real workerd, production code-generation rules) for
 * the end-to-end suite and other local tooling, and makes sure it goes away.
 *
 *   const dev = await startWranglerDev({ vars: { API_TOKENS: "t" } });
 *   await fetch(`${dev.url}/healthz`);
 *   await dev.stop();
 *
 * - Listens on 127.0.0.1 only, on a free port unless one is given.
 * - Local state goes to a fresh temporary directory (`--persist-to`), removed on stop,
 *   or to the caller's `persistTo` directory, kept, so that `kill()` (a crash: SIGKILL to the
 *   whole process group) and a new `startWranglerDev` on the same directory is a restart.
 * - Vars and secrets go through a temporary env file passed with `--env-file`
 *   (mode 0600, removed on stop). With `--env-file`, wrangler 4 loads only that
 *   file and skips `.dev.vars`/`.env` (see getVarsForDev in wrangler), so the
 *   user's `.dev.vars` is neither read nor touched, and secrets never appear on a
 *   command line (unlike `--var KEY:VALUE`, which also works but is visible in `ps`).
 * - Offline: CLOUDFLARE_CF_FETCH_ENABLED=false, WRANGLER_SEND_METRICS=false.
 * - wrangler runs in its own process group; stop() ends the whole tree (wrangler
 *   and its workerd processes). So do the exit of this process, SIGINT/SIGTERM/
 *   SIGHUP, and, if this process dies without cleaning up (SIGKILL), a small
 *   detached watchdog that notices its stdin pipe closing. The watchdog also ends
 *   wrangler after `maxLifetimeMs` (default 2 h) whatever happens.
 *
 * Also exports the helpers `scripts/dev.mjs` uses: resolveNode, resolveWrangler,
 * offlineEnv, freePort, startWatchdog, killTree.
 */
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file is scripts/lib/wrangler-dev.mjs). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

const THIS_FILE = fileURLToPath(import.meta.url);
const DEFAULT_MAX_LIFETIME_MS = 2 * 60 * 60_000;
const OUTPUT_LIMIT = 256 * 1024;

/**
 * A Node binary that can run wrangler (which needs Node >= 22): the current one
 * if recent enough, else the `node` devDependency's binary.
 * @param {string} [root]
 * @returns {string}
 */
export function resolveNode(root = repoRoot) {
  const major = Number(process.versions.node.split(".")[0]);
  if (major >= 22) return process.execPath;
  const local = join(root, "node_modules", "node", "bin", "node");
  return existsSync(local) ? local : process.execPath;
}

/**
 * wrangler's entry script, from node_modules (`node_modules/.bin/wrangler` links to it).
 * @param {string} [root]
 * @returns {string}
 */
export function resolveWrangler(root = repoRoot) {
  for (const base of [root, repoRoot]) {
    const bin = join(base, "node_modules", "wrangler", "bin", "wrangler.js");
    if (existsSync(bin)) return bin;
  }
  throw new Error(`wrangler is not installed (no node_modules/wrangler under ${root}): run npm install`);
}

/**
 * The environment for an offline wrangler: no calls to Cloudflare, no metrics.
 * @param {NodeJS.ProcessEnv} [base]
 * @returns {NodeJS.ProcessEnv}
 */
export function offlineEnv(base = process.env) {
  return {
    ...base,
    CLOUDFLARE_CF_FETCH_ENABLED: "false",
    WRANGLER_SEND_METRICS: "false",
    // Don't let the caller's environment leak into the Worker's bindings.
    CLOUDFLARE_INCLUDE_PROCESS_ENV: "false",
  };
}

/**
 * A port that was free on 127.0.0.1 a moment ago.
 * @returns {Promise<number>}
 */
export function freePort() {
  return new Promise((resolvePort, reject) => {
    const srv = createServer();
    srv.unref();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = /** @type {import("node:net").AddressInfo} */ (srv.address());
      srv.close(() => resolvePort(port));
    });
  });
}

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

/** The watchdog itself: `node wrangler-dev.mjs --watchdog <pid> <group|tree> <maxLifetimeMs> [removeDir]`. */
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

/**
 * A dotenv line for KEY=value that wrangler's dotenv + dotenv-expand read back as
 * exactly `value`.
 * @param {string} key
 * @param {unknown} raw
 */
function envLine(key, raw) {
  if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(key)) throw new Error(`invalid var name: ${key}`);
  const value = typeof raw === "string" ? raw : JSON.stringify(raw);
  if (/[\r\n]/.test(value)) throw new Error(`var ${key}: multi-line values are not supported`);
  // Plain values (tokens, base64 keys, URLs) go unquoted; anything else in single
  // quotes, which dotenv keeps literally. dotenv-expand still expands `$`, so
  // escape it as `\$`, which it turns back into `$`.
  if (/^[A-Za-z0-9_.,:/+=@%?&~-]*$/.test(value)) return `${key}=${value}`;
  if (value.includes("'")) throw new Error(`var ${key}: values with both special characters and ' are not supported`);
  return `${key}='${value.replaceAll("$", "\\$")}'`;
}

/**
 * @typedef {object} WranglerDev
 * @property {string} url        e.g. `http://127.0.0.1:41234`
 * @property {number} port
 * @property {number} inspectorPort  the DevTools inspector (CPU profiles: `npm run bench -- --profile`)
 * @property {number} pid        wrangler's pid (also its process group id)
 * @property {number} startupMs  from spawn to the first 200 from /healthz
 * @property {() => string} output  what wrangler printed so far (last 256 KiB)
 * @property {() => Promise<void>} stop  ends the whole tree and removes the temp dir
 * @property {() => Promise<void>} kill  a crash: SIGKILL to the whole process group at once (nothing
 *   shuts down or flushes), then the same cleanup as stop; a `persistTo` state dir is kept
 */

/**
 * Starts `wrangler dev` on 127.0.0.1 and waits for `GET /healthz` to answer 200.
 * @param {object} [options]
 * @param {number} [options.port]   0 or absent: a free port
 * @param {Record<string, unknown>} [options.vars]  bindings for the Worker (secrets and vars)
 * @param {string} [options.cwd]    the project directory (default: this repository)
 * @param {string} [options.config] a wrangler config path (default: wrangler finds it in cwd)
 * @param {number} [options.timeoutMs]  how long to wait for /healthz (default 90 s)
 * @param {number} [options.maxLifetimeMs]  the watchdog's hard limit (default 2 h)
 * @param {string[]} [options.extraArgs]  more `wrangler dev` arguments
 * @param {boolean} [options.echo]  also copy wrangler's output to stderr (default: env TRELLIS_WRANGLER_ECHO=1)
 * @param {boolean} [options.localTraces]  keep wrangler's local trace store on (default off: it
 *   writes every invocation's spans to SQLite on the Worker's thread, which slows a wide fan-out ~10%)
 * @param {string} [options.persistTo]  a state directory the caller owns (Durable Objects, alarms):
 *   it outlives this wrangler, so another one started on it later resumes the same state (a
 *   restart). Default: a fresh directory inside the temp dir, removed on stop
 * @returns {Promise<WranglerDev>}
 */
export async function startWranglerDev(options = {}) {
  const autoPort = !options.port;
  let lastError;
  for (let attempt = 0; attempt < (autoPort ? 3 : 1); attempt++) {
    try {
      return await startOnce(options);
    } catch (err) {
      lastError = err;
      // Another process took the port between freePort() and wrangler's listen: try another.
      if (!autoPort || !/EADDRINUSE|address already in use/i.test(String(/** @type {any} */ (err)?.output ?? "")))
        break;
    }
  }
  throw lastError;
}

/** @param {Parameters<typeof startWranglerDev>[0] & {}} options */
async function startOnce({
  port,
  vars = {},
  cwd = repoRoot,
  config,
  timeoutMs = 90_000,
  maxLifetimeMs = DEFAULT_MAX_LIFETIME_MS,
  extraArgs = [],
  echo = process.env.TRELLIS_WRANGLER_ECHO === "1",
  localTraces = false,
  persistTo,
}) {
  const listenPort = port || (await freePort());
  const inspectorPort = await freePort();
  const tmp = mkdtempSync(join(tmpdir(), "trellis-wrangler-"));
  const envFile = join(tmp, "vars.env");
  writeFileSync(
    envFile,
    Object.entries(vars)
      .map(([k, v]) => envLine(k, v))
      .join("\n") + "\n",
    { mode: 0o600 },
  );

  const args = [
    resolveWrangler(cwd),
    "dev",
    ...(config ? ["--config", config] : []),
    "--ip",
    "127.0.0.1",
    "--port",
    String(listenPort),
    "--inspector-ip",
    "127.0.0.1",
    "--inspector-port",
    String(inspectorPort),
    "--persist-to",
    persistTo ?? join(tmp, "state"),
    "--env-file",
    envFile,
    "--show-interactive-dev-session=false",
    // Remote bindings off: Workers AI and Vectorize exist only on Cloudflare's network, and
    // without --local wrangler tries to open a remote proxy session (which needs a login).
    "--local",
    ...extraArgs,
  ];
  const started = Date.now();
  const child = spawn(resolveNode(cwd), args, {
    cwd,
    detached: process.platform !== "win32", // its own process group: stop() ends the whole tree
    stdio: ["ignore", "pipe", "pipe"],
    env: offlineEnv({
      ...process.env,
      WRANGLER_LOG_PATH: join(tmp, "logs"),
      FORCE_COLOR: "0",
      NO_COLOR: "1",
      // wrangler's local trace store (the local explorer's "observability") writes every
      // invocation's spans to a SQLite database on the Worker's own thread: off for
      // tests and benchmarks, where nobody reads it. Production tracing is not local.
      X_LOCAL_OBSERVABILITY: localTraces ? "true" : "false",
    }),
  });
  const pid = /** @type {number} */ (child.pid);

  let output = "";
  const collect = (/** @type {Buffer} */ chunk) => {
    output += chunk.toString("utf8");
    if (output.length > OUTPUT_LIMIT) output = output.slice(-OUTPUT_LIMIT);
    if (echo) process.stderr.write(chunk);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  /** @type {{ code: number | null, signal: NodeJS.Signals | null } | undefined} */
  let exited;
  const exitPromise = new Promise((res) => {
    child.once("exit", (code, signal) => {
      exited = { code, signal };
      res(exited);
    });
    child.once("error", (err) => {
      output += `\n[spawn error] ${err.message}\n`;
      exited = { code: -1, signal: null };
      res(exited);
    });
  });

  const watchdog = pid
    ? startWatchdog({ pid, group: process.platform !== "win32", maxLifetimeMs, removeDir: tmp })
    : { dispose() {} };

  // Clean up on exit and on the usual signals, even if stop() is never called.
  const killNow = () => {
    if (pid) killTree(pid, "SIGKILL", { group: true });
    watchdog.dispose();
    rmSync(tmp, { recursive: true, force: true });
  };
  /** @param {NodeJS.Signals} sig */
  const onSignal = (sig) => {
    removeHooks();
    killNow();
    // Re-raise so the default behaviour (or the program's own handlers) apply.
    if (process.listenerCount(sig) === 0) process.kill(process.pid, sig);
  };
  const signals = /** @type {NodeJS.Signals[]} */ (["SIGINT", "SIGTERM", "SIGHUP"]);
  for (const sig of signals) process.on(sig, onSignal);
  process.on("exit", killNow);
  const removeHooks = () => {
    for (const sig of signals) process.off(sig, onSignal);
    process.off("exit", killNow);
  };

  /** @type {Promise<void> | undefined} */
  let stopping;
  /** @param {NodeJS.Signals} signal  SIGTERM (stop) or SIGKILL (kill: a crash) */
  const end = (signal) =>
    (stopping ??= (async () => {
      removeHooks();
      if (!exited && pid) {
        killTree(pid, signal, { group: true });
        await Promise.race([exitPromise, delay(5_000)]);
      }
      // workerd children can outlive wrangler: end whatever is left of the group.
      if (pid) killTree(pid, "SIGKILL", { group: true });
      watchdog.dispose();
      child.stdout?.destroy();
      child.stderr?.destroy();
      rmSync(tmp, { recursive: true, force: true });
    })());
  const stop = () => end("SIGTERM");
  const kill = () => end("SIGKILL");

  const url = `http://127.0.0.1:${listenPort}`;
  const deadline = started + timeoutMs;
  let lastProblem = "no answer yet";
  while (true) {
    if (exited) {
      await stop();
      throw startupError(
        `wrangler dev exited (code ${exited.code}, signal ${exited.signal}) before /healthz answered`,
        output,
      );
    }
    if (Date.now() > deadline) {
      await stop();
      throw startupError(
        `wrangler dev: /healthz did not answer 200 within ${timeoutMs} ms (last: ${lastProblem})`,
        output,
      );
    }
    try {
      const res = await fetch(`${url}/healthz`, { signal: AbortSignal.timeout(5_000) });
      await res.arrayBuffer().catch(() => {});
      if (res.status === 200) break;
      lastProblem = `status ${res.status}`;
    } catch (err) {
      lastProblem = String(/** @type {any} */ (err)?.cause?.code ?? /** @type {any} */ (err)?.message ?? err);
    }
    await delay(150);
  }

  return {
    url,
    port: listenPort,
    inspectorPort,
    pid,
    startupMs: Date.now() - started,
    output: () => output,
    stop,
    kill,
  };
}

/**
 * @param {string} message
 * @param {string} output
 */
function startupError(message, output) {
  process.stderr.write(`\n${message}\n----- wrangler output -----\n${output}\n---------------------------\n`);
  return Object.assign(new Error(message), { output });
}

/** @param {number} ms */
function delay(ms) {
  return new Promise((res) => setTimeout(res, ms));
}

if (process.argv[1] === THIS_FILE && process.argv[2] === "--watchdog") {
  runWatchdog(process.argv.slice(3));
}
