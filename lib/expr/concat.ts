import { EngineError } from "../errors.ts";
import type { Json } from "../../schemas/common.ts";

/**
 * `{ "concat": [<source>, …] }`: a string made of its parts' values, each part
 * a mapping source (text, a `$` JSONPath, `{ expr }`, …). It is how a plan's
 * reference embedded in text (`"Shipments of ${step[0].data[0].name}"`)
 * reaches the tool: text and references alternate as parts.
 *
 * A value becomes text as an API parameter wants it: a string as it is, a
 * number or boolean as its JSON text, an array of those joined with `,` (the
 * dependency notation's "S1,S2,S3"). An object, `null`, or an array holding
 * one has no such text: `mapping.not_text`, rather than `[object Object]` or
 * JSON a tool would take for a value. The result is at most
 * {@link MAX_CONCAT_CHARS} characters (`mapping.too_large`), so a wildcard over
 * a large array cannot build an unbounded string.
 */

/** The most characters a `concat` source yields: a request body's limit. */
export const MAX_CONCAT_CHARS = 1_048_576;

/** The parts of a `{ "concat": [...] }` source: an object with exactly that one key, holding an array. */
export function concatPartsOf(source: unknown): readonly unknown[] | undefined {
  if (typeof source !== "object" || source === null || Array.isArray(source)) {
    return undefined;
  }
  const keys = Object.keys(source);
  const parts = (source as Record<string, unknown>).concat;
  return keys.length === 1 && keys[0] === "concat" && Array.isArray(parts) ? parts : undefined;
}

/**
 * The parts' values as one string (see the top of this file).
 * @throws EngineError `mapping.not_text` for an object or `null` (alone or in an array),
 *   `mapping.too_large` past {@link MAX_CONCAT_CHARS} characters.
 */
export function concatText(values: readonly Json[]): string {
  let text = "";
  values.forEach((value, index) => {
    const piece = Array.isArray(value)
      ? value.map((item, itemIndex) => scalarText(item, `concat.${index}[${itemIndex}]`)).join(",")
      : scalarText(value, `concat.${index}`);
    if (text.length + piece.length > MAX_CONCAT_CHARS) {
      throw EngineError.terminal(
        "mapping.too_large",
        `the text built from concat would be longer than ${MAX_CONCAT_CHARS} characters`,
      );
    }
    text += piece;
  });
  return text;
}

function scalarText(value: Json, at: string): string {
  if (typeof value === "string") {
    return value;
  }
  if (typeof value === "number" || typeof value === "boolean") {
    return JSON.stringify(value);
  }
  const what = value === null ? "null" : Array.isArray(value) ? "an array" : "an object";
  throw EngineError.terminal(
    "mapping.not_text",
    `${at} is ${what}, which has no text to put in a string (a string, number, boolean or an array of those has)`,
  );
}
