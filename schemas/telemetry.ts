import { z } from "zod";

/**
 * A W3C Trace Context `traceparent` (https://www.w3.org/TR/trace-context/):
 * `00-<trace id, 32 hex>-<parent span id, 16 hex>-<flags, 2 hex>`, lowercase,
 * neither id all zeros. A run started with one joins that trace (docs/telemetry.md).
 */
export const TraceParent = z
  .string()
  .regex(/^00-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}$/)
  .refine((text) => !/^00-0{32}-/.test(text) && !/-0{16}-[0-9a-f]{2}$/.test(text), "an id is all zeros");
export type TraceParent = z.infer<typeof TraceParent>;

/**
 * What the OTLP export of a run keeps in the run's own storage between two
 * exports (coordinator/telemetry-export.ts): the spans still open, by the
 * symbolic ids of telemetry/spans.ts. Rebuilt from the journal, never shown.
 */
const OpenSpan = z.strictObject({
  /** The symbolic id of the span (telemetry/spans.ts); its parent's. */
  id: z.string(),
  parent: z.string().nullable(),
  at: z.string(),
  name: z.string(),
  attributes: z.record(z.string(), z.union([z.string(), z.number(), z.boolean(), z.array(z.string())])),
});
export type OpenSpan = z.infer<typeof OpenSpan>;

export const SpanFoldState = z.strictObject({
  /** From `run.created`: the trace the run joins (null: its own) and when it began. */
  created: z
    .strictObject({
      at: z.string(),
      workflow: z.strictObject({ id: z.string(), version: z.number() }),
      traceparent: TraceParent.nullable(),
      parent_run_id: z.string().nullable(),
    })
    .nullable(),
  /** Whether the run span was closed (by the first attestation). */
  attested: z.boolean(),
  /** Open spans by key: dispatches by token, waits by where they wait, a redrive or compensation section. */
  open: z.record(z.string(), OpenSpan),
  /** `<node>/<item>` → the span of the step a suspended task waits at. */
  suspended: z.record(z.string(), z.string()),
});
export type SpanFoldState = z.infer<typeof SpanFoldState>;
