import { describe, it } from "vitest";
import { api } from "./helpers.ts";

describe("authentication and errors", () => {
  it("answers /healthz without a token", async ({ expect }) => {
    const response = await api("GET", "/healthz", undefined, null);
    expect(response).toEqual({ status: 200, json: { ok: true } });
  });

  it("refuses a missing or wrong token with 401 and a dotted code, and accepts every configured token", async ({ expect }) => {
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
});
