import { EngineError } from "../errors.ts";
import type { Json } from "../../schemas/common.ts";

/**
 * `{ "concat": [<source>, …] }`: a string made of its parts' values, each part a mapping
 * source; what a plan's reference embedded in text compiles to. How values become text and
 * what is refused: docs/definitions.md (`concat`).
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
 * The parts' values as one string: a string as it is, a number or boolean as its JSON
 * text, an array of those joined with `,`.
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
