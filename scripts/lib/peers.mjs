/**
 * The local peers a Trellis Worker talks to outside production, started
 * before `wrangler dev` and stopped after it: by `npm run dev` and by the
 * end-to-end suite (scripts/e2e.mjs), so both serve the same world and the
 * examples (examples/) run against either.
 *
 * Each peer binds 127.0.0.1 on a free port and hands the Worker:
 * - `vars`: bindings, non-secret (they go on wrangler's command line);
 * - `secrets`: bindings given through a private env file;
 * - `exposed`: the subset of `vars` that definitions may name as `$env:NAME`
 *   (listed in WORKFLOW_VARS; docs/definitions.md "Secrets"), e.g. a model's
 *   `base_url: $env:LLM_SERVER_URL/v1`.
 */
import { startShellServer } from "../../containers/shell-server/server.mjs";
import { startHttpTarget } from "./http-target.mjs";
import { startLlmServer } from "./llm-server.mjs";
import { startMcpPeer } from "./mcp-peer.mjs";

/** The secret the example webhook (examples/github-review.yaml) verifies deliveries with, locally. */
export const EXAMPLE_WEBHOOK_SECRET_NAME = "GITHUB_WEBHOOK_SECRET";
export const EXAMPLE_WEBHOOK_SECRET = "dev-webhook-secret";

/**
 * @typedef {object} RunningPeer
 * @property {Record<string, string>} [vars]  bindings to give the Worker (non-secret: they go on wrangler's command line)
 * @property {Record<string, string>} [secrets]  bindings to give the Worker through a temporary env file
 * @property {string[]} [exposed]  names of `vars` definitions may use as `$env:NAME`
 * @property {string} [isolation]  the shell server's isolation ("uid" when it runs commands as fresh users)
 * @property {() => Promise<void>} stop
 */
/**
 * @typedef {object} Peer
 * @property {string} name
 * @property {(options: { realContainers: boolean }) => Promise<RunningPeer>} start  must bind 127.0.0.1 only
 */

/** @type {Peer[]} */
export const peers = [
  {
    name: "shell server (containers in local mode)",
    start: async ({ realContainers }) => {
      if (realContainers) return { stop: async () => {} };
      const shell = await startShellServer({ port: 0 });
      return {
        vars: { CONTAINER_MODE: "local", SHELL_SERVER_URL: shell.url },
        secrets: { SHELL_SERVER_TOKEN: shell.token },
        stop: shell.close,
        isolation: shell.isolation,
      };
    },
  },
  {
    // The http action's peer: /echo, /users/:id, /flaky/:key, /status/:code… (scripts/lib/http-target.mjs).
    name: "HTTP target",
    start: async () => {
      const target = await startHttpTarget({ port: 0 });
      return { vars: { HTTP_TARGET_URL: target.url }, exposed: ["HTTP_TARGET_URL"], stop: target.close };
    },
  },
  {
    // The llm action's peer: `openai-compatible`, `openai` or `anthropic` models whose
    // base_url is LLM_SERVER_URL + "/v1" get deterministic answers (scripts/lib/llm-server.mjs).
    name: "local LLM server",
    start: async () => {
      const llm = await startLlmServer({ port: 0 });
      return { vars: { LLM_SERVER_URL: llm.url }, exposed: ["LLM_SERVER_URL"], stop: llm.close };
    },
  },
  {
    // The mcp action's peer: the reference MCP server, endpoint MCP_SERVER_URL + "/mcp".
    name: "MCP reference server (server-everything)",
    start: async () => {
      const mcp = await startMcpPeer();
      return { vars: { MCP_SERVER_URL: mcp.url }, exposed: ["MCP_SERVER_URL"], stop: mcp.close };
    },
  },
];

/**
 * Starts every peer, in order, and gathers what they give the Worker, with
 * WORKFLOW_VARS listing the exposed names. When one cannot start, stops those
 * that did and throws.
 * @param {{ realContainers?: boolean, log?: (message: string) => void }} [options]
 * @returns {Promise<{ vars: Record<string, string>, secrets: Record<string, string>, urls: Record<string, string>, shellIsolation: string | undefined, stop: () => Promise<void> }>}
 */
export async function startPeers({ realContainers = false, log = () => {} } = {}) {
  /** @type {Array<{ name: string, running: RunningPeer }>} */
  const running = [];
  const stop = async () => {
    while (running.length) {
      const { name, running: peer } = /** @type {{ name: string, running: RunningPeer }} */ (running.pop());
      await peer.stop().catch((err) => log(`stopping ${name}: ${err?.message ?? err}`));
    }
  };
  /** @type {Record<string, string>} */
  const vars = {};
  /** @type {Record<string, string>} */
  const secrets = {};
  /** @type {Record<string, string>} */
  const urls = {};
  /** @type {string | undefined} */
  let shellIsolation;
  for (const peer of peers) {
    try {
      const started = await peer.start({ realContainers });
      running.push({ name: peer.name, running: started });
      Object.assign(vars, started.vars ?? {});
      Object.assign(secrets, started.secrets ?? {});
      for (const name of started.exposed ?? []) urls[name] = started.vars?.[name] ?? "";
      shellIsolation ??= started.isolation;
      log(`started ${peer.name}`);
    } catch (err) {
      await stop();
      throw new Error(`could not start ${peer.name}: ${/** @type {any} */ (err)?.message ?? err}`);
    }
  }
  vars.WORKFLOW_VARS = Object.keys(urls).join(",");
  // The webhook secret of examples/github-review.yaml, fixed so its signed test delivery works as written.
  secrets[EXAMPLE_WEBHOOK_SECRET_NAME] = EXAMPLE_WEBHOOK_SECRET;
  vars.WORKFLOW_SECRETS = EXAMPLE_WEBHOOK_SECRET_NAME;
  return { vars, secrets, urls, shellIsolation, stop };
}
