// Production workerd refuses code generation (`eval`, `new Function`), but the
// vitest plugin patches `Function` so that its own module loader works. This
// guard puts production's rule back for our code: anything that generates code
// at run time fails the tests here instead of failing in production.
const BLOCKED = "Code generation from strings disallowed for this context (test guard)";
function blockedFunction(): never {
  throw new EvalError(BLOCKED);
}
for (const name of ["Function", "eval"] as const) {
  Object.defineProperty(globalThis, name, { value: blockedFunction, configurable: true, writable: true });
}
const AsyncFunction = Object.getPrototypeOf(async () => {}).constructor as { prototype: object };
Object.defineProperty(Function.prototype, "constructor", { value: blockedFunction, configurable: true, writable: true });
Object.defineProperty(AsyncFunction.prototype, "constructor", { value: blockedFunction, configurable: true, writable: true });
