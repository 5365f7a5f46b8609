import { toHex } from "../lib/journal/encoding.ts";
import { TraceParent } from "../schemas/telemetry.ts";

/**
 * Trace and span ids of a run's spans (docs/telemetry.md, "Ids"). Every id
 * derives from the run id, so exporting a journal again gives the same ids:
 * the trace id is the first 16 bytes of SHA-256 of the run id (unless the
 * run joined a trace), a span id the first 8 bytes of SHA-256 of
 * `<run id>/<symbolic id>`, where the symbolic id names what opened the span
 * (telemetry/spans.ts: `run`, `seq/<n>`, `seq/<n>/step/<i>`, `child/<run id>`).
 */

/** A valid W3C `traceparent` as given, or null: an invalid one is ignored, as Trace Context asks. */
export function toTraceParent(header: string | null | undefined): TraceParent | null {
  const parsed = TraceParent.safeParse(header?.trim().toLowerCase());
  return parsed.success ? parsed.data : null;
}

/** The trace id and span id of a `traceparent`. */
export function traceParentIds(traceparent: TraceParent): { traceId: string; spanId: string } {
  const [, traceId = "", spanId = ""] = traceparent.split("-");
  return { traceId, spanId };
}

/** A sampled `traceparent` naming `spanId` of `traceId`. */
export function formatTraceParent(traceId: string, spanId: string): TraceParent {
  return TraceParent.parse(`00-${traceId}-${spanId}-01`);
}

/** The trace a run's spans belong to: its `traceparent`'s, or one derived from its run id. */
export async function traceIdOf(runId: string, traceparent: TraceParent | null): Promise<string> {
  return traceparent === null ? (await digestHex(runId)).slice(0, 32) : traceParentIds(traceparent).traceId;
}

/** The span id of the span `symbolic` names in run `runId`. */
export async function spanIdOf(runId: string, symbolic: string): Promise<string> {
  return (await digestHex(`${runId}/${symbolic}`)).slice(0, 16);
}

/** The symbolic id of the span a parent run keeps for its child (the child's run span is its child). */
export function childSpanSymbol(childRunId: string): string {
  return `child/${childRunId}`;
}

/**
 * The `traceparent` a parent run hands its child: the parent's trace, and the
 * parent's span for that child (the wait for it, under the step that asked).
 */
export async function childTraceParent(
  parentRunId: string,
  parentTraceParent: TraceParent | null,
  childRunId: string,
): Promise<TraceParent> {
  const traceId = await traceIdOf(parentRunId, parentTraceParent);
  return formatTraceParent(traceId, await spanIdOf(parentRunId, childSpanSymbol(childRunId)));
}

async function digestHex(text: string): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text))));
}
