import { sha256Hex } from "../lib/ids.ts";
import { canonicalJson } from "../lib/journal/canonical.ts";
import type { Json } from "../schemas/common.ts";

/**
 * The digest an `event.matched` or `signal.received` entry signs for an
 * event's data: SHA-256 (hex) of its canonical JSON (docs/journal.md), so
 * anyone holding the data can check it against the journal.
 */
export function dataDigest(data: Json): Promise<string> {
  return sha256Hex(canonicalJson(data));
}
