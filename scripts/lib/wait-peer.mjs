#!/usr/bin/env node
/**
 * The benchmark's peer: the least an HTTP server can do to "wait N ms and
 * answer", in a process of its own (so its work never shares an event loop
 * with the benchmark driver), and a log of when each request arrived and
 * when its answer left, for the phase breakdown `npm run bench` prints.
 *
 *   GET  /wait?ms=N   waits N ms (≤ 10 000), then 200 {"waited":N}
 *   GET  /log         200 {"arrived":[ms…],"answered":[ms…]} since the last clear (epoch ms)
 *   POST /log/clear   204
 *
 * Run: `node scripts/lib/wait-peer.mjs` prints its URL as the first line of
 * stdout; it listens on 127.0.0.1 only and exits when its stdin closes (the
 * parent went away) or after an hour.
 */
import { createServer } from "node:http";
import { fileURLToPath } from "node:url";

const MAX_WAIT_MS = 10_000;
const MAX_LIFETIME_MS = 60 * 60_000;
const MAX_LOG = 100_000;

/** Starts the peer in this process. @returns {Promise<{ url: string, close: () => Promise<void> }>} */
export async function startWaitPeer() {
  /** @type {number[]} */
  let arrived = [];
  /** @type {number[]} */
  let answered = [];
  const server = createServer((req, res) => {
    const url = req.url ?? "/";
    if (url.startsWith("/wait")) {
      if (arrived.length < MAX_LOG) arrived.push(Date.now());
      const ms = Math.min(MAX_WAIT_MS, Math.max(0, Number(new URL(url, "http://peer").searchParams.get("ms")) || 0));
      const answer = () => {
        if (answered.length < MAX_LOG) answered.push(Date.now());
        res.writeHead(200, { "content-type": "application/json" }).end(`{"waited":${ms}}`);
      };
      // ms=0 answers at once: Node's setTimeout(…, 0) waits at least 1 ms, which the http chain would count per node.
      if (ms === 0) {
        answer();
      } else {
        setTimeout(answer, ms);
      }
    } else if (url === "/log") {
      res.writeHead(200, { "content-type": "application/json" }).end(JSON.stringify({ arrived, answered }));
    } else if (url === "/log/clear" && req.method === "POST") {
      arrived = [];
      answered = [];
      res.writeHead(204).end();
    } else {
      res.writeHead(404).end();
    }
  });
  server.keepAliveTimeout = 5_000;
  await new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(undefined)));
  const address = server.address();
  const port = typeof address === "object" && address ? address.port : 0;
  return {
    url: `http://127.0.0.1:${port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve(undefined));
      }),
  };
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const peer = await startWaitPeer();
  process.stdout.write(`${peer.url}\n`);
  const stop = () => void peer.close().then(() => process.exit(0));
  process.stdin.on("end", stop);
  process.stdin.on("close", stop);
  process.stdin.resume();
  setTimeout(stop, MAX_LIFETIME_MS).unref();
}
