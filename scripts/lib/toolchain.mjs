/**
 * Where the local tools are and how they run offline: the repository root, a
 * Node that can run wrangler, wrangler's entry script, wrangler's offline
 * environment, and a free port on 127.0.0.1. Shared by scripts/lib/wrangler-dev.mjs
 * (which re-exports them), the scripts and the end-to-end suite.
 */
import { existsSync } from "node:fs";
import { createServer } from "node:net";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** The repository root (this file is scripts/lib/toolchain.mjs). */
export const repoRoot = resolve(dirname(fileURLToPath(import.meta.url)), "..", "..");

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
