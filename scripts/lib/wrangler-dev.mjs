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
 * - The run index's D1 migrations (migrations/) are applied to that state first
 *   (scripts/lib/d1-migrations.mjs), as `npm run dev` does.
 * - Offline: CLOUDFLARE_CF_FETCH_ENABLED=false, WRANGLER_SEND_METRICS=false.
 * - wrangler runs in its own process group; stop() ends the whole tree (wrangler
 *   and its workerd processes). So do the exit of this process, SIGINT/SIGTERM/
 *   SIGHUP, and, if this process dies without cleaning up (SIGKILL), a small
 *   detached watchdog that notices its stdin pipe closing. The watchdog also ends
 *   wrangler after `maxLifetimeMs` (default 2 h) whatever happens.
 *
 * Also exports the helpers `scripts/dev.mjs` uses: resolveNode, resolveWrangler,
 * offlineEnv, freePort, repoRoot (from toolchain.mjs), and startWatchdog and
 * killTree (from process-tree.mjs).
 */
import { spawn } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { applyLocalMigrations } from "./d1-migrations.mjs";
import { DEFAULT_MAX_LIFETIME_MS, killTree, startWatchdog } from "./process-tree.mjs";
import { freePort, offlineEnv, repoRoot, resolveNode, resolveWrangler } from "./toolchain.mjs";

export { killTree, startWatchdog } from "./process-tree.mjs";
export { freePort, offlineEnv, repoRoot, resolveNode, resolveWrangler } from "./toolchain.mjs";

const OUTPUT_LIMIT = 256 * 1024;

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
 * @param {boolean} [options.migrations]  apply the run index's D1 migrations first (default true;
 *   false for a config without the run index, such as the bench's own Workers)
 * @param {number} [options.timeoutMs]  how long to wait for /healthz (default 90 s)
 * @param {number} [options.maxLifetimeMs]  the watchdog's hard limit (default 2 h)
 * @param {string[]} [options.extraArgs]  more `wrangler dev` arguments
 * @param {boolean} [options.echo]  also copy wrangler's output to stderr (default: env TRELLIS_WRANGLER_ECHO=1)
 * @param {string} [options.v8Flags]  flags for workerd's V8 (`npm run bench -- --perf`: perf map files)
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
  migrations = true,
  timeoutMs = 90_000,
  maxLifetimeMs = DEFAULT_MAX_LIFETIME_MS,
  extraArgs = [],
  echo = process.env.TRELLIS_WRANGLER_ECHO === "1",
  localTraces = false,
  v8Flags,
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
  const state = persistTo ?? join(tmp, "state");
  try {
    if (migrations) {
      await applyLocalMigrations({ cwd, config, persistTo: state, env: { WRANGLER_LOG_PATH: join(tmp, "logs") } });
    }
  } catch (err) {
    rmSync(tmp, { recursive: true, force: true });
    throw startupError(/** @type {Error} */ (err).message, String(/** @type {any} */ (err)?.output ?? ""));
  }
  const args = wranglerArgs({ cwd, config, listenPort, inspectorPort, state, envFile });
  const started = Date.now();
  const child = spawnWrangler(cwd, [...args, ...extraArgs], tmp, localTraces, v8Flags);
  const pid = /** @type {number} */ (child.pid);
  const proc = watchWrangler(child, echo);
  const watchdog = pid
    ? startWatchdog({ pid, group: process.platform !== "win32", maxLifetimeMs, removeDir: tmp })
    : { dispose() {} };
  const { stop, kill } = createStop(child, pid, tmp, watchdog, proc);

  const url = `http://127.0.0.1:${listenPort}`;
  await waitForHealthz(url, started + timeoutMs, timeoutMs, proc, stop);
  return {
    url,
    port: listenPort,
    inspectorPort,
    pid,
    startupMs: Date.now() - started,
    output: () => proc.output,
    stop,
    kill,
  };
}

/**
 * `wrangler dev`'s command line (wrangler's entry script first), without the caller's extra arguments.
 * @param {{ cwd: string, config?: string, listenPort: number, inspectorPort: number, state: string, envFile: string }} options
 */
function wranglerArgs({ cwd, config, listenPort, inspectorPort, state, envFile }) {
  return [
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
    state,
    "--env-file",
    envFile,
    "--show-interactive-dev-session=false",
    // Remote bindings off: Workers AI and Vectorize exist only on Cloudflare's network, and
    // without --local wrangler tries to open a remote proxy session (which needs a login).
    "--local",
  ];
}

/**
 * Spawns wrangler offline, in its own process group, its logs under `tmp`.
 * @param {string} cwd
 * @param {string[]} args
 * @param {string} tmp
 * @param {boolean} localTraces
 * @param {string} [v8Flags]
 */
function spawnWrangler(cwd, args, tmp, localTraces, v8Flags) {
  return spawn(resolveNode(cwd), args, {
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
      // miniflare passes these to the workerd it starts.
      ...(v8Flags === undefined ? {} : { MINIFLARE_WORKERD_V8_FLAGS: v8Flags }),
    }),
  });
}

/**
 * What is known of a running wrangler: what it printed so far (the last
 * 256 KiB) and how it ended, once it has.
 * @typedef {object} WranglerProcess
 * @property {string} output
 * @property {{ code: number | null, signal: NodeJS.Signals | null } | undefined} exited
 * @property {Promise<unknown>} exitPromise  settles when it has ended (or failed to start)
 */

/**
 * Collects wrangler's output (copied to stderr with `echo`) and notes its end.
 * @param {import("node:child_process").ChildProcess} child
 * @param {boolean} echo
 * @returns {WranglerProcess}
 */
function watchWrangler(child, echo) {
  /** @type {WranglerProcess} */
  const proc = { output: "", exited: undefined, exitPromise: Promise.resolve() };
  const collect = (/** @type {Buffer} */ chunk) => {
    proc.output += chunk.toString("utf8");
    if (proc.output.length > OUTPUT_LIMIT) proc.output = proc.output.slice(-OUTPUT_LIMIT);
    if (echo) process.stderr.write(chunk);
  };
  child.stdout?.on("data", collect);
  child.stderr?.on("data", collect);
  proc.exitPromise = new Promise((res) => {
    child.once("exit", (code, signal) => {
      proc.exited = { code, signal };
      res(proc.exited);
    });
    child.once("error", (err) => {
      proc.output += `\n[spawn error] ${err.message}\n`;
      proc.exited = { code: -1, signal: null };
      res(proc.exited);
    });
  });
  return proc;
}

/**
 * The `stop()` and `kill()` of a started wrangler, and the hooks that end it
 * when this process exits or gets a signal, even if neither is ever called.
 * @param {import("node:child_process").ChildProcess} child
 * @param {number} pid
 * @param {string} tmp
 * @param {{ dispose(): void }} watchdog
 * @param {WranglerProcess} proc
 */
function createStop(child, pid, tmp, watchdog, proc) {
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
      if (!proc.exited && pid) {
        killTree(pid, signal, { group: true });
        await Promise.race([proc.exitPromise, delay(5_000)]);
      }
      // workerd children can outlive wrangler: end whatever is left of the group.
      if (pid) killTree(pid, "SIGKILL", { group: true });
      watchdog.dispose();
      child.stdout?.destroy();
      child.stderr?.destroy();
      rmSync(tmp, { recursive: true, force: true });
    })());
  return { stop: () => end("SIGTERM"), kill: () => end("SIGKILL") };
}

/**
 * Polls `GET /healthz` until it answers 200; stops wrangler and throws (with
 * its output) when it exits first or `deadline` passes.
 * @param {string} url
 * @param {number} deadline
 * @param {number} timeoutMs
 * @param {WranglerProcess} proc
 * @param {() => Promise<void>} stop
 */
async function waitForHealthz(url, deadline, timeoutMs, proc, stop) {
  let lastProblem = "no answer yet";
  while (true) {
    const exited = proc.exited;
    if (exited) {
      await stop();
      throw startupError(
        `wrangler dev exited (code ${exited.code}, signal ${exited.signal}) before /healthz answered`,
        proc.output,
      );
    }
    if (Date.now() > deadline) {
      await stop();
      throw startupError(
        `wrangler dev: /healthz did not answer 200 within ${timeoutMs} ms (last: ${lastProblem})`,
        proc.output,
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
