import { exports } from "cloudflare:workers";
import { it } from "vitest";
it("healthz answers ok", async ({ expect }) => {
  const res = await exports.default.fetch("http://x/healthz");
  expect(await res.json()).toEqual({ ok: true });
});

it("refuses code generation as production workerd does, by every way to reach a function constructor", ({ expect }) => {
  expect(() => new Function("return 1")).toThrow(/disallowed/);
  expect(() => Function("return 1")).toThrow(/disallowed/);
  // oxlint-disable-next-line no-eval -- the point of the test
  expect(() => eval("1")).toThrow(/disallowed/);
  const reach = (fn: object) => (fn as { constructor: (code: string) => unknown }).constructor("return 1");
  expect(() => reach(function plain() {})).toThrow(/disallowed/);
  expect(() => reach(async function asynchronous() {})).toThrow(/disallowed/);
  expect(() => reach(function* generator() {})).toThrow(/disallowed/);
  expect(() => reach(async function* asyncGenerator() {})).toThrow(/disallowed/);
  // What libraries rely on still works.
  expect(typeof Function.prototype.apply).toBe("function");
  expect((() => 1) instanceof Function).toBe(true);
});
