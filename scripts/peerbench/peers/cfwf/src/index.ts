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
 *   POST /floor/signed-chain-http {n, url} the same through the entrypoint, with what an engine
 *                                          that keeps Trellis's invariants must do on top and
 *                                          nothing else: each step signs and hash-chains four
 *                                          journal entries (SHA-256, Ed25519), writes them with a
 *                                          state row in one transaction, checks the result's token
 *                                          against the dispatched one, and sends a task-shaped
 *                                          payload whose result comes back task-shaped
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

  /** One task of one `http` step, as an executor gets it (a payload) and answers it (a result). */
  async runTask(task: FloorTask): Promise<FloorResult> {
    const [step] = task.task.steps;
    if (step === undefined) throw new Error("a task without steps");
    const response = await fetch(step.action.url);
    const text = await response.text();
    return {
      token_id: task.token_id,
      success: response.ok,
      output: { status: response.status, body: text },
      metrics: { duration_ms: 0, steps_executed: 1, llm_tokens: { input: 0, output: 0, cost_usd: 0 } },
    };
  }
}

type FloorTask = {
  token_id: string;
  workflow_run_id: string;
  node_id: string;
  task: { id: string; version: number; steps: { id: string; action: { kind: "http"; method: "GET"; url: string } }[] };
  input: Record<string, unknown>;
  timeout_ms: number;
  retry_attempt: number;
};
type FloorResult = {
  token_id: string;
  success: boolean;
  output: { status: number; body: string };
  metrics: {
    duration_ms: number;
    steps_executed: number;
    llm_tokens: { input: number; output: number; cost_usd: number };
  };
};

const HEX = Array.from({ length: 256 }, (_, byte) => byte.toString(16).padStart(2, "0"));

/** Lowercase hex of bytes. */
function hex(buffer: ArrayBuffer): string {
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += HEX[byte];
  return text;
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

  /**
   * n steps of a chain of `http` tasks with the invariants an engine like Trellis keeps and
   * no engine logic: per step, the previous result's token checked, four journal entries
   * signed and chained, written with the run's state in one transaction (durable before the
   * next call leaves: the output gate), then the next task sent through the entrypoint.
   */
  async signedChainHttp(n: number, url: string): Promise<number> {
    const sql = this.ctx.storage.sql;
    sql.exec("CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY, hash TEXT, text TEXT)");
    sql.exec("CREATE TABLE IF NOT EXISTS state (id INTEGER PRIMARY KEY, json TEXT)");
    const key = (await crypto.subtle.generateKey("Ed25519", false, ["sign", "verify"])) as CryptoKeyPair;
    const encoder = new TextEncoder();
    let prev: string | null = null;
    let seq = 0;
    let result: FloorResult | null = null;
    const t0 = Date.now();
    for (let i = 0; i < n; i += 1) {
      const token = `t${i}`;
      if (result !== null && result.token_id !== `t${i - 1}`) throw new Error("a result for another dispatch");
      const at = new Date().toISOString();
      const bodies = [
        {
          kind: "task.completed",
          body: { node_id: `n${i - 1}`, token_id: `t${i - 1}`, output: result?.output ?? null },
        },
        { kind: "node.completed", body: { node_id: `n${i - 1}`, status: "completed" } },
        { kind: "node.started", body: { node_id: `n${i}` } },
        { kind: "task.dispatched", body: { node_id: `n${i}`, token_id: token, task_id: "get", attempt: 0 } },
      ];
      const entries: { seq: number; hash: string; text: string }[] = [];
      for (const { kind, body } of bodies) {
        seq += 1;
        const text = JSON.stringify({ at, body, kind, prev, run_id: "floor", seq });
        const bytes = encoder.encode(text);
        const [digest, signature] = await Promise.all([
          crypto.subtle.digest("SHA-256", bytes),
          crypto.subtle.sign("Ed25519", key.privateKey, bytes),
        ]);
        prev = hex(digest);
        entries.push({ seq, hash: prev, text: `${text.slice(0, -1)},"hash":"${prev}","sig":"${hex(signature)}"}` });
      }
      this.ctx.storage.transactionSync(() => {
        for (const entry of entries)
          sql.exec("INSERT INTO journal VALUES (?, ?, ?)", entry.seq, entry.hash, entry.text);
        sql.exec("INSERT OR REPLACE INTO state VALUES (1, ?)", JSON.stringify({ seq, node: i, token, prev }));
      });
      result = await this.env.GETTER.runTask({
        token_id: token,
        workflow_run_id: "floor",
        node_id: `n${i}`,
        task: { id: "get", version: 1, steps: [{ id: "get", action: { kind: "http", method: "GET", url } }] },
        input: {},
        timeout_ms: 30_000,
        retry_attempt: 0,
      });
      if (!result.success) throw new Error(`target answered ${result.output.status}`);
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
  if (path === "/floor/signed-chain-http") return Response.json({ ms: await stub.signedChainHttp(n, url) });
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
