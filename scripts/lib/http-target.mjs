// placeholder, replaced by the http target helper
import { createServer } from "node:http";
export async function startHttpTarget({ port = 0 } = {}) {
  const server = createServer((req, res) => { res.writeHead(200, { "content-type": "application/json" }); res.end(JSON.stringify({ ok: true, path: req.url })); });
  await new Promise((r) => server.listen(port, "127.0.0.1", r));
  const addr = server.address();
  return { url: `http://127.0.0.1:${addr.port}`, close: () => new Promise((r) => server.close(() => r())) };
}
