/**
 * Cloudflare Workflows side of the peer benchmark.
 *
 * One Workflow class; its params say which workload to run:
 *   single      one no-op step.do
 *   chain       n sequential no-op step.do
 *   chain-http  n sequential step.do, each a GET of params.url
 *   fanout      Promise.all of n step.do, each a GET of params.url
 * run() returns { t0, tEnd }: t0 is when the fetch handler asked for the
 * instance (just before create()), tEnd when run() finished its last step
 * (Date.now() in workerd advances with I/O, so it is the time of the last
 * step's persistence). tEnd − t0 is the engine-side duration.
 *
 * HTTP:
 *   GET  /healthz              200 "ok"
 *   POST /start  {kind, n, url}  → {id, t0}
 *   GET  /status?id=…          → instance.status() ({status, output, error})
 *
 * The platform's floor under `wrangler dev`, for the benchmark's floor section
 * (no engine, only the parts every engine on Workers is built from):
 *   GET  /floor/noop                       answers at once
 *   POST /floor/object                     a new SQLite Durable Object writes one row, then answers
 *   POST /floor/chain-http {n, url, rpc}   one new object: n times, write a row, then GET url
 *                                          (from the object, or with rpc through a service binding
 *                                          to an entrypoint that GETs it); answers {ms}
 */
import {
  DurableObject,
  WorkerEntrypoint,
  WorkflowEntrypoint,
  type WorkflowEvent,
  type WorkflowStep,
} from "cloudflare:workers";

type Params = { kind: "single" | "chain" | "chain-http" | "fanout"; n: number; url: string; t0: number };
type Env = { BENCH: Workflow<Params>; FLOOR: DurableObjectNamespace<Floor>; GETTER: Service<Getter> };

/** One GET of the target; a step that got anything but 2xx fails. */
async function get(url: string): Promise<number> {
  const response = await fetch(url);
  await response.arrayBuffer();
  if (!response.ok) {
    throw new Error(`target answered ${response.status}`);
  }
  return response.status;
}

export class BenchWorkflow extends WorkflowEntrypoint<Env, Params> {
  override async run(event: WorkflowEvent<Params>, step: WorkflowStep) {
    const { kind, n, url, t0 } = event.payload;
    if (kind === "chain") {
      for (let i = 0; i < n; i += 1) {
        await step.do(`s${i}`, async () => 1);
      }
    } else if (kind === "chain-http") {
      for (let i = 0; i < n; i += 1) {
        await step.do(`h${i}`, async () => get(url));
      }
    } else if (kind === "fanout") {
      await Promise.all(Array.from({ length: n }, (_, i) => step.do(`f${i}`, async () => get(url))));
    } else {
      await step.do("only", async () => 1);
    }
    return { t0, tEnd: Date.now() };
  }
}

/** An entrypoint that makes one GET: the hop an engine's executor call adds. */
export class Getter extends WorkerEntrypoint<Env> {
  async get(url: string): Promise<number> {
    return get(url);
  }
}

/**
 * A Durable Object with SQLite and nothing else. Each written row is made durable before
 * anything the object sends next leaves (workerd's output gate), as an engine's decision must be.
 */
export class Floor extends DurableObject<Env> {
  writeOne(): number {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS rows (i INTEGER, at INTEGER)");
    this.ctx.storage.sql.exec("INSERT INTO rows VALUES (0, ?)", Date.now());
    return 1;
  }

  async chainHttp(n: number, url: string, rpc: boolean): Promise<number> {
    this.ctx.storage.sql.exec("CREATE TABLE IF NOT EXISTS rows (i INTEGER, at INTEGER)");
    const t0 = Date.now();
    for (let i = 0; i < n; i += 1) {
      this.ctx.storage.sql.exec("INSERT INTO rows VALUES (?, ?)", i, Date.now());
      await (rpc ? this.env.GETTER.get(url) : get(url));
    }
    return Date.now() - t0;
  }
}

/** The floor routes (see the header). */
async function floor(request: Request, env: Env, path: string): Promise<Response> {
  if (path === "/floor/noop") return new Response("ok");
  const stub = env.FLOOR.get(env.FLOOR.newUniqueId());
  if (path === "/floor/object") return Response.json({ rows: await stub.writeOne() });
  const { n, url, rpc } = (await request.json()) as { n: number; url: string; rpc: boolean };
  return Response.json({ ms: await stub.chainHttp(n, url, rpc) });
}

export default {
  async fetch(request: Request, env: Env): Promise<Response> {
    const url = new URL(request.url);
    if (url.pathname === "/healthz") return new Response("ok");
    if (url.pathname.startsWith("/floor/")) return floor(request, env, url.pathname);
    if (url.pathname === "/start" && request.method === "POST") {
      const body = (await request.json()) as Omit<Params, "t0">;
      const t0 = Date.now();
      const instance = await env.BENCH.create({ params: { ...body, t0 } });
      return Response.json({ id: instance.id, t0 });
    }
    if (url.pathname === "/status") {
      const instance = await env.BENCH.get(url.searchParams.get("id") ?? "");
      return Response.json(await instance.status());
    }
    return new Response("not found", { status: 404 });
  },
} satisfies ExportedHandler<Env>;
