/**
 * A local OTLP/HTTP trace receiver: the collector of the tests (in workerd
 * through vitest, and against `wrangler dev`). It binds 127.0.0.1 and takes
 * `POST /v1/traces` as a collector's otlphttp receiver does, with a protobuf
 * body, which it decodes with OpenTelemetry's own definitions: the message
 * types generated from opentelemetry-proto that `@opentelemetry/otlp-transformer`
 * 0.57 shipped (installed as `otlp-transformer-protobufjs`; later versions
 * encode by hand and ship no decoder). A body that does not decode, or whose
 * decoded message does not verify against those types, is answered 400.
 *
 * Routes:
 *   POST /v1/traces            an ExportTraceServiceRequest (application/x-protobuf);
 *                              401 without the `authorization` header it was
 *                              started with (when given one). 200 `{}` once kept.
 *   GET  /spans?run_id=R       200 { spans }: every span received whose
 *        /spans?trace_id=T     `trellis.run.id` is R (or whose trace is T), as
 *                              received, flattened (ids hex, attributes an object,
 *                              times in ms), one entry per export, so a span sent
 *                              twice is listed twice.
 *   GET  /requests?workflow=W  200 { requests: [{ text, raw }] }: each request with a
 *                              span of workflow W: its decoded JSON and its body as
 *                              latin1 text (to look for what must not be there).
 *   POST /refuse               { workflow, mode } with mode `reset` (the socket is
 *                              dropped: a collector that is down) or `503`; requests
 *                              with a span of that workflow are refused until
 *                              `POST /accept { workflow }`. 200 { refused } counts them.
 */
import { createServer } from "node:http";
import { createRequire } from "node:module";

const require = createRequire(import.meta.url);
const root = require("otlp-transformer-protobufjs/build/src/generated/root.js");
const ExportTraceServiceRequest = root.opentelemetry.proto.collector.trace.v1.ExportTraceServiceRequest;

/**
 * A span as the receiver keeps it (see `flatten`).
 * @typedef {{ traceId: string, spanId: string, parentSpanId: string | null, name: string, kind: number,
 *   start: number, end: number, attributes: Record<string, unknown>,
 *   events: { name: string, time: number, attributes: Record<string, unknown> }[],
 *   status: { code: number, message: string }, flags: number, resource: Record<string, unknown>, scope: string }} ReceivedSpan
 */
/** @typedef {{ spans: ReceivedSpan[], text: string, raw: string }} ReceivedRequest */

/** @param {{ port?: number, authorization?: string }} [options] */
export async function startOtlpReceiver({ port = 0, authorization } = {}) {
  /** @type {ReceivedRequest[]} */
  const received = [];
  /** @type {Map<string, { mode: string, refused: number }>} */
  const refusals = new Map();
  const server = createServer((req, res) => {
    handle(req, res, { received, refusals, authorization }).catch((error) => {
      if (!res.headersSent) send(res, 500, { error: String(error?.message ?? error) });
      else res.destroy();
    });
  });
  await new Promise((resolve, reject) => {
    server.once("error", reject);
    server.listen(port, "127.0.0.1", () => resolve(undefined));
  });
  const address = /** @type {import("node:net").AddressInfo} */ (server.address());
  return {
    url: `http://127.0.0.1:${address.port}`,
    close: () =>
      new Promise((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve(undefined));
      }),
  };
}

/** @param {import("node:http").IncomingMessage} req @param {import("node:http").ServerResponse} res @param {{ received: ReceivedRequest[], refusals: Map<string, { mode: string, refused: number }>, authorization?: string }} state */
async function handle(req, res, state) {
  const url = new URL(req.url ?? "/", "http://localhost");
  const body = await readBody(req);
  if (req.method === "POST" && url.pathname === "/v1/traces") {
    return receive(req, res, body, state);
  }
  if (req.method === "GET" && url.pathname === "/spans") {
    const runId = url.searchParams.get("run_id");
    const traceId = url.searchParams.get("trace_id");
    const spans = state.received
      .flatMap((request) => request.spans)
      .filter((span) => span.attributes["trellis.run.id"] === runId || span.traceId === traceId);
    return send(res, 200, { spans });
  }
  if (req.method === "GET" && url.pathname === "/requests") {
    const workflow = url.searchParams.get("workflow");
    const requests = state.received.filter((request) =>
      request.spans.some((span) => span.attributes["trellis.workflow.id"] === workflow),
    );
    return send(res, 200, { requests: requests.map(({ text, raw }) => ({ text, raw })) });
  }
  const control = body.length > 0 ? JSON.parse(body.toString("utf8")) : {};
  if (req.method === "POST" && url.pathname === "/refuse") {
    state.refusals.set(control.workflow, { mode: control.mode, refused: 0 });
    return send(res, 200, {});
  }
  if (req.method === "POST" && url.pathname === "/accept") {
    const refusal = state.refusals.get(control.workflow);
    state.refusals.delete(control.workflow);
    return send(res, 200, { refused: refusal?.refused ?? 0 });
  }
  return send(res, 404, { error: "not found" });
}

/** Decodes, verifies and keeps an export request (or refuses it, as asked). */
function receive(req, res, body, state) {
  if (state.authorization !== undefined && req.headers.authorization !== state.authorization) {
    return send(res, 401, { error: "no or wrong authorization" });
  }
  if (req.headers["content-type"] !== "application/x-protobuf") {
    return send(res, 415, { error: "only application/x-protobuf is taken here" });
  }
  let message;
  try {
    message = ExportTraceServiceRequest.decode(body);
  } catch (error) {
    return send(res, 400, { error: `not an ExportTraceServiceRequest: ${error.message}` });
  }
  const problem = ExportTraceServiceRequest.verify(message);
  if (problem) {
    return send(res, 400, { error: problem });
  }
  const decoded = ExportTraceServiceRequest.toObject(message, { longs: String, enums: Number, bytes: String });
  const spans = flatten(decoded);
  for (const [workflow, refusal] of state.refusals) {
    if (spans.some((span) => span.attributes["trellis.workflow.id"] === workflow)) {
      refusal.refused += 1;
      if (refusal.mode === "reset") return req.socket.destroy();
      return send(res, 503, { error: "refused for the test" });
    }
  }
  state.received.push({ spans, text: JSON.stringify(decoded), raw: body.toString("latin1") });
  return send(res, 200, {});
}

/** Every span of a decoded request, with its resource's and scope's names, ids as hex and attributes as an object. */
function flatten(request) {
  return (request.resourceSpans ?? []).flatMap((resourceSpans) =>
    (resourceSpans.scopeSpans ?? []).flatMap((scopeSpans) =>
      (scopeSpans.spans ?? []).map((span) => ({
        traceId: hex(span.traceId),
        spanId: hex(span.spanId),
        parentSpanId: span.parentSpanId ? hex(span.parentSpanId) || null : null,
        name: span.name,
        kind: span.kind,
        start: Number(BigInt(span.startTimeUnixNano) / 1_000_000n),
        end: Number(BigInt(span.endTimeUnixNano) / 1_000_000n),
        attributes: attributes(span.attributes),
        events: (span.events ?? []).map((event) => ({
          name: event.name,
          time: Number(BigInt(event.timeUnixNano) / 1_000_000n),
          attributes: attributes(event.attributes),
        })),
        status: { code: span.status?.code ?? 0, message: span.status?.message ?? "" },
        flags: span.flags ?? 0,
        resource: attributes(resourceSpans.resource?.attributes),
        scope: scopeSpans.scope?.name ?? "",
      })),
    ),
  );
}

/** @param {string | undefined} base64 */
function hex(base64) {
  return Buffer.from(base64 ?? "", "base64").toString("hex");
}

/** OTLP `KeyValue`s as an object; array values as arrays, int64 as numbers. */
function attributes(list) {
  return Object.fromEntries((list ?? []).map(({ key, value }) => [key, anyValue(value)]));
}

function anyValue(value) {
  if (value === undefined || value === null) return null;
  if ("stringValue" in value) return value.stringValue;
  if ("intValue" in value) return Number(value.intValue);
  if ("doubleValue" in value) return value.doubleValue;
  if ("boolValue" in value) return value.boolValue;
  if ("arrayValue" in value) return (value.arrayValue.values ?? []).map(anyValue);
  return value;
}

/** @param {import("node:http").IncomingMessage} req @returns {Promise<Buffer>} */
async function readBody(req) {
  const chunks = [];
  for await (const chunk of req) chunks.push(chunk);
  return Buffer.concat(chunks);
}

/** @param {import("node:http").ServerResponse} res @param {number} status @param {unknown} body */
function send(res, status, body) {
  res.writeHead(status, { "content-type": "application/json" });
  res.end(JSON.stringify(body));
}
