import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { CliError } from "./api.ts";

/**
 * Where the CLI talks to and as whom: flags, then `TRELLIS_URL`/`TRELLIS_TOKEN`,
 * then the local dev server (on `PORT` when set, as `npm run dev` serves it).
 */
export interface Target {
  url: string;
  token: string | undefined;
}

/** The port `npm run dev` serves on without `PORT`. */
export const DEFAULT_PORT = 8787;

/**
 * The target of a command. The URL is `--url`, else `TRELLIS_URL`, else
 * `http://127.0.0.1:$PORT` (port 8787 without `PORT`), the server `npm run dev`
 * starts. A URL ending in `/v1` is taken without it: every path the CLI sends
 * starts with `/v1` already. Without a token flag or `TRELLIS_TOKEN`, the first
 * of `API_TOKENS` in `./.dev.vars` (what `npm run dev` serves) is used, so a
 * command run in the repo against the local server needs no setup.
 */
export function resolveTarget(flags: { url?: string; token?: string }, env = process.env, cwd = process.cwd()): Target {
  const url = (flags.url ?? env.TRELLIS_URL ?? devUrl(env.PORT)).replace(/(\/v1)?\/*$/, "");
  const token = flags.token ?? env.TRELLIS_TOKEN ?? devToken(cwd);
  return { url, token: token === "" ? undefined : token };
}

/** The local dev server's URL: on `PORT` when it is set, as `scripts/dev.mjs` reads it. */
function devUrl(port: string | undefined): string {
  if (port === undefined || port === "") {
    return `http://127.0.0.1:${DEFAULT_PORT}`;
  }
  const number = Number(port);
  if (!/^\d+$/.test(port) || number < 1 || number > 65535) {
    throw new CliError("cli.invalid_port", `PORT is "${port}", not a port number (1–65535); or set TRELLIS_URL`);
  }
  return `http://127.0.0.1:${number}`;
}

function devToken(cwd: string): string | undefined {
  const path = join(cwd, ".dev.vars");
  if (!existsSync(path)) {
    return undefined;
  }
  const line = readFileSync(path, "utf8")
    .split(/\r?\n/)
    .find((text) => text.startsWith("API_TOKENS="));
  const value = line?.slice("API_TOKENS=".length).replace(/^["']|["']$/g, "");
  return value
    ?.split(",")
    .map((token) => token.trim())
    .find((token) => token !== "");
}
