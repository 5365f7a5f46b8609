import type { Json } from "../schemas/common.ts";
import { sha256Hex } from "./ids.ts";
import { canonicalJson } from "./journal/canonical.ts";

/** Arguments and results are journaled whole up to this many characters of canonical JSON. */
export const MAX_RECORDED_CHARS = 4_096;
/** Beyond it, this many characters of the canonical JSON go in as a preview. */
export const RECORDED_PREVIEW_CHARS = 512;

/**
 * A value as a step record keeps it: whole when its canonical JSON (RFC 8785,
 * as the journal signs) is at most MAX_RECORDED_CHARS, else
 * `{ sha256, chars, preview }`: the hex SHA-256 of that canonical JSON, its
 * length and its first RECORDED_PREVIEW_CHARS characters. Whoever is shown
 * the full value can check it against the digest.
 */
export async function recordable(value: Json): Promise<Json> {
  const text = canonicalJson(value);
  if (text.length <= MAX_RECORDED_CHARS) {
    return value;
  }
  return { sha256: await sha256Hex(text), chars: text.length, preview: text.slice(0, RECORDED_PREVIEW_CHARS) };
}
