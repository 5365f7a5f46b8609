import { EngineError } from "../lib/errors.ts";
import { unwrap } from "../lib/result.ts";
import { parseOrThrow } from "../lib/validation.ts";
import { CreateTokenBody, type CreatedToken, type Principal, type TokenList } from "../schemas/auth.ts";
import { forgetToken, TOKEN_PREFIX, tokenHash } from "./auth.ts";
import { catalog } from "./service.ts";

/** Random bytes of a token's secret: 256 bits. */
const SECRET_BYTES = 32;

/**
 * `POST /v1/tokens` (admin): a token with roles, optionally limited to
 * workflows and expiring. Its secret (`trl_` and 256 random bits, base64url)
 * is in this answer only; the catalog keeps its keyed hash (src/auth.ts `tokenHash`).
 */
export async function createToken(env: Env, body: unknown, by: Principal, now = Date.now()): Promise<CreatedToken> {
  const request = parseOrThrow(CreateTokenBody, body, "token.invalid_request", "the token request");
  const expiresAt = request.expires_at ?? null;
  if (expiresAt !== null && Date.parse(expiresAt) <= now) {
    const details = [{ path: "expires_at", message: "must be in the future", code: "token.invalid_request" }];
    throw EngineError.terminal("token.invalid_request", "the token request is invalid: expires_at is past", details);
  }
  const secret = `${TOKEN_PREFIX}${base64url(crypto.getRandomValues(new Uint8Array(SECRET_BYTES)))}`;
  const view = {
    token_id: `tok_${crypto.randomUUID().replaceAll("-", "").slice(0, 20)}`,
    name: request.name,
    roles: request.roles,
    workflows: request.workflows ?? null,
    expires_at: expiresAt === null ? null : new Date(Date.parse(expiresAt)).toISOString(),
  };
  const record = { ...view, created_at: new Date(now).toISOString(), created_by: by.created_by };
  unwrap(await catalog(env).createToken({ ...record, hash: await tokenHash(env, secret) }));
  return { ...view, token: secret };
}

/** `GET /v1/tokens`: every stored token, newest first; never a secret nor its hash. */
export async function listTokens(env: Env): Promise<TokenList> {
  return unwrap(await catalog(env).listTokens());
}

/** `DELETE /v1/tokens/{token_id}`: refused in this isolate at once, everywhere within TOKEN_CACHE_MS. */
export async function revokeToken(env: Env, tokenId: string): Promise<{ token_id: string; revoked: true }> {
  unwrap(await catalog(env).revokeToken(tokenId));
  forgetToken(tokenId);
  return { token_id: tokenId, revoked: true };
}

function base64url(bytes: Uint8Array): string {
  return btoa(String.fromCharCode(...bytes))
    .replaceAll("+", "-")
    .replaceAll("/", "_")
    .replace(/=+$/, "");
}
