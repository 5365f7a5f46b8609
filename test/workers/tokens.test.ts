import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { sha256Hex } from "../../lib/ids.ts";
import { unwrap } from "../../lib/result.ts";
import { principalOfToken, TOKEN_CACHE, TOKEN_CACHE_MS, tokenHash } from "../../src/auth.ts";
import { catalog } from "../../src/service.ts";
import { api, uniqueId, waitForRun } from "./helpers.ts";

async function makeToken(body: Record<string, unknown>): Promise<{ token: string; token_id: string }> {
  const made = await api("POST", "/v1/tokens", body);
  if (made.status !== 201) {
    throw new Error(`token not made: ${JSON.stringify(made.json)}`);
  }
  return made.json;
}

const human = {
  ref: "ask",
  action: {
    kind: "human",
    implementation: { prompt_template: "Go?", input_schema: { type: "object" } },
  },
};
const gatedWorkflow = (id: string) => ({ id, nodes: { ask: { task: { steps: [human] } } } });

describe("tokens as data", () => {
  it("makes a token whose secret is shown once, lists it without the secret, and lets it in with its roles", async ({
    expect,
  }) => {
    const expiresAt = new Date(Date.now() + 3_600_000).toISOString();
    const made = await api("POST", "/v1/tokens", { name: "dashboard", roles: ["reader"], expires_at: expiresAt });
    expect(made.status).toBe(201);
    expect(made.json).toEqual({
      token_id: expect.stringMatching(/^tok_[0-9a-f]{20}$/),
      name: "dashboard",
      roles: ["reader"],
      workflows: null,
      expires_at: expiresAt,
      token: expect.stringMatching(/^trl_[A-Za-z0-9_-]{43}$/),
    });
    const { token, token_id } = made.json;
    const listed = await api("GET", "/v1/tokens");
    const mine = listed.json.tokens.find((entry: { token_id: string }) => entry.token_id === token_id);
    expect(mine).toEqual({
      token_id,
      name: "dashboard",
      roles: ["reader"],
      workflows: null,
      expires_at: expiresAt,
      created_at: expect.any(String),
      created_by: expect.stringMatching(/^token:[0-9a-f]{16}$/),
    });
    const hash = await tokenHash(env, token);
    expect(JSON.stringify(listed.json)).not.toContain(token);
    expect(JSON.stringify(listed.json)).not.toContain(hash);
    expect((await api("GET", "/v1/runs?limit=1", undefined, token)).status).toBe(200);
    const refused = await api("POST", "/v1/definitions", { workflows: [] }, token);
    expect(refused.status).toBe(403);
    expect(refused.json.error.code).toBe("auth.forbidden");
    // Only an admin makes tokens.
    expect((await api("POST", "/v1/tokens", { name: "x", roles: ["admin"] }, token)).status).toBe(403);
  });

  it("keeps only a keyed hash of the secret, never the secret nor its plain hash", async ({ expect }) => {
    const { token, token_id } = await makeToken({ name: "kept", roles: ["runner"] });
    const hash = await tokenHash(env, token);
    const stored = unwrap(await catalog(env).tokenByHash(hash));
    expect(stored).toMatchObject({ token_id, hash });
    expect(JSON.stringify(stored)).not.toContain(token);
    expect(hash).not.toBe(await sha256Hex(token));
    // The key is TOKEN_HASH_KEY when set (else derived from the journal signing key).
    expect(await tokenHash({ ...env, TOKEN_HASH_KEY: "another key" } as Env, token)).not.toBe(hash);
  });

  it("refuses a bad token request with the path of each problem", async ({ expect }) => {
    const cases: [unknown, string][] = [
      [{ name: "x", roles: ["superuser"] }, "roles.0"],
      [{ name: "x", roles: [] }, "roles"],
      [{ name: "x", roles: ["reader"], workflows: ["Billing?"] }, "workflows.0"],
      [{ name: "x", roles: ["reader"], expires_at: "2020-01-01T00:00:00Z" }, "expires_at"],
      [{ name: "x", roles: ["reader"], secret: "mine" }, ""],
    ];
    for (const [body, path] of cases) {
      const refused = await api("POST", "/v1/tokens", body);
      expect(refused.status, JSON.stringify(body)).toBe(400);
      expect(refused.json.error.code).toBe("token.invalid_request");
      expect(refused.json.error.details.map((detail: { path: string }) => detail.path)).toContain(path);
    }
  });

  it("revokes a token: refused at once here, and a 404 for a token revoked already", async ({ expect }) => {
    const { token, token_id } = await makeToken({ name: "short-lived", roles: ["reader"] });
    expect((await api("GET", "/v1/runs?limit=1", undefined, token)).status).toBe(200);
    const revoked = await api("DELETE", `/v1/tokens/${token_id}`);
    expect(revoked).toEqual({ status: 200, json: { token_id, revoked: true } });
    const after = await api("GET", "/v1/runs?limit=1", undefined, token);
    expect(after.status).toBe(401);
    expect(after.json.error.code).toBe("auth.invalid_token");
    expect(
      (await api("GET", "/v1/tokens")).json.tokens.map((entry: { token_id: string }) => entry.token_id),
    ).not.toContain(token_id);
    const again = await api("DELETE", `/v1/tokens/${token_id}`);
    expect(again.status).toBe(404);
    expect(again.json.error.code).toBe("token.not_found");
  });

  it("is refused by an isolate that cached it within TOKEN_CACHE_MS of its revocation elsewhere", async ({
    expect,
  }) => {
    const { token, token_id } = await makeToken({ name: "cached", roles: ["reader"] });
    const now = Date.now();
    expect(await principalOfToken(env, token, now)).toMatchObject({ token_id, roles: ["reader"] });
    const cached = TOKEN_CACHE.get(await tokenHash(env, token));
    expect(cached?.until).toBe(now + TOKEN_CACHE_MS);
    expect(TOKEN_CACHE_MS).toBeLessThanOrEqual(10_000);
    // Revoked as another isolate would: in the catalog, leaving this isolate's cache as it was.
    unwrap(await catalog(env).revokeToken(token_id));
    expect(await principalOfToken(env, token, now + TOKEN_CACHE_MS - 1)).toMatchObject({ token_id });
    await expect(principalOfToken(env, token, now + TOKEN_CACHE_MS)).rejects.toThrow("the bearer token is not valid");
  });

  it("is refused with auth.token_expired once it expires, cached or not", async ({ expect }) => {
    const expiresAt = new Date(Date.now() + 1_000).toISOString();
    const { token } = await makeToken({ name: "brief", roles: ["reader"], expires_at: expiresAt });
    expect((await api("GET", "/v1/runs?limit=1", undefined, token)).status).toBe(200);
    await new Promise((resolve) => setTimeout(resolve, Date.parse(expiresAt) - Date.now() + 50));
    const expired = await api("GET", "/v1/runs?limit=1", undefined, token);
    expect(expired.status).toBe(401);
    expect(expired.json.error).toMatchObject({ code: "auth.token_expired" });
    expect(expired.json.error.message).toContain('"brief"');
  });
});

describe("a token limited to workflows", () => {
  it("sees and acts on its workflows' runs only; the others are as if they did not exist", async ({ expect }) => {
    const prefix = uniqueId("grant");
    const [mine, theirs] = [`${prefix}-billing-eu`, `${prefix}-report`];
    expect(
      (await api("POST", "/v1/definitions", { workflows: [gatedWorkflow(mine), gatedWorkflow(theirs)] })).status,
    ).toBe(201);
    const { token, token_id } = await makeToken({
      name: "billing team",
      roles: ["reader", "runner", "approver"],
      workflows: [`${prefix}-billing-*`],
    });
    const started = await api("POST", `/v1/workflows/${mine}/runs`, {}, token);
    expect(started.status).toBe(201);
    const other = (await api("POST", `/v1/workflows/${theirs}/runs`, {})).json.run_id;
    const outside = await api("POST", `/v1/workflows/${theirs}/runs`, {}, token);
    expect(outside.status).toBe(404);
    expect(outside.json.error.code).toBe("workflow.not_found");
    for (const runId of [started.json.run_id, other]) {
      await waitForRun(runId, (run) => run.gates?.length > 0);
    }
    expect((await api("GET", `/v1/runs/${started.json.run_id}`, undefined, token)).status).toBe(200);
    for (const path of [`/v1/runs/${other}`, `/v1/runs/${other}/journal`, `/v1/runs/${other}/gates`]) {
      const hidden = await api("GET", path, undefined, token);
      expect(hidden.status, path).toBe(404);
      expect(hidden.json.error.code, path).toBe("run.not_found");
    }
    expect((await api("POST", `/v1/runs/${other}/cancel`, {}, token)).status).toBe(404);
    expect((await api("GET", `/v1/workflows/${theirs}`, undefined, token)).json.error.code).toBe(
      "definition.not_found",
    );
    expect((await api("GET", `/v1/workflows/${mine}`, undefined, token)).status).toBe(200);
    // Listings leave out what the grant does not reach (the index trails its runs by a moment).
    const listed = async (path: string, field: string, key: (item: any) => string) =>
      ((await api("GET", path, undefined, token)).json[field] as unknown[]).map(key);
    await expect
      .poll(() => listed(`/v1/runs?limit=100`, "runs", (run) => run.workflow.id), { timeout: 5_000 })
      .toContain(mine);
    expect(await listed(`/v1/runs?limit=100`, "runs", (run) => run.workflow.id)).not.toContain(theirs);
    // A stored token is `token:<token_id>` in created_by.
    expect(await listed(`/v1/runs?limit=100`, "runs", (run) => run.created_by)).toContain(`token:${token_id}`);
    await expect
      .poll(() => listed(`/v1/gates?limit=50`, "gates", (gate) => gate.run_id), { timeout: 5_000 })
      .toContain(started.json.run_id);
    const gates = await listed(`/v1/gates?limit=50`, "gates", (gate) => gate.workflow.id);
    expect(gates.every((id) => id.startsWith(`${prefix}-billing-`))).toBe(true);
    const workflows = await listed(`/v1/workflows?limit=100`, "definitions", (definition) => definition.id);
    expect(workflows).toContain(mine);
    expect(workflows.every((id) => id.startsWith(`${prefix}-billing-`))).toBe(true);
    // Admins still see everything.
    expect((await api("GET", `/v1/runs/${other}`)).status).toBe(200);
  });
});
