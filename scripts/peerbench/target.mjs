#!/usr/bin/env node
/**
 * The one HTTP target every engine's fan-out and http chain call, in a process of its own.
 *
 *   GET  /sleep?ms=N   waits N ms (≤ 10 000), then 200 {"slept":N} (the fan-out's call)
 *   GET  /now          200 {"now":<epoch ms>} at once, no timer (the http chain's call)
 *   GET  /log          {"arrived":[epoch ms…],"answered":[epoch ms…],"now":<count>} since the
 *                      last clear: when each /sleep arrived and was answered, how many /now
 *   POST /log/clear    204
 *
 * Listens on 127.0.0.1 ($TARGET_PORT, default a free port), prints its URL as
 * the first line of stdout, and exits when its stdin closes or after 2 hours.
 */
import { createServer } from "node:http";

let arrived = [];
let answered = [];
let nowCount = 0;
const server = createServer((req, res) => {
  const url = new URL(req.url ?? "/", "http://target");
  if (url.pathname === "/now") {
    nowCount += 1;
    res.writeHead(200, { "content-type": "application/json" }).end(`{"now":${Date.now()}}`);
  } else if (url.pathname === "/sleep") {
    if (arrived.length < 100_000) arrived.push(Date.now());
    const ms = Math.min(10_000, Math.max(0, Number(url.searchParams.get("ms")) || 0));
    setTimeout(() => {
      if (answered.length < 100_000) answered.push(Date.now());
      res.writeHead(200, { "content-type": "application/json" }).end(`{"slept":${ms}}`);
    }, ms);
  } else if (url.pathname === "/log") {
    res
      .writeHead(200, { "content-type": "application/json" })
      .end(JSON.stringify({ arrived, answered, now: nowCount }));
  } else if (url.pathname === "/log/clear" && req.method === "POST") {
    arrived = [];
    answered = [];
    nowCount = 0;
    res.writeHead(204).end();
  } else {
    res.writeHead(404).end();
  }
});
server.keepAliveTimeout = 5_000;
server.listen(Number(process.env.TARGET_PORT ?? 0), "127.0.0.1", () => {
  process.stdout.write(`http://127.0.0.1:${server.address().port}\n`);
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => process.exit(0));
};
process.stdin.on("end", stop);
process.stdin.on("close", stop);
process.stdin.resume();
setTimeout(stop, 2 * 60 * 60_000).unref();
