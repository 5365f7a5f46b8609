/**
 * The Worker under test (vitest.config.ts `main`): the real Worker, with one
 * change. Its `Executor` entrypoint gets test doubles for the bindings that
 * exist only on Cloudflare's network (Workers AI, Vectorize) and for Analytics
 * Engine (test/fakes/bindings.ts). The coordinator reaches it, as in
 * production, through the `EXECUTOR` service binding to this module's
 * `Executor` export. Everything else is exported unchanged.
 */
import { Executor as RealExecutor } from "../executor/index.ts";
import { FAKE_BINDINGS } from "./fakes/bindings.ts";

// Named one by one, not `export *`: the vitest plugin finds a Worker's entrypoints
// by reading its main module's own exports. Keep in step with src/index.ts.
export { default, Catalog, Coordinator, EventHub, Sandbox, ScheduleHub, TrellisApi } from "../src/index.ts";

export class Executor extends RealExecutor {
  constructor(ctx: ExecutionContext, env: Env) {
    super(ctx, {
      ...env,
      // The doubles implement the methods the engine calls, with the bindings' shapes.
      AI: FAKE_BINDINGS.AI as unknown as Ai,
      VECTORIZE: FAKE_BINDINGS.VECTORIZE as unknown as Vectorize,
      METRICS: FAKE_BINDINGS.METRICS,
    });
  }
}
