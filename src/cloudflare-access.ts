import { createRemoteJWKSet, errors, jwtVerify, type JWTVerifyGetKey } from "jose";
import { EngineError } from "../lib/errors.ts";
import { AccessClaims, AccessRoles } from "../schemas/access.ts";
import type { Principal, Role } from "../schemas/auth.ts";

/**
 * Cloudflare Access (docs/security.md, "Cloudflare Access"): when the
 * deployment sets `ACCESS_TEAM_DOMAIN` and `ACCESS_AUD`, a request that carries
 * `Cf-Access-Jwt-Assertion` is verified (RS256 signature against the team's
 * published key set, issuer, audience, expiry) with `jose`, and its email and
 * groups are mapped to roles through `ACCESS_ROLES`.
 */

/** The header Access adds to every request it lets through to the origin. */
export const ACCESS_ASSERTION_HEADER = "cf-access-jwt-assertion";
/** How long a fetched key set is used before it is fetched again (Access rotates keys every 6 weeks). */
export const ACCESS_KEYS_MAX_AGE_MS = 10 * 60_000;
/** An assertion signed by a key the cached set lacks refetches the set, at most once per this many ms. */
export const ACCESS_KEYS_COOLDOWN_MS = 30_000;
/** How long a fetch of the key set may take before the request is answered 503. */
const ACCESS_KEYS_TIMEOUT_MS = 5_000;
/** The most key sets (team certificate URLs) one isolate keeps: one per deployment in practice. */
const MAX_KEY_SETS = 4;

/** Key sets by certificate URL, each a `jose` remote key set that caches and refetches on its own. */
export interface AccessKeySets {
  get(certsUrl: string): JWTVerifyGetKey;
}

/**
 * A bounded cache of remote key sets. The cache is per isolate on purpose:
 * the team's public keys are the same for every request, and fetching them
 * on each request would put Cloudflare's certificate endpoint on every call.
 */
export function createAccessKeySets(options: { maxAgeMs?: number; cooldownMs?: number } = {}): AccessKeySets {
  const sets = new Map<string, JWTVerifyGetKey>();
  return {
    get(certsUrl) {
      const known = sets.get(certsUrl);
      if (known) {
        return known;
      }
      const created = createRemoteJWKSet(new URL(certsUrl), {
        cacheMaxAge: options.maxAgeMs ?? ACCESS_KEYS_MAX_AGE_MS,
        cooldownDuration: options.cooldownMs ?? ACCESS_KEYS_COOLDOWN_MS,
        timeoutDuration: ACCESS_KEYS_TIMEOUT_MS,
      });
      if (sets.size >= MAX_KEY_SETS) {
        sets.delete(sets.keys().next().value ?? "");
      }
      sets.set(certsUrl, created);
      return created;
    },
  };
}

// Public keys only, bounded to MAX_KEY_SETS entries: module scope is shared by the isolate's requests, which is the point.
const ISOLATE_KEY_SETS = createAccessKeySets();

/** The Access settings of a deployment, or null when Access is not configured. */
export interface AccessConfig {
  issuer: string;
  audience: string;
  certsUrl: string;
  roles: AccessRoles;
}

/**
 * The Access principal of a request: null when Access is not configured or the
 * request carries no assertion; a 401 (`auth.invalid_access_token`) when the
 * assertion does not verify; a 503 (`auth.access_unavailable`) when the key
 * set cannot be fetched.
 */
export async function accessPrincipal(
  env: Env,
  request: Request,
  keySets: AccessKeySets = ISOLATE_KEY_SETS,
): Promise<Principal | null> {
  const config = accessConfig(env);
  const assertion = request.headers.get(ACCESS_ASSERTION_HEADER);
  if (config === null || assertion === null) {
    return null;
  }
  const claims = await verifyAssertion(assertion, config, keySets);
  const email = claims.email.toLowerCase();
  const groups = claims.groups ?? claims.custom?.groups ?? [];
  return {
    kind: "access",
    email,
    groups,
    roles: rolesOf(config.roles, email, groups),
    workflows: null,
    created_by: `access:${email}`,
  };
}

/** The deployment's Access settings (`ACCESS_TEAM_DOMAIN`, `ACCESS_AUD`, `ACCESS_ROLES`, `ACCESS_CERTS_URL`). */
export function accessConfig(env: Env): AccessConfig | null {
  const team = env.ACCESS_TEAM_DOMAIN?.trim();
  const audience = env.ACCESS_AUD?.trim();
  if (!team || !audience) {
    return null;
  }
  const issuer = `https://${team.replace(/^https:\/\//, "").replace(/\/+$/, "")}`;
  return {
    issuer,
    audience,
    certsUrl: env.ACCESS_CERTS_URL?.trim() || `${issuer}/cdn-cgi/access/certs`,
    roles: parseAccessRoles(env.ACCESS_ROLES),
  };
}

/** `ACCESS_ROLES` parsed; a malformed value is the operator's error (500 `access.bad_config`), never a silent default. */
export function parseAccessRoles(raw: string | undefined): AccessRoles {
  if (raw === undefined || raw.trim() === "") {
    return {};
  }
  let value: unknown;
  try {
    value = JSON.parse(raw);
  } catch {
    throw EngineError.terminal("access.bad_config", "ACCESS_ROLES is not JSON");
  }
  const parsed = AccessRoles.safeParse(value);
  if (!parsed.success) {
    const problems = parsed.error.issues.map((issue) => ({ path: issue.path.join("."), message: issue.message }));
    throw EngineError.terminal("access.bad_config", "ACCESS_ROLES does not match its schema", problems);
  }
  return parsed.data;
}

/** The roles an identity gets: `default`, its email's, and each of its groups', without repeats. */
export function rolesOf(config: AccessRoles, email: string, groups: readonly string[]): Role[] {
  const byEmail = Object.entries(config.emails ?? {}).find(([name]) => name.toLowerCase() === email);
  const byGroup = groups.flatMap((group) =>
    Object.hasOwn(config.groups ?? {}, group) ? (config.groups?.[group] ?? []) : [],
  );
  return [...new Set([...(config.default ?? []), ...(byEmail?.[1] ?? []), ...byGroup])];
}

async function verifyAssertion(assertion: string, config: AccessConfig, keySets: AccessKeySets): Promise<AccessClaims> {
  let payload: unknown;
  try {
    ({ payload } = await jwtVerify(assertion, keySets.get(config.certsUrl), {
      issuer: config.issuer,
      audience: config.audience,
      algorithms: ["RS256"],
      requiredClaims: ["exp"],
    }));
  } catch (error) {
    throw toAccessError(error);
  }
  const claims = AccessClaims.safeParse(payload);
  if (!claims.success) {
    // A service token's assertion names a `common_name`, not a person: it has no email to map.
    throw EngineError.terminal("auth.invalid_access_token", "the Access token names no email");
  }
  return claims.data;
}

/**
 * What `jose` throws when the key set cannot be had (a network error, a
 * timeout, a status other than 200, a body that is not a key set): none says
 * anything of the token.
 */
const KEY_SET_UNAVAILABLE = new Set(["ERR_JOSE_GENERIC", "ERR_JWKS_TIMEOUT", "ERR_JWKS_INVALID"]);

/** Why an assertion was refused, as an engine error (its reason, never the token). */
function toAccessError(error: unknown): EngineError {
  if (!(error instanceof errors.JOSEError) || KEY_SET_UNAVAILABLE.has(error.code)) {
    const message = error instanceof Error ? error.message : String(error);
    return new EngineError("auth.access_unavailable", `the Access key set cannot be fetched: ${message}`, {
      retryable: true,
    });
  }
  const reasons: Record<string, string> = {
    ERR_JWT_EXPIRED: "the Access token has expired",
    ERR_JWKS_NO_MATCHING_KEY: "the Access token is signed by a key the team does not publish",
    ERR_JWS_SIGNATURE_VERIFICATION_FAILED: "the Access token's signature does not verify",
  };
  const claim = error instanceof errors.JWTClaimValidationFailed ? `: ${error.claim} ${error.reason}` : "";
  const message = reasons[error.code] ?? `the Access token is not valid${claim}`;
  return EngineError.terminal("auth.invalid_access_token", message);
}
