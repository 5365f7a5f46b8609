import { env } from "cloudflare:workers";
import { describe, it } from "vitest";
import { sha256Hex } from "../../lib/ids.ts";
import { principalOf } from "../../src/auth.ts";
import { api, uniqueId, waitForRun } from "./helpers.ts";

describe("authentication and errors", () => {
  it("answers /healthz without a token", async ({ expect }) => {
    const response = await api("GET", "/healthz", undefined, null);
    expect(response).toEqual({ status: 200, json: { ok: true } });
  });

  it("refuses a missing or wrong token with 401 and a dotted code, and accepts every configured token", async ({
    expect,
  }) => {
    const missing = await api("GET", "/v1/workflows/x", undefined, null);
    expect(missing.status).toBe(401);
    expect(missing.json.error.code).toBe("auth.missing_token");
    const wrong = await api("GET", "/v1/workflows/x", undefined, "nope");
    expect(wrong.status).toBe(401);
    expect(wrong.json.error.code).toBe("auth.invalid_token");
    for (const token of ["test-token", "second-token"]) {
      expect((await api("GET", "/v1/workflows/x", undefined, token)).status).toBe(404);
    }
  });

  it("answers unknown routes with 404 in the error format", async ({ expect }) => {
    const response = await api("DELETE", "/v1/nothing/here/at/all");
    expect(response.status).toBe(404);
    expect(response.json.error).toMatchObject({ code: "route.not_found" });
  });

  it("says the path has /v1 twice when a base URL ending in /v1 doubles it, with or without a token", async ({
    expect,
  }) => {
    for (const [path, token] of [
      ["/v1/v1/workflows", undefined],
      ["/v1/v1/runs/run_0123456789abcdef0123456789abcdef", undefined],
      ["/v1/v1/workflows", null],
    ] as const) {
      const response = await api("GET", path, undefined, token);
      expect(response.status, path).toBe(404);
      expect(response.json.error, path).toEqual({
        code: "route.not_found",
        message: `no route GET ${path}: the path has /v1 twice; the base URL should not end in /v1`,
      });
    }
  });

  it("records who started a run as a keyed digest of the token, never its plain hash", async ({ expect }) => {
    const id = uniqueId("who");
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "x", expr: "1" }] } } };
    expect(
      (
        await api(
          "POST",
          "/v1/definitions",
          { workflows: [{ id, nodes: { main: { task: { steps: [step] } } } }] },
          "second-token",
        )
      ).status,
    ).toBe(201);
    const started = await api("POST", `/v1/workflows/${id}/runs`, { input: {} }, "second-token");
    const run = await waitForRun(started.json.run_id);
    const journal = (await api("GET", `/v1/runs/${run.run_id}/journal`)).json.entries as {
      kind: string;
      body: { created_by?: string };
    }[];
    const createdBy = journal.find((entry) => entry.kind === "attest")?.body.created_by;
    expect(createdBy).toBe(await principalOf("second-token", env.JOURNAL_SIGNING_KEY));
    expect(createdBy).toMatch(/^token:[0-9a-f]{16}$/);
    // The old name was the token's plain SHA-256, which a weak token cannot hide.
    const plain = await sha256Hex("second-token");
    expect(plain.includes(createdBy?.slice("token:".length) ?? "")).toBe(false);
    expect(await principalOf("second-token", "another key")).not.toBe(createdBy);
  });
});
