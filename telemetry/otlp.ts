import { SpanKind, SpanStatusCode, type HrTime } from "@opentelemetry/api";
import { ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";
import { resourceFromAttributes, type Resource } from "@opentelemetry/resources";
import { EngineError, ensureEngineError } from "../lib/errors.ts";
import type { TraceParent } from "../schemas/telemetry.ts";
import { spanIdOf, traceIdOf, traceParentIds } from "./ids.ts";
import type { SpanDraft } from "./spans.ts";

/**
 * OTLP/HTTP export of a run's spans (docs/telemetry.md): the request is
 * OpenTelemetry's own protobuf encoding, made by `@opentelemetry/otlp-transformer`
 * from `ReadableSpan`s (its encoder writes protobuf by hand: no protobufjs, no
 * code generation, nothing Node-only), and POSTed to
 * `<OTEL_EXPORTER_OTLP_ENDPOINT>/v1/traces` with the headers of
 * `OTEL_EXPORTER_OTLP_HEADERS`, as the OTLP exporter specification names them.
 */

/** The instrumentation scope of every span. */
const SCOPE = { name: "trellis" };
/** A POST that has not answered by then is abandoned and retried later (the OTLP exporters' default). */
export const OTLP_TIMEOUT_MS = 10_000;

/** Where and how to export; null when `OTEL_EXPORTER_OTLP_ENDPOINT` is not set (nothing is exported). */
export interface OtlpConfig {
  url: string;
  headers: Record<string, string>;
  serviceName: string;
}

type TelemetryEnv = Pick<Env, "OTEL_EXPORTER_OTLP_ENDPOINT" | "OTEL_EXPORTER_OTLP_HEADERS" | "OTEL_SERVICE_NAME">;

/** The export's configuration from the Worker's vars and secret; null when it is off. */
export function otlpConfigOf(env: TelemetryEnv): OtlpConfig | null {
  const endpoint = env.OTEL_EXPORTER_OTLP_ENDPOINT?.trim();
  if (!endpoint) {
    return null;
  }
  return {
    // The base endpoint gets the signal's path, as the specification asks of OTEL_EXPORTER_OTLP_ENDPOINT.
    url: `${endpoint.replace(/\/+$/, "")}/v1/traces`,
    headers: parseOtlpHeaders(env.OTEL_EXPORTER_OTLP_HEADERS ?? ""),
    serviceName: env.OTEL_SERVICE_NAME?.trim() || "trellis",
  };
}

/**
 * `k=v,k2=v2` (the W3C Baggage form the OTLP exporters read: values
 * percent-decoded, blanks around each pair ignored). A pair without `=` or
 * with a value that does not decode is left out and named (never its value).
 */
export function parseOtlpHeaders(text: string): Record<string, string> {
  const headers: Record<string, string> = {};
  for (const pair of text.split(",")) {
    if (pair.trim() === "") {
      continue;
    }
    const at = pair.indexOf("=");
    const name = (at < 0 ? pair : pair.slice(0, at)).trim();
    try {
      if (at < 1 || name === "") {
        throw new URIError("no name or no value");
      }
      headers[name] = decodeURIComponent(pair.slice(at + 1).trim());
    } catch {
      console.error(JSON.stringify({ msg: "an OTEL_EXPORTER_OTLP_HEADERS pair is malformed; left out", name }));
    }
  }
  return headers;
}

/** The run's spans as one OTLP `ExportTraceServiceRequest` (protobuf). */
export async function encodeSpans(
  config: OtlpConfig,
  run: { runId: string; traceparent: TraceParent | null },
  drafts: readonly SpanDraft[],
): Promise<Uint8Array> {
  const traceId = await traceIdOf(run.runId, run.traceparent);
  const remoteParent = run.traceparent === null ? null : traceParentIds(run.traceparent).spanId;
  const resource = resourceFromAttributes({ "service.name": config.serviceName });
  const spans = await Promise.all(
    drafts.map(async (draft) => {
      const spanId = await spanIdOf(run.runId, draft.id);
      const parentId = draft.parent === null ? remoteParent : await spanIdOf(run.runId, draft.parent);
      return toReadableSpan(draft, resource, traceId, spanId, parentId, draft.parent === null);
    }),
  );
  const body = ProtobufTraceSerializer.serializeRequest(spans);
  if (body === undefined) {
    throw EngineError.terminal("telemetry.encode_failed", "the spans could not be encoded");
  }
  return body;
}

type ReadableSpan = Parameters<typeof ProtobufTraceSerializer.serializeRequest>[0][number];

function toReadableSpan(
  draft: SpanDraft,
  resource: Resource,
  traceId: string,
  spanId: string,
  parentId: string | null,
  remote: boolean,
): ReadableSpan {
  const context = { traceId, spanId, traceFlags: 1 };
  const end = Math.max(draft.end, draft.start);
  return {
    name: draft.name,
    kind: draft.kind === "client" ? SpanKind.CLIENT : SpanKind.INTERNAL,
    spanContext: () => context,
    ...(parentId === null ? {} : { parentSpanContext: { traceId, spanId: parentId, traceFlags: 1, isRemote: remote } }),
    startTime: toHrTime(draft.start),
    endTime: toHrTime(end),
    duration: toHrTime(end - draft.start),
    status: {
      code: STATUS_CODES[draft.status.code],
      ...(draft.status.message === undefined ? {} : { message: draft.status.message }),
    },
    attributes: draft.attributes,
    links: [],
    events: draft.events.map((event) => ({
      name: event.name,
      time: toHrTime(event.time),
      attributes: event.attributes,
    })),
    ended: true,
    resource,
    instrumentationScope: SCOPE,
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
  };
}

const STATUS_CODES = { unset: SpanStatusCode.UNSET, ok: SpanStatusCode.OK, error: SpanStatusCode.ERROR } as const;

/** Milliseconds since the epoch as OpenTelemetry's `[seconds, nanoseconds]`. */
function toHrTime(ms: number): HrTime {
  const seconds = Math.floor(ms / 1000);
  return [seconds, Math.round((ms - seconds * 1000) * 1_000_000)];
}

/** How a POST went: sent, or failed (`retryable` as the OTLP specification classes the answer). */
export type ExportOutcome = { ok: true } | { ok: false; retryable: boolean; message: string };

/**
 * POSTs one request. Retryable, as the specification says: no answer, 429,
 * 502, 503, 504; any other status but 2xx is a request the collector will
 * never take. The body of the answer is not read beyond its status.
 */
export async function postSpans(
  config: OtlpConfig,
  body: Uint8Array,
  fetcher: typeof fetch = fetch,
  timeoutMs = OTLP_TIMEOUT_MS,
): Promise<ExportOutcome> {
  let response: Response;
  try {
    response = await fetcher(config.url, {
      method: "POST",
      headers: { ...config.headers, "content-type": "application/x-protobuf" },
      body,
      signal: AbortSignal.timeout(timeoutMs),
    });
  } catch (error) {
    return { ok: false, retryable: true, message: `no answer: ${ensureEngineError(error).message}` };
  }
  await response.body?.cancel();
  if (response.ok) {
    return { ok: true };
  }
  const retryable = [429, 502, 503, 504].includes(response.status);
  return { ok: false, retryable, message: `the collector answered ${response.status}` };
}
