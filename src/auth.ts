import type { MiddlewareHandler } from "hono";
import { EngineError } from "../lib/errors.ts";

/**
 * Bearer authentication against the comma-separated secret `API_TOKENS`.
 * Tokens are compared by their SHA-256 digests with `timingSafeEqual`, so the
 * comparison takes the same time whatever the token.
 */
export function bearerAuth(): MiddlewareHandler<{ Bindings: Env; Variables: { principal: string } }> {
  return async function bearerAuth(c, next) {
    const header = c.req.header("authorization");
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw EngineError.terminal("auth.missing_token", "send Authorization: Bearer <token>");
    }
    const digestHex = await isKnownToken(match[1], c.env.API_TOKENS ?? "");
    if (digestHex === null) {
      throw EngineError.terminal("auth.invalid_token", "the bearer token is not valid");
    }
    // Runs record who started them without ever recording the token itself.
    c.set("principal", `token:${digestHex.slice(0, 8)}`);
    await next();
  };
}

/** The hex SHA-256 of the token when it is one of the configured tokens, else null. */
async function isKnownToken(token: string, configured: string): Promise<string | null> {
  const given = await digest(token);
  let known = false;
  for (const candidate of configured.split(",").map((value) => value.trim()).filter((value) => value.length > 0)) {
    if (crypto.subtle.timingSafeEqual(given, await digest(candidate))) {
      known = true;
    }
  }
  return known ? [...new Uint8Array(given)].map((byte) => byte.toString(16).padStart(2, "0")).join("") : null;
}

async function digest(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
}
