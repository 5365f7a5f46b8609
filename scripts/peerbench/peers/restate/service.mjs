/**
 * Restate side of the peer benchmark: three workflows, each a `run` handler
 * made of `ctx.run` steps (every step's result is journaled by restate-server
 * before the handler goes on).
 *
 *   BenchSingle     one no-op ctx.run
 *   BenchChain      input.n sequential no-op ctx.run steps
 *   BenchChainHttp  input.n sequential ctx.run steps, each a GET of input.url
 *   BenchFanout     RestatePromise.all of input.n ctx.run steps, each a GET of input.url
 *
 * Served over HTTP/2 (h2c) on 127.0.0.1:$PORT (the SDK's endpoint handler); the harness
 * registers it with the admin API and invokes `POST /<Workflow>/<key>/run`
 * through the ingress, which answers when the workflow has completed.
 * Prints "listening <port>" once bound.
 */
import http2 from "node:http2";
import * as restate from "@restatedev/restate-sdk";

const noop = async () => 1;

/** One GET of the target; a step that got anything but 2xx fails (and Restate retries it). */
async function get(url) {
  const response = await fetch(url);
  await response.arrayBuffer();
  if (!response.ok) throw new Error(`target answered ${response.status}`);
  return response.status;
}

const single = restate.workflow({
  name: "BenchSingle",
  handlers: {
    run: async (ctx) => {
      await ctx.run("only", noop);
      return { steps: 1 };
    },
  },
});

const chain = restate.workflow({
  name: "BenchChain",
  handlers: {
    run: async (ctx, input) => {
      const n = input?.n ?? 200;
      for (let i = 0; i < n; i += 1) {
        await ctx.run(`s${i}`, noop);
      }
      return { steps: n };
    },
  },
});

const chainHttp = restate.workflow({
  name: "BenchChainHttp",
  handlers: {
    run: async (ctx, input) => {
      const n = input?.n ?? 200;
      for (let i = 0; i < n; i += 1) {
        await ctx.run(`h${i}`, () => get(input.url));
      }
      return { steps: n };
    },
  },
});

const fanout = restate.workflow({
  name: "BenchFanout",
  handlers: {
    run: async (ctx, input) => {
      const n = input?.n ?? 100;
      const results = await restate.RestatePromise.all(
        Array.from({ length: n }, (_, i) => ctx.run(`f${i}`, () => get(input.url))),
      );
      return { steps: results.length };
    },
  },
});

// The SDK's own h2c handler, on a server bound to loopback only (`restate.serve` binds every interface).
const handler = restate.createEndpointHandler({ services: [single, chain, chainHttp, fanout] });
const server = http2.createServer(handler);
server.listen(Number(process.env.PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`listening ${server.address().port}\n`);
});
