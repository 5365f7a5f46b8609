import { EngineError } from "../lib/errors.ts";
import type { BlobRef } from "../schemas/blobs.ts";
import type { Json } from "../schemas/common.ts";
import { isBlobRef } from "./ref.ts";
import { getBlob, putBlob, type BlobHolder } from "./store.ts";

/**
 * Where values become blobs and blobs become values again (docs/architecture.md, "Blobs").
 *
 * A value whose canonical JSON is over the threshold (BLOB_THRESHOLD_BYTES, UTF-8 bytes)
 * is offloaded largest member first, so that the small structure around a large part
 * stays inline and readable: an `http` result `{ status, headers, body }` keeps `status`
 * and `headers` and its `body` becomes a reference. The rule, applied from the top:
 *
 * - a value within the threshold, or already a reference, stays as it is;
 * - a string, number or boolean over it becomes a blob;
 * - an object or array over it keeps its members, and the largest of them, from the
 *   largest down while the whole is still over, are offloaded: a member over the
 *   threshold by this same rule (it keeps its own structure), a smaller one stored whole;
 *   members under {@link MIN_OFFLOADED_MEMBER_BYTES} are never offloaded one by one;
 * - if that cannot bring it under the threshold (a long list of small items), the value
 *   is stored whole as one blob.
 */

/** The threshold when BLOB_THRESHOLD_BYTES is unset: 64 KiB. */
export const DEFAULT_BLOB_THRESHOLD_BYTES = 65_536;
/** A member smaller than this is not offloaded on its own (its reference would save little). */
export const MIN_OFFLOADED_MEMBER_BYTES = 1_024;
/**
 * The most bytes of blobs one reader resolves (an executor task's payload, a
 * coordinator's decision): a Worker has 128 MB of memory, and a value read is held as
 * its JSON text and its parsed form at once.
 */
export const MAX_RESOLVED_BLOB_BYTES = 48 * 1024 * 1024;
/**
 * The largest value offloaded (its canonical JSON, UTF-8): a task's output, an
 * input, an answer. A larger one is refused (`blob.too_large`; a task's output
 * fails its task with `task.output_too_large`).
 */
export const MAX_VALUE_BYTES = 48 * 1024 * 1024;

/** The deployment's threshold: BLOB_THRESHOLD_BYTES when it is a whole number ≥ 1, else the default. */
export function blobThreshold(env: Pick<Env, "BLOB_THRESHOLD_BYTES">): number {
  const raw = env.BLOB_THRESHOLD_BYTES?.trim();
  const parsed = raw === undefined || raw === "" ? Number.NaN : Number(raw);
  return Number.isSafeInteger(parsed) && parsed >= 1 ? parsed : DEFAULT_BLOB_THRESHOLD_BYTES;
}

/** The UTF-8 length of a string (without encoding it). */
export function utf8Length(text: string): number {
  let bytes = text.length;
  for (let i = 0; i < text.length; i += 1) {
    const unit = text.charCodeAt(i);
    if (unit >= 0xd800 && unit <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        bytes += 2;
        i += 1;
        continue;
      }
    }
    bytes += unit < 0x80 ? 0 : unit < 0x800 ? 1 : 2;
  }
  return bytes;
}

/**
 * The UTF-8 size of a value's canonical JSON. Canonical JSON differs from
 * `JSON.stringify` only in the order of members, so their lengths are equal.
 */
export function jsonSize(value: unknown): number {
  return utf8Length(JSON.stringify(value) ?? "null");
}

/** Whether a value is surely within `threshold` (no more than 3 UTF-8 bytes per UTF-16 unit), or else its size. */
function sizeOver(value: unknown, threshold: number): number | null {
  const text = JSON.stringify(value) ?? "null";
  if (text.length * 3 <= threshold) {
    return null;
  }
  const size = utf8Length(text);
  return size <= threshold ? null : size;
}

/** Stores one value as a blob; answers its reference. */
export type BlobWriter = (value: Json) => Promise<BlobRef>;

/** The value with its large parts as blob references, by the rule above. */
export async function offloadValue(value: Json, threshold: number, write: BlobWriter): Promise<Json> {
  const size = sizeOver(value, threshold);
  if (size !== null && size > MAX_VALUE_BYTES) {
    throw EngineError.terminal(
      "blob.too_large",
      `the value is ${size} bytes of JSON; the most a value may be is ${MAX_VALUE_BYTES} bytes`,
    );
  }
  return size === null ? value : place(value, size, threshold, write);
}

/**
 * A record whose shape a schema fixes (a task context's `state`): offloaded as by
 * {@link offloadValue}, except that it is never itself replaced by a reference.
 */
export async function offloadMembers(
  value: Record<string, Json>,
  threshold: number,
  write: BlobWriter,
): Promise<Record<string, Json>> {
  const size = sizeOver(value, threshold);
  if (size === null) {
    return value;
  }
  return ((await structure(value, size, threshold, write, true)) ?? value) as Record<string, Json>;
}

async function place(value: Json, size: number, threshold: number, write: BlobWriter): Promise<Json> {
  if (size <= threshold || isBlobRef(value)) {
    return value;
  }
  if (typeof value !== "object" || value === null) {
    return write(value);
  }
  return (await structure(value, size, threshold, write)) ?? write(value);
}

/** An object or array with its largest members offloaded until it fits; null when that is not enough. */
async function structure(
  value: Json[] | { [key: string]: Json },
  size: number,
  threshold: number,
  write: BlobWriter,
  keepShape = false,
): Promise<Json | null> {
  const copy: Record<string, Json> | Json[] = Array.isArray(value) ? [...value] : { ...value };
  const members: [string, Json][] = Array.isArray(value) ? value.map((m, i) => [String(i), m]) : Object.entries(value);
  const ranked = members.map(([key, member]) => ({ key, member, size: jsonSize(member) }));
  ranked.sort((a, b) => b.size - a.size);
  let total = size;
  for (const { key, member, size: memberSize } of ranked) {
    if (total <= threshold || memberSize < MIN_OFFLOADED_MEMBER_BYTES) {
      break;
    }
    const replaced = memberSize > threshold ? await place(member, memberSize, threshold, write) : await write(member);
    (copy as Record<string, Json>)[key] = replaced;
    total += jsonSize(replaced) - memberSize;
  }
  return total <= threshold || keepShape ? (copy as Json) : null;
}

/** A writer that stores each value as a blob held by `holder`. */
export function blobWriter(env: Env, holder: BlobHolder): BlobWriter {
  return (value) => putBlob(env, value, holder);
}

/** Offloads a value for a run: the deployment's threshold, blobs held by the run. */
export function offloadForRun(env: Env, value: Json, holder: BlobHolder): Promise<Json> {
  return offloadValue(value, blobThreshold(env), blobWriter(env, holder));
}

/**
 * The value with every blob reference in it replaced by what it stands for
 * (read from R2, each blob once, checked against its digest: `blob.corrupt`),
 * within `budget` bytes of blobs read (`blob.too_large` beyond). A value
 * without references is answered as it is, not copied.
 */
export async function resolveRefs(
  env: Env,
  value: Json,
  budget: { left: number } = { left: MAX_RESOLVED_BLOB_BYTES },
  cache: Map<string, Json> = new Map(),
): Promise<Json> {
  if (typeof value !== "object" || value === null) {
    return value;
  }
  if (isBlobRef(value)) {
    return resolveRef(env, value, budget, cache);
  }
  let copy: Json[] | Record<string, Json> | null = null;
  const entries: [string | number, Json][] = Array.isArray(value)
    ? value.map((member, index) => [index, member])
    : Object.entries(value);
  for (const [key, member] of entries) {
    const resolved = await resolveRefs(env, member, budget, cache);
    if (resolved !== member) {
      copy ??= Array.isArray(value) ? [...value] : { ...value };
      (copy as Record<string | number, Json>)[key] = resolved;
    }
  }
  return copy ?? value;
}

async function resolveRef(env: Env, ref: BlobRef, budget: { left: number }, cache: Map<string, Json>): Promise<Json> {
  const cached = cache.get(ref.$blob);
  if (cached !== undefined) {
    return cached;
  }
  if (ref.size > budget.left) {
    throw EngineError.terminal(
      "blob.too_large",
      `blob ${ref.$blob} (${ref.size} bytes) is over what is left of the ${MAX_RESOLVED_BLOB_BYTES} bytes of blobs one task may read`,
    );
  }
  budget.left -= ref.size;
  // A blob's value holds no references of its own unless a value with references was stored whole.
  const value = await resolveRefs(env, (await getBlob(env, ref)) as Json, budget, cache);
  cache.set(ref.$blob, value);
  return value;
}
