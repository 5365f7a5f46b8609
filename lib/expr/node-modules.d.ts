/**
 * The two Node APIs the engine uses (workerd provides both with the `nodejs_compat` flag):
 * typed here rather than by @types/node, whose globals would clash with the Workers types.
 * Only what is called: `AsyncLocalStorage` (`work-budget.ts`, `run-scope.ts`) and a
 * synchronous SHA-256 (`run-scope.ts`'s idempotency key, computed without an `await`).
 */
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, callback: () => R): R;
    getStore(): T | undefined;
  }
}

declare module "node:crypto" {
  interface Hash {
    update(data: string, encoding: "utf8"): Hash;
    digest(encoding: "hex"): string;
  }
  export function createHash(algorithm: "sha256"): Hash;
}
