import { env } from "cloudflare:workers";
import { vi } from "vitest";

/**
 * Reading what the local OTLP receiver (scripts/lib/otlp-receiver.mjs) got:
 * every run of the test Worker is exported to it (vitest.config.ts).
 */

/** A span as the receiver decoded and flattened it: ids hex, times in ms, attributes an object. */
export interface ReceivedSpan {
  traceId: string;
  spanId: string;
  parentSpanId: string | null;
  name: string;
  /** OTLP's SpanKind: 1 internal, 3 client. */
  kind: number;
  start: number;
  end: number;
  attributes: Record<string, unknown>;
  events: { name: string; time: number; attributes: Record<string, unknown> }[];
  /** OTLP's status code: 0 unset, 1 ok, 2 error. */
  status: { code: number; message: string };
  resource: Record<string, unknown>;
  scope: string;
}

export const receiverUrl = (): string => String(env.OTEL_EXPORTER_OTLP_ENDPOINT);

/** Every span received for `runId` (a span exported twice is listed twice). */
export async function spansOf(runId: string): Promise<ReceivedSpan[]> {
  const response = await fetch(`${receiverUrl()}/spans?run_id=${runId}`);
  return ((await response.json()) as { spans: ReceivedSpan[] }).spans;
}

/** Waits until the run's span (the last one a run sends) was received, and answers every span of the run. */
export async function untilRunSpan(runId: string, timeout = 15_000): Promise<ReceivedSpan[]> {
  let spans: ReceivedSpan[] = [];
  await vi.waitUntil(
    async () => {
      spans = await spansOf(runId);
      return spans.some((span) => span.name.startsWith("run ") && span.attributes["trellis.run.id"] === runId);
    },
    { timeout, interval: 100 },
  );
  return spans;
}

/** The requests the receiver kept with a span of `workflow`: decoded JSON and the raw body as latin1 text. */
export async function requestsOf(workflow: string): Promise<{ text: string; raw: string }[]> {
  const response = await fetch(`${receiverUrl()}/requests?workflow=${workflow}`);
  return ((await response.json()) as { requests: { text: string; raw: string }[] }).requests;
}

/** Makes the receiver refuse requests with spans of `workflow`: `reset` drops the connection (a collector down). */
export async function refuse(workflow: string, mode: "reset" | "503"): Promise<void> {
  await fetch(`${receiverUrl()}/refuse`, { method: "POST", body: JSON.stringify({ workflow, mode }) });
}

/** Lifts a refusal; answers how many requests were refused. */
export async function accept(workflow: string): Promise<number> {
  const response = await fetch(`${receiverUrl()}/accept`, { method: "POST", body: JSON.stringify({ workflow }) });
  return ((await response.json()) as { refused: number }).refused;
}

/** The spans as an indented tree (children in start order), one line per span: what a trace viewer shows. */
export function treeOf(spans: readonly ReceivedSpan[]): string {
  const ids = new Set(spans.map((span) => span.spanId));
  const children = new Map<string | null, ReceivedSpan[]>();
  for (const span of spans) {
    const parent = span.parentSpanId !== null && ids.has(span.parentSpanId) ? span.parentSpanId : null;
    children.set(parent, [...(children.get(parent) ?? []), span]);
  }
  const lines: string[] = [];
  const walk = (parent: string | null, depth: number) => {
    const ordered = [...(children.get(parent) ?? [])].sort((a, b) => a.start - b.start || a.end - b.end);
    for (const span of ordered) {
      lines.push(`${"  ".repeat(depth)}${span.name}  ${describe(span)}`);
      walk(span.spanId, depth + 1);
    }
  };
  walk(null, 0);
  return lines.join("\n");
}

const STATUS = ["unset", "ok", "error"];

function describe(span: ReceivedSpan): string {
  const shown = Object.entries(span.attributes).filter(
    ([name]) => !["trellis.run.id", "trellis.workflow.id", "trellis.workflow.version"].includes(name),
  );
  const attributes = shown.map(([name, value]) => `${name}=${JSON.stringify(value)}`).join(" ");
  const events = span.events.length > 0 ? ` events=${span.events.length}` : "";
  return `[${STATUS[span.status.code]}, ${span.end - span.start} ms${events}] ${attributes}`;
}
