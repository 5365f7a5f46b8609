/**
 * The run index's D1 migrations (migrations/, docs/architecture.md "The run
 * index"), applied to a local database before `wrangler dev` starts: by
 * `npm run dev` (wrangler's default state directory) and by every
 * `startWranglerDev` (the e2e suite, the benchmarks: their own state
 * directory). `npm run deploy` applies them to the remote database instead.
 *
 *   await applyLocalMigrations({ persistTo: "/tmp/state" });
 */
import { spawn } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";
import { offlineEnv, repoRoot, resolveNode, resolveWrangler } from "./toolchain.mjs";

/** The run index's database, as wrangler.toml names it. */
export const RUN_INDEX_DATABASE = "trellis-runs";

/**
 * Runs `wrangler d1 migrations apply trellis-runs --local` (offline, without
 * a prompt: its stdin is not a terminal) and resolves once every migration is
 * applied; rejects with wrangler's output when one fails. A project without a
 * `migrations/` folder (an older tree, for `npm run bench:ab`) has nothing to
 * apply.
 * @param {object} [options]
 * @param {string} [options.cwd]        the project directory (default: this repository)
 * @param {string} [options.config]     a wrangler config path
 * @param {string} [options.persistTo]  the local state directory (default: wrangler's, `.wrangler/state`)
 * @param {NodeJS.ProcessEnv} [options.env]  extra environment (e.g. WRANGLER_LOG_PATH)
 * @returns {Promise<{ applied: boolean, output: string }>}
 */
export function applyLocalMigrations({ cwd = repoRoot, config, persistTo, env = {} } = {}) {
  if (!existsSync(join(cwd, "migrations"))) return Promise.resolve({ applied: false, output: "" });
  const args = [
    resolveWrangler(cwd),
    "d1",
    "migrations",
    "apply",
    RUN_INDEX_DATABASE,
    "--local",
    ...(config ? ["--config", config] : []),
    ...(persistTo ? ["--persist-to", persistTo] : []),
  ];
  return new Promise((resolveRun, reject) => {
    const child = spawn(resolveNode(cwd), args, {
      cwd,
      stdio: ["ignore", "pipe", "pipe"],
      env: offlineEnv({ ...process.env, ...env, FORCE_COLOR: "0", NO_COLOR: "1" }),
    });
    let output = "";
    child.stdout.on("data", (chunk) => (output += chunk));
    child.stderr.on("data", (chunk) => (output += chunk));
    child.once("error", (err) => reject(Object.assign(err, { output })));
    child.once("exit", (code) => {
      if (code === 0) resolveRun({ applied: true, output });
      else
        reject(
          Object.assign(new Error(`wrangler d1 migrations apply ${RUN_INDEX_DATABASE} --local exited with ${code}`), {
            output,
          }),
        );
    });
  });
}
