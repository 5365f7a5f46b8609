import { SignJWT } from "jose";
import { beforeAll, describe, it } from "vitest";
import { accessPrincipal, createAccessKeySets, parseAccessRoles } from "../../src/cloudflare-access.ts";
import { createApp } from "../../src/app.ts";
import { AUD, accessEnv, assertion, makeKey, serveKeys, type TestKey } from "./access-keys.ts";
import { httpTarget, uniqueId } from "./helpers.ts";

/**
 * Cloudflare Access assertions, verified against a key set the tests make and
 * serve from the local HTTP target (standing in for the team's
 * `/cdn-cgi/access/certs`).
 */

function requestWith(token: string | null): Request {
  const headers: Record<string, string> = token === null ? {} : { "cf-access-jwt-assertion": token };
  return new Request("http://trellis.test/v1/workflows", { headers });
}

/** The engine error code an Access check throws, or "ok". */
async function codeOf(call: Promise<unknown>): Promise<string> {
  try {
    await call;
    return "ok";
  } catch (error) {
    return (error as { code?: string }).code ?? String(error);
  }
}

describe("Cloudflare Access assertions", () => {
  let key: TestKey;
  let other: TestKey;
  let certsUrl: string;
  beforeAll(async () => {
    [key, other] = await Promise.all([makeKey("team-key-1"), makeKey("team-key-2")]);
    certsUrl = await serveKeys([key]);
  });

  it("maps a valid assertion's email and groups to an access principal and its roles", async ({ expect }) => {
    const token = await assertion(key, { email: "Ops@example.com", groups: ["eng", "sales"] });
    const principal = await accessPrincipal(accessEnv(certsUrl), requestWith(token), createAccessKeySets());
    expect(principal).toEqual({
      kind: "access",
      email: "ops@example.com",
      groups: ["eng", "sales"],
      roles: ["approver", "reader", "runner"],
      workflows: null,
      created_by: "access:ops@example.com",
    });
    const viaCustom = await assertion(key, { email: "dev@example.com", custom: { groups: ["eng"] } });
    const dev = await accessPrincipal(accessEnv(certsUrl), requestWith(viaCustom), createAccessKeySets());
    expect(dev).toMatchObject({ email: "dev@example.com", groups: ["eng"], roles: ["reader", "runner", "approver"] });
  });

  it("refuses a wrong audience, an expired token, a bad signature and a key the team does not publish", async ({
    expect,
  }) => {
    const keySets = createAccessKeySets();
    const cases = {
      audience: await assertion(key, {}, { audience: "another-application" }),
      expired: await assertion(key, {}, { expiresAt: Math.floor(Date.now() / 1000) - 10 }),
      // Signed by another key under the published key's id: the signature does not verify.
      signature: await assertion(other, {}, { kid: key.kid }),
      unknown: await assertion(other),
      issuer: await new SignJWT({ email: "ops@example.com" })
        .setProtectedHeader({ alg: "RS256", kid: key.kid })
        .setIssuer("https://elsewhere.cloudflareaccess.com")
        .setAudience(AUD)
        .setExpirationTime("5m")
        .sign(key.privateKey),
      garbage: "not.a.jwt",
    };
    const messages: Record<string, string> = {};
    for (const [name, token] of Object.entries(cases)) {
      try {
        await accessPrincipal(accessEnv(certsUrl), requestWith(token), keySets);
        messages[name] = "accepted";
      } catch (error) {
        const { code, message } = error as { code: string; message: string };
        messages[name] = `${code}: ${message}`;
      }
    }
    expect(messages).toEqual({
      audience: "auth.invalid_access_token: the Access token is not valid: aud check_failed",
      expired: "auth.invalid_access_token: the Access token has expired",
      signature: "auth.invalid_access_token: the Access token's signature does not verify",
      unknown: "auth.invalid_access_token: the Access token is signed by a key the team does not publish",
      issuer: "auth.invalid_access_token: the Access token is not valid: iss check_failed",
      garbage: expect.stringMatching(/^auth\.invalid_access_token: /),
    });
  });

  it("caches the key set, and fetches it again when a token names a key it lacks", async ({ expect }) => {
    const name = uniqueId("rotating");
    const url = await serveKeys([key], name);
    const hits = async (): Promise<number> =>
      (
        (await (await fetch(`${httpTarget()}/hits/${encodeURIComponent(`path:/document/${name}`)}`)).json()) as {
          count: number;
        }
      ).count;
    const keySets = createAccessKeySets({ cooldownMs: 0 });
    const put = await hits();
    for (let i = 0; i < 3; i += 1) {
      await accessPrincipal(accessEnv(url), requestWith(await assertion(key)), keySets);
    }
    expect(await hits()).toBe(put + 1);
    // The team rotates: the published set gains a key; a token signed by it fetches the set once more.
    await serveKeys([key, other], name);
    const rotated = await accessPrincipal(accessEnv(url), requestWith(await assertion(other)), keySets);
    expect(rotated).toMatchObject({ kind: "access", email: "ops@example.com" });
    expect(await hits()).toBe(put + 3);
  });

  it("is off without ACCESS_TEAM_DOMAIN and ACCESS_AUD, and null for a request without an assertion", async ({
    expect,
  }) => {
    const token = await assertion(key);
    const off = { ...accessEnv(certsUrl), ACCESS_AUD: undefined };
    expect(await accessPrincipal(off, requestWith(token), createAccessKeySets())).toBeNull();
    expect(await accessPrincipal(accessEnv(certsUrl), requestWith(null), createAccessKeySets())).toBeNull();
  });

  it("answers 503 when the key set cannot be fetched, and refuses a malformed ACCESS_ROLES as the operator's error", async ({
    expect,
  }) => {
    const gone = accessEnv(`${httpTarget()}/status/503`);
    expect(await codeOf(accessPrincipal(gone, requestWith(await assertion(key)), createAccessKeySets()))).toBe(
      "auth.access_unavailable",
    );
    expect(await codeOf(Promise.resolve().then(() => parseAccessRoles('{"emails":{"a@b.c":["boss"]}}')))).toBe(
      "access.bad_config",
    );
    expect(await codeOf(Promise.resolve().then(() => parseAccessRoles("{")))).toBe("access.bad_config");
  });

  it("lets a verified identity with roles call the API without a bearer token; one without roles is 403", async ({
    expect,
  }) => {
    const app = createApp();
    const call = async (token: string, headers: Record<string, string> = {}) => {
      const response = await app.request(
        "/v1/workflows",
        { headers: { "cf-access-jwt-assertion": token, ...headers } },
        accessEnv(certsUrl),
      );
      return { status: response.status, body: (await response.json()) as { error?: { code: string } } };
    };
    expect((await call(await assertion(key))).status).toBe(200);
    const nobody = await call(await assertion(key, { email: "nobody@example.com" }));
    expect(nobody.status).toBe(403);
    expect(nobody.body.error?.code).toBe("auth.forbidden");
    // An assertion that does not verify is refused, even beside a valid bearer token.
    const expired = await call(await assertion(key, {}, { expiresAt: Math.floor(Date.now() / 1000) - 10 }), {
      authorization: "Bearer test-token",
    });
    expect(expired.status).toBe(401);
    expect(expired.body.error?.code).toBe("auth.invalid_access_token");
  });

  it("answers GET /v1/whoami with the Access identity, its groups and roles, even one that holds no role", async ({
    expect,
  }) => {
    const app = createApp();
    const whoami = async (token: string) => {
      const response = await app.request(
        "/v1/whoami",
        { headers: { "cf-access-jwt-assertion": token } },
        accessEnv(certsUrl),
      );
      return { status: response.status, body: (await response.json()) as unknown };
    };
    expect(await whoami(await assertion(key, { email: "Ops@example.com", groups: ["eng"] }))).toEqual({
      status: 200,
      body: {
        principal: {
          kind: "access",
          email: "ops@example.com",
          groups: ["eng"],
          roles: ["approver", "reader", "runner"],
          workflows: null,
          created_by: "access:ops@example.com",
        },
      },
    });
    expect(await whoami(await assertion(key, { email: "nobody@example.com" }))).toMatchObject({
      status: 200,
      body: { principal: { kind: "access", email: "nobody@example.com", roles: [] } },
    });
  });
});
