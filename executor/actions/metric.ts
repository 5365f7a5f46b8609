import { EngineError } from "../../lib/errors.ts";
import { evalCel } from "../../lib/expr/cel.ts";
import { evaluateSource } from "../../lib/expr/mapping.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";
import type { ActionHandler } from "./types.ts";

/** Analytics Engine takes at most 20 blobs per data point; two are ours (name, run id). */
export const MAX_DIMENSIONS = 18;

/** Analytics Engine's limit on the total size of a data point's blobs. */
export const MAX_BLOB_BYTES = 16 * 1024;

/**
 * `metric`: writes one Analytics Engine data point to the `METRICS` dataset.
 *
 * - `value`: a number, or `{ "expr": "<CEL over input>" }` that yields one.
 * - `dimensions`: `{ name: <source> }`, each source evaluated over `{ input }`
 *   as in a mapping (literal, `$.input…` JSONPath, `{ expr }`, `{ template }`);
 *   non-strings are written as their JSON.
 *
 * The data point: `indexes: [metric_name]`, `doubles: [value]`, `blobs:
 * [metric_name, workflow_run_id, …dimension values in dimension-name order]`
 * (so `blob3` is the alphabetically first dimension). Output `{ metric_name,
 * value, dimensions }`, what was written.
 */
export const metricAction: ActionHandler<"metric"> = {
  async run(action, input, context) {
    const dataset = context.env.METRICS;
    if (dataset === undefined) {
      throw EngineError.terminal(
        "metric.no_binding",
        'metric actions need the Analytics Engine binding "METRICS", which this Worker does not have',
      );
    }
    const { metric_name: name, value: source, dimensions: sources } = action.implementation;
    const value = typeof source === "number" ? source : evalCel(source.expr, { input });
    if (typeof value !== "number" || !Number.isFinite(value)) {
      throw EngineError.terminal(
        "metric.invalid_value",
        `the value of metric ${name} must be a finite number, got ${JSON.stringify(value) ?? String(value)}`,
      );
    }
    const dimensions = evaluateDimensions(sources ?? {}, input);
    const names = Object.keys(dimensions).sort();
    if (names.length > MAX_DIMENSIONS) {
      throw EngineError.terminal(
        "metric.too_many_dimensions",
        `metric ${name} has ${names.length} dimensions; Analytics Engine allows ${MAX_DIMENSIONS} besides the name and run id`,
      );
    }
    const blobs = [name, context.payload.workflow_run_id, ...names.map((dimension) => dimensions[dimension] ?? "")];
    const size = blobs.reduce((total, blob) => total + new TextEncoder().encode(blob).byteLength, 0);
    if (size > MAX_BLOB_BYTES) {
      throw EngineError.terminal(
        "metric.too_large",
        `metric ${name}'s dimensions take ${size} bytes; Analytics Engine allows ${MAX_BLOB_BYTES}`,
      );
    }
    dataset.writeDataPoint({ indexes: [name], doubles: [value], blobs });
    context.note?.({ dataset: "METRICS", metric_name: name, data_points: 1, dimensions: names.length });
    return { metric_name: name, value, dimensions };
  },
};

function evaluateDimensions(sources: JsonObject, input: Json): Record<string, string> {
  const dimensions: Record<string, string> = {};
  for (const [name, source] of Object.entries(sources)) {
    const result = evaluateSource(source, { input });
    if (result.found) {
      dimensions[name] = typeof result.value === "string" ? result.value : JSON.stringify(result.value);
    }
  }
  return dimensions;
}
