import type { MiddlewareHandler } from "hono";
import { setBounded } from "../lib/bounded-cache.ts";
import { EngineError } from "../lib/errors.ts";
import { unwrap } from "../lib/result.ts";
import type { Principal, TokenRecord } from "../schemas/auth.ts";
import { accessPrincipal } from "./cloudflare-access.ts";
import { catalog } from "./service.ts";

/**
 * Who calls (docs/security.md, "Roles"): a verified Cloudflare Access identity
 * (src/cloudflare-access.ts) when the deployment uses Access and the request
 * carries its assertion; else the request's bearer token resolved to a
 * {@link Principal}, set as `c.var.principal`. A token of the secret
 * `API_TOKENS` is an admin; a token made by `POST /v1/tokens` (src/tokens.ts)
 * has the roles and workflows it was made with.
 */
export function bearerAuth(): MiddlewareHandler<{ Bindings: Env; Variables: { principal: Principal } }> {
  return async function bearerAuth(c, next) {
    const access = await accessPrincipal(c.env, c.req.raw);
    if (access !== null) {
      // An identity ACCESS_ROLES grants no role may still ask who it is (GET /v1/whoami); every other route refuses it.
      c.set("principal", access);
      await next();
      return;
    }
    const header = c.req.header("authorization");
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw EngineError.terminal("auth.missing_token", "send Authorization: Bearer <token>");
    }
    c.set("principal", await principalOfToken(c.env, match[1], Date.now()));
    await next();
  };
}

/** The name of the principal of every token of `API_TOKENS`. */
export const ENV_TOKEN_NAME = "API_TOKENS";

/** Who a Workers RPC caller is: a service binding of the deployment's own account, trusted as an admin. */
export const RPC_PRINCIPAL: Principal = {
  kind: "token",
  token_id: "rpc",
  name: "rpc",
  roles: ["admin"],
  workflows: null,
  created_by: "rpc",
};

/** The prefix of the secrets `POST /v1/tokens` makes: how a stored token is told from a configured one. */
export const TOKEN_PREFIX = "trl_";

/**
 * How long an isolate trusts a stored token it looked up: a token revoked
 * elsewhere stops working here within this long (docs/security.md,
 * "Revocation"). Expiry is checked on every request, cached or not.
 */
export const TOKEN_CACHE_MS = 10_000;
/** How many stored tokens one isolate keeps. */
const TOKEN_CACHE_LIMIT = 1_000;

/**
 * Stored tokens this isolate looked up, by the keyed hash of their secret,
 * with when each lookup stops being trusted. Module scope on purpose: an
 * isolate serves many requests, and the catalog is one object every request
 * would otherwise call. Only found tokens are kept, so a token just made is
 * never refused from cache. Exported for tests.
 */
export const TOKEN_CACHE = new Map<string, { record: TokenRecord; until: number }>();

/** The principal of a bearer token: 401 `auth.invalid_token` when it is none, `auth.token_expired` when expired. */
export async function principalOfToken(env: Env, token: string, now: number): Promise<Principal> {
  if (await isKnownToken(token, env.API_TOKENS ?? "")) {
    const createdBy = await principalOf(token, env.JOURNAL_SIGNING_KEY ?? "");
    const digest = createdBy.slice("token:".length);
    return {
      kind: "token",
      token_id: `env:${digest}`,
      name: ENV_TOKEN_NAME,
      roles: ["admin"],
      workflows: null,
      created_by: createdBy,
    };
  }
  const record = token.startsWith(TOKEN_PREFIX) ? await storedToken(env, token, now) : null;
  if (record === null) {
    throw EngineError.terminal("auth.invalid_token", "the bearer token is not valid");
  }
  if (record.expires_at !== null && Date.parse(record.expires_at) <= now) {
    throw EngineError.terminal("auth.token_expired", `the token "${record.name}" expired at ${record.expires_at}`);
  }
  const { token_id, name, roles, workflows } = record;
  return { kind: "token", token_id, name, roles, workflows, created_by: `token:${token_id}` };
}

/** The stored token a secret names: from this isolate's cache while trusted, else from the catalog. */
async function storedToken(env: Env, secret: string, now: number): Promise<TokenRecord | null> {
  const hash = await tokenHash(env, secret);
  const cached = TOKEN_CACHE.get(hash);
  if (cached !== undefined && cached.until > now) {
    return cached.record;
  }
  TOKEN_CACHE.delete(hash);
  const record = unwrap(await catalog(env).tokenByHash(hash));
  if (record !== null) {
    setBounded(TOKEN_CACHE, hash, { record, until: now + TOKEN_CACHE_MS }, TOKEN_CACHE_LIMIT);
  }
  return record;
}

/** Drops a revoked token from this isolate's cache at once (other isolates drop it within {@link TOKEN_CACHE_MS}). */
export function forgetToken(tokenId: string): void {
  for (const [hash, { record }] of TOKEN_CACHE) {
    if (record.token_id === tokenId) {
      TOKEN_CACHE.delete(hash);
    }
  }
}

/**
 * The keyed hash a stored token's secret is kept as: HMAC-SHA256, hex, with
 * a key derived (domain-separated) from `TOKEN_HASH_KEY` when set, else from
 * `JOURNAL_SIGNING_KEY`. Rotating the journal key without setting
 * `TOKEN_HASH_KEY` to the old key would orphan every stored token
 * (docs/security.md, "Key rotation").
 */
export async function tokenHash(env: Env, secret: string): Promise<string> {
  return hexOf(await hmac(`trellis.tokens.v1:${env.TOKEN_HASH_KEY ?? env.JOURNAL_SIGNING_KEY ?? ""}`, secret));
}

/** Hex digits of the keyed digest a principal shows: 64 bits, enough to tell tokens apart. */
const PRINCIPAL_DIGEST_HEX = 16;

/**
 * Who a token of `API_TOKENS` is in run records and journals (`created_by`):
 * `token:` and a keyed digest (HMAC-SHA256) of the token. Journals are meant
 * for third parties, so the name must tell nothing about the token: a plain
 * hash of a weak token could be brute-forced offline, a keyed one cannot
 * without the key. The key is derived from the journal signing key
 * (domain-separated), so the same token keeps the same name for as long as
 * that key is in use.
 */
export async function principalOf(token: string, signingKey: string): Promise<string> {
  const mac = await hmac(`trellis.principal.v1:${signingKey}`, token);
  return `token:${hexOf(mac).slice(0, PRINCIPAL_DIGEST_HEX)}`;
}

async function hmac(keyText: string, message: string): Promise<Uint8Array> {
  const encoder = new TextEncoder();
  const key = await crypto.subtle.importKey("raw", encoder.encode(keyText), { name: "HMAC", hash: "SHA-256" }, false, [
    "sign",
  ]);
  return new Uint8Array(await crypto.subtle.sign("HMAC", key, encoder.encode(message)));
}

function hexOf(bytes: Uint8Array): string {
  return [...bytes].map((byte) => byte.toString(16).padStart(2, "0")).join("");
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
