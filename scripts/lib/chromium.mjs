/**
 * Finds headless Chromium for the browser suite (test/e2e/console.test.mjs),
 * installing Debian's `chromium` package when it is missing and this process
 * may (root, with apt-get): CI runs `.ci/run` as root on a fresh machine.
 *
 *   const path = await ensureChromium();   // e.g. /usr/bin/chromium
 *
 * `TRELLIS_CHROMIUM` names another binary. playwright-core drives it over the
 * DevTools protocol; no browser is downloaded from anywhere else.
 */
import { spawn } from "node:child_process";
import { accessSync, constants } from "node:fs";

const CANDIDATES = ["/usr/bin/chromium", "/usr/bin/chromium-browser", "/usr/bin/google-chrome"];

/** The first executable Chromium, or null. */
export function findChromium() {
  const named = process.env.TRELLIS_CHROMIUM;
  for (const path of named ? [named] : CANDIDATES) {
    try {
      accessSync(path, constants.X_OK);
      return path;
    } catch {
      /* not there */
    }
  }
  return null;
}

/**
 * The Chromium binary, installed with apt-get first when missing (root only).
 * @param {(line: string) => void} [log]
 * @returns {Promise<string>}
 */
export async function ensureChromium(log = (line) => process.stderr.write(`[chromium] ${line}\n`)) {
  const found = findChromium();
  if (found) return found;
  if (process.getuid?.() !== 0) {
    throw new Error(
      "Chromium is missing: install Debian's package (`sudo apt-get install -y chromium`) or set TRELLIS_CHROMIUM",
    );
  }
  log("installing Debian's chromium package (apt-get) for the browser suite");
  const env = { ...process.env, DEBIAN_FRONTEND: "noninteractive" };
  await run("apt-get", ["update", "-qq"], env);
  await run("apt-get", ["install", "-y", "-qq", "--no-install-recommends", "chromium"], env);
  const installed = findChromium();
  if (!installed) throw new Error("apt-get installed chromium, but no chromium binary was found");
  return installed;
}

/**
 * @param {string} cmd
 * @param {string[]} args
 * @param {NodeJS.ProcessEnv} env
 * @returns {Promise<void>}
 */
function run(cmd, args, env) {
  return new Promise((resolve, reject) => {
    // apt-get's output goes to stderr: stdout carries the test report.
    const child = spawn(cmd, args, { stdio: ["ignore", 2, 2], env });
    child.once("error", reject);
    child.once("exit", (code) =>
      code === 0 ? resolve() : reject(new Error(`${cmd} ${args.join(" ")} exited with ${code}`)),
    );
  });
}
