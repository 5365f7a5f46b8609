import { BLOB_DIGEST_PATTERN, type BlobRef } from "../schemas/blobs.ts";

/**
 * Blob references inside JSON values (pure; no bindings). A reference is an
 * object with exactly the members of {@link BlobRef}: `$blob` a digest, `size`
 * a whole number, optionally `media_type` a string.
 */

export type { BlobRef } from "../schemas/blobs.ts";

/** Whether `value` is a blob reference (and not a value that merely has a `$blob` member). */
export function isBlobRef(value: unknown): value is BlobRef {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return false;
  }
  const record = value as Record<string, unknown>;
  if (typeof record.$blob !== "string" || !BLOB_DIGEST_PATTERN.test(record.$blob)) {
    return false;
  }
  if (typeof record.size !== "number" || !Number.isSafeInteger(record.size) || record.size < 0) {
    return false;
  }
  let members = 2;
  if ("media_type" in record) {
    if (typeof record.media_type !== "string" || record.media_type === "") {
      return false;
    }
    members += 1;
  }
  return Object.keys(record).length === members;
}

/** Every blob reference inside a JSON value (deduplicated by digest, in the order first met). */
export function blobRefsIn(value: unknown): BlobRef[] {
  const found = new Map<string, BlobRef>();
  const pending: unknown[] = [value];
  while (pending.length > 0) {
    const next = pending.pop();
    if (typeof next !== "object" || next === null) {
      continue;
    }
    if (isBlobRef(next)) {
      if (!found.has(next.$blob)) {
        found.set(next.$blob, next);
      }
      continue;
    }
    const members = Array.isArray(next) ? next : Object.values(next);
    for (let i = members.length - 1; i >= 0; i -= 1) {
      pending.push(members[i]);
    }
  }
  return [...found.values()];
}

/** Whether a JSON value holds any blob reference (stops at the first). */
export function hasBlobRef(value: unknown): boolean {
  if (typeof value !== "object" || value === null) {
    return false;
  }
  if (isBlobRef(value)) {
    return true;
  }
  const members = Array.isArray(value) ? value : Object.values(value);
  return members.some(hasBlobRef);
}

/** The R2 key of a blob's bytes: `sha256/<hex>`. */
export function blobKey(digest: string): string {
  return `sha256/${digest.slice("sha256:".length)}`;
}
