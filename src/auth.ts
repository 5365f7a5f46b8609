import type { MiddlewareHandler } from "hono";
import { EngineError } from "../lib/errors.ts";

/**
 * Bearer authentication against the comma-separated secret `API_TOKENS`.
 * Tokens are compared by their SHA-256 digests with `timingSafeEqual`, so the
 * comparison takes the same time whatever the token.
 */
export function bearerAuth(): MiddlewareHandler<{ Bindings: Env }> {
  return async function bearerAuth(c, next) {
    const header = c.req.header("authorization");
    const match = header ? /^Bearer\s+(\S+)\s*$/i.exec(header) : null;
    if (!match?.[1]) {
      throw EngineError.terminal("auth.missing_token", "send Authorization: Bearer <token>");
    }
    if (!(await isKnownToken(match[1], c.env.API_TOKENS ?? ""))) {
      throw EngineError.terminal("auth.invalid_token", "the bearer token is not valid");
    }
    await next();
  };
}

async function isKnownToken(token: string, configured: string): Promise<boolean> {
  const given = await digest(token);
  let known = false;
  for (const candidate of configured.split(",").map((value) => value.trim()).filter((value) => value.length > 0)) {
    if (crypto.subtle.timingSafeEqual(given, await digest(candidate))) {
      known = true;
    }
  }
  return known;
}

async function digest(text: string): Promise<ArrayBuffer> {
  return crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
}
