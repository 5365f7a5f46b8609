/**
 * Trellis's local state for the peer benchmark, made before its `wrangler dev` starts: the
 * run index's D1 migrations applied to the state directory, as `npm run dev` and
 * `npm run bench` do (scripts/lib/d1-migrations.mjs). Without them the index has no table:
 * every run's index write fails and is retried by the run's alarm with backoff, each retry
 * logged, which loads the engine while it is measured.
 *
 *   await prepareTrellisState({ trellisDir, stateDir, logDir });
 */
import { applyLocalMigrations } from "../lib/d1-migrations.mjs";

/**
 * Applies the migrations of the Trellis checkout `trellisDir` (a tree without a
 * `migrations/` folder has none) to `stateDir`, the directory its `wrangler dev` gets as
 * `--persist-to`; wrangler's logs go to `logDir`. Rejects with wrangler's output when a
 * migration fails.
 * @param {{ trellisDir: string, stateDir: string, logDir: string }} options
 * @returns {Promise<{ applied: boolean }>}
 */
export async function prepareTrellisState({ trellisDir, stateDir, logDir }) {
  const { applied } = await applyLocalMigrations({
    cwd: trellisDir,
    persistTo: stateDir,
    env: { WRANGLER_LOG_PATH: logDir },
  });
  return { applied };
}
