import { existsSync, readFileSync } from "node:fs";
import { join } from "node:path";

/** Where the CLI talks to and as whom: flags, then `TRELLIS_URL`/`TRELLIS_TOKEN`, then the local dev server. */
export interface Target {
  url: string;
  token: string | undefined;
}

export const DEFAULT_URL = "http://127.0.0.1:8787";

/**
 * The target of a command. Without a token flag or `TRELLIS_TOKEN`, the first
 * of `API_TOKENS` in `./.dev.vars` (what `npm run dev` serves) is used, so a
 * command run in the repo against the local server needs no setup.
 */
export function resolveTarget(flags: { url?: string; token?: string }, env = process.env, cwd = process.cwd()): Target {
  const url = (flags.url ?? env.TRELLIS_URL ?? DEFAULT_URL).replace(/\/+$/, "");
  const token = flags.token ?? env.TRELLIS_TOKEN ?? devToken(cwd);
  return { url, token: token === "" ? undefined : token };
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
