import { applyD1Migrations } from "cloudflare:test";
import { env } from "cloudflare:workers";

// The run index's schema (migrations/, read by vitest.config.ts), applied as
// `wrangler d1 migrations apply` does on `npm run dev` and on deploy.
if (!env.TEST_MIGRATIONS) {
  throw new Error("vitest.config.ts did not bind TEST_MIGRATIONS");
}
await applyD1Migrations(env.RUN_INDEX, env.TEST_MIGRATIONS);

// Production workerd refuses code generation (`eval`, `new Function`), but the
// vitest plugin patches `Function` so that its own module loader works. This
// guard puts production's rule back for our code: anything that generates code
// at run time fails the tests here instead of failing in production.
const BLOCKED = "Code generation from strings disallowed for this context (test guard)";
function blockedFunction(): never {
  throw new EvalError(BLOCKED);
}
// The intrinsics, taken before the globals are replaced: every function's
// `constructor` (through these prototypes) must throw too, or
// `(function () {}).constructor("code")` would slip past the guard.
const intrinsicPrototypes = [
  Object.getPrototypeOf(function plain() {}),
  Object.getPrototypeOf(async function asynchronous() {}),
  Object.getPrototypeOf(function* generator() {}),
  Object.getPrototypeOf(async function* asyncGenerator() {}),
] as object[];
// `Function.prototype` stays the real one, so `Function.prototype.apply` and
// `instanceof Function` work as before (libraries such as fast-check read them).
(blockedFunction as { prototype: unknown }).prototype = intrinsicPrototypes[0];
for (const name of ["Function", "eval"] as const) {
  Object.defineProperty(globalThis, name, { value: blockedFunction, configurable: true, writable: true });
}
for (const prototype of intrinsicPrototypes) {
  Object.defineProperty(prototype, "constructor", { value: blockedFunction, configurable: true, writable: true });
}
