/**
 * The one Node API the engine uses, `AsyncLocalStorage` (workerd provides it with the
 * `nodejs_compat` flag): typed here rather than by @types/node, whose globals would clash
 * with the Workers types. Only what `work-budget.ts` and `run-scope.ts` call.
 */
declare module "node:async_hooks" {
  export class AsyncLocalStorage<T> {
    run<R>(store: T, callback: () => R): R;
    getStore(): T | undefined;
  }
}
