/**
 * A Worker for `npm run bench` only: it drives one limit object (limits/keeper.ts,
 * the class the engine deploys) with acquire + release pairs over RPC, as the
 * executor does around a call, and answers how long they took. Served by
 * `wrangler dev -c scripts/bench/limit-grants.toml`; never deployed.
 *
 *   GET /healthz                          200 (wrangler-dev.mjs waits for it)
 *   GET /grants?pairs=N&callers=C&key=K   { pairs, callers, ms }: C callers at once, each
 *                                         acquiring then releasing one slot N / C times in turn
 */
import { unwrap } from "../../lib/result.ts";
import { limitObject } from "../../limits/route.ts";
import type { LimitConfig } from "../../schemas/limits.ts";

export { LimitKeeper } from "../../limits/keeper.ts";

/** Room for every caller at once: what is measured is the object's turnaround, never a wait. */
const CONFIG: LimitConfig = {
  id: "bench",
  version: 1,
  concurrency: 100_000,
  rate: { limit: 1_000_000, period_ms: 60_000 },
};

async function caller(env: Env, key: string, id: number, pairs: number): Promise<void> {
  const object = limitObject(env, CONFIG.id, key);
  for (let pair = 0; pair < pairs; pair += 1) {
    const holder = { id: `bench/${id}/${pair}`, run_id: "bench", priority: 5 };
    const answer = unwrap(await object.acquire({ config: CONFIG, key, holder, lease_ms: 30_000, queue: false }));
    if (!answer.granted) {
      throw new Error(`pair ${pair} of caller ${id} was not granted`);
    }
    unwrap(await object.release({ holder_id: holder.id }));
  }
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") {
      return new Response("ok");
    }
    if (url.pathname !== "/grants") {
      return new Response("not found", { status: 404 });
    }
    const callers = Math.max(1, Math.min(256, Number(url.searchParams.get("callers") ?? 1)));
    const pairs = Math.max(callers, Math.min(100_000, Number(url.searchParams.get("pairs") ?? 1000)));
    const key = url.searchParams.get("key") ?? "k";
    const started = performance.now();
    await Promise.all(Array.from({ length: callers }, (_, id) => caller(env, key, id, Math.floor(pairs / callers))));
    return Response.json({ pairs: Math.floor(pairs / callers) * callers, callers, ms: performance.now() - started });
  },
} satisfies ExportedHandler<Env>;
