/**
 * Imported before fast-check. fast-check keeps `Function.prototype.apply` from
 * the moment it loads, but the code-generation guard of the test setup
 * (setup.ts) has replaced the global `Function` with a thrower whose
 * `prototype` is a plain object without `apply`. This gives that object the
 * real `apply` (from the intrinsic `Function.prototype`); the guard itself is
 * untouched: `Function(…)` and `new Function(…)` still throw.
 */
const intrinsicApply = (Object.getPrototypeOf(function intrinsic() {}) as { apply: unknown }).apply;
const guardPrototype = (globalThis.Function as { prototype?: object }).prototype;
if (guardPrototype && Reflect.get(guardPrototype, "apply") !== intrinsicApply) {
  Object.defineProperty(guardPrototype, "apply", { value: intrinsicApply, configurable: true, writable: true });
}

export {};
