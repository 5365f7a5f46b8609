import { exports } from "cloudflare:workers";
import { it } from "vitest";
it("healthz answers ok", async ({ expect }) => {
  const res = await exports.default.fetch("http://x/healthz");
  expect(await res.json()).toEqual({ ok: true });
  expect(() => new Function("return 1")).toThrow(/disallowed/);
});
