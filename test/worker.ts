/**
 * The Worker under test (vitest.config.ts `main`): the real Worker, with two
 * changes (the second: a consumer of the dead-letter queue, below). Its `Executor` entrypoint gets test doubles for the bindings that
 * exist only on Cloudflare's network (Workers AI, Vectorize) and for Analytics
 * Engine (test/fakes/bindings.ts). The coordinator reaches it, as in
 * production, through the `EXECUTOR` service binding to this module's
 * `Executor` export. Everything else is exported unchanged.
 */
import { Executor as RealExecutor } from "../executor/index.ts";
import { FAKE_BINDINGS } from "./fakes/bindings.ts";

import worker from "../src/index.ts";

// Named one by one, not `export *`: the vitest plugin finds a Worker's entrypoints
// by reading its main module's own exports. Keep in step with src/index.ts.
export { Catalog, Coordinator, EventHub, LimitKeeper, Sandbox, ScheduleHub, TrellisApi } from "../src/index.ts";

/** Where the dead-letter queue's messages are kept for tests to read (the test config consumes that queue). */
export const DEAD_LETTER_PREFIX = "test-dead-letters/";

/**
 * The real Worker, and a consumer of the dead-letter queue, which only the
 * test config declares: each message that lands there is kept in R2 under
 * {@link DEAD_LETTER_PREFIX} (its queue message id), as a test reads it.
 */
export default {
  fetch: worker.fetch,
  async queue(batch: MessageBatch, env: Env): Promise<void> {
    if (batch.queue !== "trellis-events-dlq") {
      return worker.queue(batch, env);
    }
    for (const message of batch.messages) {
      await env.ARTIFACTS?.put(`${DEAD_LETTER_PREFIX}${message.id}`, JSON.stringify(message.body));
      message.ack();
    }
  },
} satisfies ExportedHandler<Env>;

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
