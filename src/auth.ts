import type { MiddlewareHandler } from "hono";
import { EngineError } from "../lib/errors.ts";
import type { Principal } from "../schemas/auth.ts";
import { accessPrincipal } from "./cloudflare-access.ts";

/**
 * Who calls: a verified Cloudflare Access identity (src/access.ts) when the
 * deployment uses Access and the request carries its assertion, else a bearer
 * token of the comma-separated secret `API_TOKENS` (every one an admin).
 * Tokens are compared by their SHA-256 digests with `timingSafeEqual`, so the
 * comparison takes the same time whatever the token.
 */
export function bearerAuth(): MiddlewareHandler<{ Bindings: Env; Variables: { principal: Principal } }> {
  return async function bearerAuth(c, next) {
    const access = await accessPrincipal(c.env, c.req.raw);
    if (access !== null) {
      if (access.roles.length === 0) {
        throw EngineError.terminal("auth.forbidden", `${access.created_by} has no role: ACCESS_ROLES grants it none`);
      }
      c.set("principal", access);
      await next();
      return;
    }
    const header = c.req.header("authorization");
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw EngineError.terminal("auth.missing_token", "send Authorization: Bearer <token>");
    }
    if (!(await isKnownToken(match[1], c.env.API_TOKENS ?? ""))) {
      throw EngineError.terminal("auth.invalid_token", "the bearer token is not valid");
    }
    const createdBy = await principalOf(match[1], c.env.JOURNAL_SIGNING_KEY ?? "");
    c.set("principal", {
      kind: "token",
      token_id: `env:${createdBy.slice("token:".length)}`,
      name: "API_TOKENS",
      roles: ["admin"],
      workflows: null,
      created_by: createdBy,
    });
    await next();
  };
}

/** Hex digits of the keyed digest a principal shows: 64 bits, enough to tell tokens apart. */
const PRINCIPAL_DIGEST_HEX = 16;

/**
 * Who a token is in run records and journals (`created_by`): `token:` and a
 * keyed digest (HMAC-SHA256) of the token. Journals are meant for third
 * parties, so the name must tell nothing about the token: a plain hash of a
 * weak token could be brute-forced offline, a keyed one cannot without the
 * key. The key is derived from the journal signing key (domain-separated),
 * so the same token keeps the same name for as long as that key is in use.
 */
export async function principalOf(token: string, signingKey: string): Promise<string> {
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey(
    "raw",
    encoder.encode(`trellis.principal.v1:${signingKey}`),
    { name: "HMAC", hash: "SHA-256" },
    false,
    ["sign"],
  );
  const mac = new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(token)));
  return `token:${[...mac]
    .map((byte) => byte.toString(16).padStart(2, "0"))
    .join("")
    .slice(0, PRINCIPAL_DIGEST_HEX)}`;
}

/** Whether the token is one of the configured tokens. */
async function isKnownToken(token: string, configured: string): Promise<boolean> {
  const given = await digest(token);
  let known = false;
  for (const candidate of configured
    .split(",")
    .map((value) => value.trim())
    .filter((value) => value.length > 0)) {
    if (crypto.subtle.timingSafeEqual(given, await digest(candidate))) {
      known = true;
    }
  }
  return known;
}

async function digest(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
}
