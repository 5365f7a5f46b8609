import { env } from "cloudflare:workers";
import { exportJWK, generateKeyPair, SignJWT, type CryptoKey, type JWK } from "jose";
import { httpTarget, uniqueId } from "./helpers.ts";

/**
 * A Cloudflare Access team for tests: keys made here, their key set served by
 * the local HTTP target (standing in for `/cdn-cgi/access/certs`), and
 * assertions signed as Access signs them.
 */

export const TEAM = "trellis-test.cloudflareaccess.com";
export const ISSUER = `https://${TEAM}`;
export const AUD = "4714c1358e65fe4b408ad6d432a5f878f08194bdb4752441fd56faefa9b2b6f2";
export const ROLES = JSON.stringify({
  emails: { "Ops@Example.com": ["approver", "reader"] },
  groups: { eng: ["reader", "runner", "approver"] },
});

export interface TestKey {
  kid: string;
  privateKey: CryptoKey;
  jwk: JWK;
}

export async function makeKey(kid: string): Promise<TestKey> {
  const { privateKey, publicKey } = await generateKeyPair("RS256", { extractable: true });
  return { kid, privateKey, jwk: { ...(await exportJWK(publicKey)), kid, alg: "RS256", use: "sig" } };
}

/** Serves `keys` as a JWKS at a URL of the HTTP target (a fresh one unless named); returns the URL. */
export async function serveKeys(keys: readonly TestKey[], name = uniqueId("certs")): Promise<string> {
  const url = `${httpTarget()}/document/${name}`;
  const put = await fetch(url, { method: "PUT", body: JSON.stringify({ keys: keys.map((key) => key.jwk) }) });
  if (put.status !== 204) {
    throw new Error(`the HTTP target refused the key set: ${put.status}`);
  }
  return url;
}

/** The Worker's env with Access on, its key set at `certsUrl`. */
export function accessEnv(certsUrl: string, extra: Partial<Env> = {}): Env {
  return {
    ...env,
    ACCESS_TEAM_DOMAIN: TEAM,
    ACCESS_AUD: AUD,
    ACCESS_ROLES: ROLES,
    ACCESS_CERTS_URL: certsUrl,
    ...extra,
  };
}

/** An Access assertion for ops@example.com (or `claims`), signed by `key`. */
export async function assertion(
  key: TestKey,
  claims: Record<string, unknown> = {},
  options: { audience?: string; expiresAt?: number; kid?: string } = {},
): Promise<string> {
  const now = Math.floor(Date.now() / 1000);
  return new SignJWT({ email: "ops@example.com", type: "app", ...claims })
    .setProtectedHeader({ alg: "RS256", kid: options.kid ?? key.kid })
    .setIssuer(ISSUER)
    .setAudience([options.audience ?? AUD])
    .setIssuedAt(now - 60)
    .setExpirationTime(options.expiresAt ?? now + 300)
    .sign(key.privateKey);
}
