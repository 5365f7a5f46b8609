import { describe, it } from "vitest";
import { CliError } from "../../cli/api.ts";
import { tokensCommand } from "../../cli/tokens.ts";
import { recording } from "./cli-recording.ts";

/** `trellis tokens create|list|revoke` against a recording stand-in for the API (docs/cli.md). */

const token = {
  token_id: "tok_0123456789abcdef0123",
  name: "ci",
  roles: ["runner", "reader"],
  workflows: ["billing-*"],
  expires_at: "2026-06-01T00:00:00.000Z",
};

describe("trellis tokens", () => {
  it("creates a token from --roles, --workflows and --expires, and prints its secret once", async ({ expect }) => {
    const { io, calls, bodies, printed } = recording({ "/v1/tokens": { ...token, token: "trl_secret" } });
    const options = { roles: "runner, reader", workflows: "billing-*", expires: "2026-06-01T00:00:00Z" };
    expect(await tokensCommand(io, "create", "ci", options)).toBe(0);
    expect(calls).toEqual(["POST /v1/tokens"]);
    expect(bodies).toEqual([
      { name: "ci", roles: ["runner", "reader"], workflows: ["billing-*"], expires_at: "2026-06-01T00:00:00Z" },
    ]);
    expect(printed()).toBe(
      "tok_0123456789abcdef0123  ci  runner,reader  workflows billing-*  expires 2026-06-01T00:00:00.000Z\n" +
        "trl_secret\n(the secret is shown this once; keep it now)\n",
    );
  });

  it("lists tokens one a line, and revokes one by its id", async ({ expect }) => {
    const { io, calls, printed } = recording({
      "/v1/tokens": { tokens: [{ ...token, workflows: null, expires_at: null, created_at: "x", created_by: "y" }] },
      "/v1/tokens/tok_0123456789abcdef0123": { token_id: token.token_id, revoked: true },
    });
    expect(await tokensCommand(io, "list", undefined, {})).toBe(0);
    expect(await tokensCommand(io, "revoke", token.token_id, {})).toBe(0);
    expect(calls).toEqual(["GET /v1/tokens", "DELETE /v1/tokens/tok_0123456789abcdef0123"]);
    expect(printed()).toBe(
      "tok_0123456789abcdef0123  ci  runner,reader  every workflow  never expires\nrevoked tok_0123456789abcdef0123\n",
    );
  });

  it("needs a name and --roles to create, and an id to revoke", async ({ expect }) => {
    const { io, calls } = recording({});
    await expect(tokensCommand(io, "create", "ci", {})).rejects.toBeInstanceOf(CliError);
    await expect(tokensCommand(io, "create", undefined, { roles: "reader" })).rejects.toBeInstanceOf(CliError);
    await expect(tokensCommand(io, "revoke", undefined, {})).rejects.toBeInstanceOf(CliError);
    expect(calls).toEqual([]);
  });
});
