#!/usr/bin/env node
/**
 * `npm run dev`: serves the Trellis API on http://127.0.0.1:${PORT:-8787}.
 *
 * 1. Makes sure `.dev.vars` has the secrets the Worker needs, adding what is
 *    missing and keeping every existing line:
 *      API_TOKENS=dev-token                  (use `Authorization: Bearer dev-token`)
 *      JOURNAL_SIGNING_KEY=<base64 PKCS#8>   (a fresh Ed25519 key; never printed)
 * 2. Starts the local peers listed in `peers` below, which may hand vars to the
 *    Worker (passed as `--var KEY:VALUE`, on top of `.dev.vars`) and secrets
 *    (written to a temporary env file, mode 0600, loaded after `.dev.vars` with
 *    `--env-file`, so they never show on a command line). The shell server
 *    runs there: the Sandbox uses it in local mode (docs/containers.md) unless
 *    `--enable-containers` is passed, for a machine with Docker.
 * 3. Applies the run index's D1 migrations to the local database
 *    (`wrangler d1 migrations apply trellis-runs --local`; with
 *    `-- --persist-to <dir>`, to that directory's).
 * 4. Runs `wrangler dev --local --ip 127.0.0.1 --port $PORT` offline, remote
 *    bindings off (Workers AI and Vectorize are absent; see wrangler.toml)
 *    (CLOUDFLARE_CF_FETCH_ENABLED=false, WRANGLER_SEND_METRICS=false), with the
 *    terminal's stdio, forwarding SIGINT/SIGTERM/SIGHUP, and exits with its code
 *    after stopping the peers. Extra arguments go to wrangler:
 *    `npm run dev -- --log-level debug`.
 *
 * If this process dies without cleaning up, a watchdog ends wrangler and its
 * workerd processes; it also ends them after TRELLIS_DEV_MAX_HOURS (default 12).
 */
import { spawn } from "node:child_process";
import { generateKeyPairSync } from "node:crypto";
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { constants, tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { startShellServer } from "../containers/shell-server/server.mjs";
import { startLlmServer } from "./lib/llm-server.mjs";
import { startMcpPeer } from "./lib/mcp-peer.mjs";
import { applyLocalMigrations } from "./lib/d1-migrations.mjs";
import { offlineEnv, repoRoot, resolveNode, resolveWrangler, startWatchdog } from "./lib/wrangler-dev.mjs";

/**
 * @typedef {object} RunningPeer
 * @property {Record<string, string>} [vars]  bindings to give the Worker (non-secret: they go on wrangler's command line)
 * @property {Record<string, string>} [secrets]  bindings to give the Worker through a temporary env file
 * @property {() => Promise<void>} stop
 */
/**
 * @typedef {object} Peer
 * @property {string} name
 * @property {() => Promise<RunningPeer>} start  must bind 127.0.0.1 only
 */

/** Whether wrangler's arguments ask for real containers (Docker) instead of local mode. */
function wantsRealContainers(/** @type {string[]} */ args) {
  return args.some((arg) => arg === "--enable-containers" || arg === "--enable-containers=true");
}

/**
 * Local peers started before wrangler and stopped after it, in order (stopped in
 * reverse): the shell server (the container path in local mode), the local LLM
 * server and the MCP reference server.
 *
 * @type {Peer[]}
 */
export const peers = [
  {
    name: "shell server (containers in local mode)",
    start: async () => {
      if (wantsRealContainers(process.argv.slice(2))) return { stop: async () => {} };
      const shell = await startShellServer({ port: 0 });
      if (shell.isolation === "uid") keepStatePrivate();
      return {
        vars: { CONTAINER_MODE: "local", SHELL_SERVER_URL: shell.url },
        secrets: { SHELL_SERVER_TOKEN: shell.token },
        stop: shell.close,
      };
    },
  },
  {
    // The llm action's peer: `openai-compatible`, `openai` or `anthropic` models whose
    // base_url is LLM_SERVER_URL + "/v1" get deterministic answers (scripts/lib/llm-server.mjs).
    name: "local LLM server",
    start: async () => {
      const llm = await startLlmServer({ port: 0 });
      return { vars: { LLM_SERVER_URL: llm.url }, stop: llm.close };
    },
  },
  {
    // The mcp action's peer: the reference MCP server, endpoint MCP_SERVER_URL + "/mcp".
    name: "MCP reference server (server-everything)",
    start: async () => {
      const mcp = await startMcpPeer();
      return { vars: { MCP_SERVER_URL: mcp.url }, stop: mcp.close };
    },
  },
];

const DEV_VARS = join(repoRoot, ".dev.vars");

/**
 * With a uid per workspace (the shell server runs as root), commands run as
 * users that may read whatever is readable by all: wrangler's state
 * (`.wrangler/state`, world-readable SQLite files holding every Durable
 * Object, the Sandboxes' workspace tokens among them) and `.dev.vars` (the
 * journal signing key). Both are made private to this user.
 */
function keepStatePrivate() {
  const state = join(repoRoot, ".wrangler");
  mkdirSync(state, { recursive: true });
  chmodSync(state, 0o700);
  if (existsSync(DEV_VARS)) chmodSync(DEV_VARS, 0o600);
}

/**
 * Adds API_TOKENS and JOURNAL_SIGNING_KEY to `.dev.vars` when missing or empty.
 * @returns {string[]} what was done, for the user
 */
export function ensureDevVars(path = DEV_VARS) {
  const existed = existsSync(path);
  const text = existed ? readFileSync(path, "utf8") : "";
  const lines = text === "" ? [] : text.replace(/\r?\n$/, "").split(/\r?\n/);
  /** @type {Array<[string, () => string, string]>} */
  const wanted = [
    ["API_TOKENS", () => "dev-token", "API_TOKENS=dev-token (send `Authorization: Bearer dev-token`)"],
    [
      "JOURNAL_SIGNING_KEY",
      () => generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"),
      "JOURNAL_SIGNING_KEY (a fresh Ed25519 key, PKCS#8, base64; not shown)",
    ],
  ];
  const done = [];
  for (const [key, make, label] of wanted) {
    const re = new RegExp(`^\\s*(?:export\\s+)?${key}\\s*=(.*)$`);
    const index = lines.findIndex((l) => re.test(l));
    const current =
      index >= 0
        ? (re.exec(lines[index] ?? "")?.[1] ?? "")
            .trim()
            .replace(/^(['"])(.*)\1$/, "$2")
            .trim()
        : "";
    if (current !== "") continue;
    const line = `${key}=${make()}`;
    if (index >= 0) {
      lines[index] = line;
      done.push(`set ${label} (it was empty)`);
    } else {
      lines.push(line);
      done.push(`added ${label}`);
    }
  }
  if (done.length) writeFileSync(path, lines.join("\n") + "\n", { mode: 0o600 });
  return done.map((d) => `${existed ? ".dev.vars" : "created .dev.vars"}: ${d}`);
}

async function main() {
  const port = process.env.PORT || "8787";

  const did = ensureDevVars();
  if (did.length) for (const d of did) log(d);
  else log("using the secrets in .dev.vars");

  const persistTo = persistToOf(process.argv.slice(2));
  try {
    await applyLocalMigrations({ persistTo });
    log("applied the run index's migrations (migrations/) to the local D1 database");
  } catch (err) {
    log(`could not apply the run index's migrations:\n${/** @type {any} */ (err)?.output ?? err}`);
    process.exit(1);
  }

  const { vars, secrets, stopPeers } = await startPeers();
  const { envFiles, removeSecrets } = writePeerSecrets(secrets);
  process.on("exit", removeSecrets);
  const args = [
    resolveWrangler(),
    "dev",
    "--ip",
    "127.0.0.1",
    "--port",
    port,
    // Remote bindings off (Workers AI, Vectorize): offline, they would need a Cloudflare login.
    "--local",
    ...Object.entries(vars).flatMap(([k, v]) => ["--var", `${k}:${v}`]),
    ...envFiles.flatMap((file) => ["--env-file", file]),
    ...process.argv.slice(2),
  ];
  const { code, signal } = await runWrangler(args);
  await stopPeers();
  removeSecrets();
  process.exit(code ?? (signal ? 128 + (constants.signals[signal] ?? 1) : 1));
}

/**
 * The state directory wrangler's arguments name (`--persist-to <dir>` or `--persist-to=<dir>`), if any.
 * @param {string[]} args
 */
function persistToOf(args) {
  const index = args.findIndex((arg) => arg === "--persist-to" || arg.startsWith("--persist-to="));
  if (index < 0) return undefined;
  const arg = args[index] ?? "";
  return arg.includes("=") ? arg.slice(arg.indexOf("=") + 1) : args[index + 1];
}

/** @param {string} msg */
function log(msg) {
  process.stderr.write(`[dev] ${msg}\n`);
}

/**
 * Starts every peer, in order, and gathers the vars and secrets they give the
 * Worker; when one cannot start, stops those that did and exits.
 * @returns {Promise<{ vars: Record<string, string>, secrets: Record<string, string>, stopPeers: () => Promise<void> }>}
 */
async function startPeers() {
  /** @type {Array<{ name: string, running: RunningPeer }>} */
  const running = [];
  const stopPeers = async () => {
    while (running.length) {
      const { name, running: peer } = /** @type {{ name: string, running: RunningPeer }} */ (running.pop());
      await peer.stop().catch((err) => log(`stopping ${name}: ${err?.message ?? err}`));
    }
  };
  /** @type {Record<string, string>} */
  const vars = {};
  /** @type {Record<string, string>} */
  const secrets = {};
  for (const peer of peers) {
    try {
      const r = await peer.start();
      running.push({ name: peer.name, running: r });
      Object.assign(vars, r.vars ?? {});
      Object.assign(secrets, r.secrets ?? {});
      log(`started ${peer.name}`);
    } catch (err) {
      log(`could not start ${peer.name}: ${/** @type {any} */ (err)?.message ?? err}`);
      await stopPeers();
      process.exit(1);
    }
  }
  return { vars, secrets, stopPeers };
}

/**
 * Peer secrets go in a private env file loaded after .dev.vars (passing any
 * --env-file makes wrangler skip its default .dev.vars, so it is named too).
 * @param {Record<string, string>} secrets
 * @returns {{ envFiles: string[], removeSecrets: () => void }}
 */
function writePeerSecrets(secrets) {
  const secretDir = Object.keys(secrets).length > 0 ? mkdtempSync(join(tmpdir(), "trellis-dev-")) : undefined;
  const envFiles = [];
  if (secretDir) {
    const secretFile = join(secretDir, "peers.env");
    writeFileSync(
      secretFile,
      Object.entries(secrets)
        .map(([k, v]) => `${k}=${v}`)
        .join("\n") + "\n",
      { mode: 0o600 },
    );
    if (existsSync(DEV_VARS)) envFiles.push(DEV_VARS);
    envFiles.push(secretFile);
  }
  const removeSecrets = () => {
    if (secretDir) rmSync(secretDir, { recursive: true, force: true });
  };
  return { envFiles, removeSecrets };
}

/**
 * Runs wrangler with the terminal's stdio and a watchdog, forwarding
 * SIGINT/SIGTERM/SIGHUP to it, until it exits.
 * @param {string[]} args
 * @returns {Promise<{ code: number | null, signal: NodeJS.Signals | null }>}
 */
async function runWrangler(args) {
  const child = spawn(resolveNode(), args, { cwd: repoRoot, stdio: "inherit", env: offlineEnv() });
  const maxHours = Number(process.env.TRELLIS_DEV_MAX_HOURS) || 12;
  const watchdog = child.pid
    ? startWatchdog({ pid: child.pid, group: false, maxLifetimeMs: maxHours * 3_600_000 })
    : { dispose() {} };

  for (const sig of /** @type {NodeJS.Signals[]} */ (["SIGINT", "SIGTERM", "SIGHUP"])) {
    process.on(sig, () => {
      try {
        child.kill(sig);
      } catch {
        /* already gone */
      }
    });
  }

  /** @type {{ code: number | null, signal: NodeJS.Signals | null }} */
  const ended = await new Promise((resolve) => {
    child.once("exit", (c, s) => resolve({ code: c, signal: s }));
    child.once("error", (err) => {
      log(`could not start wrangler: ${err.message}`);
      resolve({ code: 1, signal: null });
    });
  });
  watchdog.dispose();
  return ended;
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  await main();
}
