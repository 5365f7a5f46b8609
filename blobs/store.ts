import { toHex } from "../lib/journal/encoding.ts";
import { canonicalBytes } from "../lib/journal/canonical.ts";
import { EngineError } from "../lib/errors.ts";
import { BLOB_JSON_MEDIA_TYPE, type BlobRef } from "../schemas/blobs.ts";
import { blobKey } from "./ref.ts";

/**
 * Blobs in R2 (binding `BLOBS`, keys `sha256/<hex>`) and who holds them (D1
 * table `blob_holders(digest, run_id, workflow_id)`, migrations/0005). A blob
 * is stored once, whatever number of runs hold it; each run that carries a
 * reference to it has a holder row, which is what `GET /v1/blobs/{digest}`
 * checks access against and what keeps the blob when another holder lets go.
 *
 * A blob is only ever used after its bytes hash to its digest: a blob whose
 * bytes do not is `blob.corrupt` (never served, never given to a step).
 */

/** The run a blob is stored for. */
export interface BlobHolder {
  runId: string;
  workflowId: string;
}

/** The SHA-256 of bytes as a blob digest, `sha256:<hex>`. */
export async function blobDigest(bytes: Uint8Array<ArrayBuffer>): Promise<string> {
  return `sha256:${toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", bytes)))}`;
}

/** Stores a JSON value as a blob (its canonical JSON, UTF-8) held by `holder`; answers its reference. */
export async function putBlob(env: Env, value: unknown, holder: BlobHolder): Promise<BlobRef> {
  return putBlobBytes(env, canonicalBytes(value), holder);
}

/**
 * Stores bytes as a blob held by `holder`. The holder row is written first, so
 * a concurrent release (which deletes only blobs nobody holds) sees it; bytes
 * already stored under the digest are not uploaded again.
 */
export async function putBlobBytes(
  env: Env,
  bytes: Uint8Array<ArrayBuffer>,
  holder: BlobHolder,
  mediaType: string = BLOB_JSON_MEDIA_TYPE,
): Promise<BlobRef> {
  const digest = await blobDigest(bytes);
  const ref: BlobRef = { $blob: digest, size: bytes.byteLength };
  if (mediaType !== BLOB_JSON_MEDIA_TYPE) {
    ref.media_type = mediaType;
  }
  await holdBlobs(env, [ref], holder);
  const bucket = env.BLOBS;
  const key = blobKey(digest);
  if ((await bucket.head(key)) === null) {
    await bucket.put(key, bytes, {
      httpMetadata: { contentType: mediaType },
      sha256: digest.slice("sha256:".length),
    });
  }
  return ref;
}

/** Records that `holder` holds these blobs (a run that received references from another: a child's input). */
export async function holdBlobs(env: Env, refs: readonly BlobRef[], holder: BlobHolder): Promise<void> {
  if (refs.length === 0) {
    return;
  }
  const insert = env.RUN_INDEX.prepare(
    "INSERT OR IGNORE INTO blob_holders (digest, run_id, workflow_id) VALUES (?, ?, ?)",
  );
  await env.RUN_INDEX.batch(refs.map((ref) => insert.bind(ref.$blob, holder.runId, holder.workflowId)));
}

/** A blob's bytes and media type, after checking they hash to its digest. */
export interface BlobBytes {
  bytes: Uint8Array<ArrayBuffer>;
  mediaType: string;
}

/**
 * Reads a blob's bytes: `blob.not_found` when R2 has none under the digest,
 * `blob.corrupt` when the bytes it has do not hash to it.
 */
export async function getBlobBytes(env: Env, digest: string): Promise<BlobBytes> {
  const object = await env.BLOBS.get(blobKey(digest));
  if (object === null) {
    throw EngineError.terminal("blob.not_found", `blob ${digest} not found`);
  }
  const bytes = new Uint8Array(await object.arrayBuffer());
  if ((await blobDigest(bytes)) !== digest) {
    throw EngineError.terminal("blob.corrupt", `blob ${digest}: its bytes do not hash to its digest`);
  }
  return { bytes, mediaType: object.httpMetadata?.contentType ?? BLOB_JSON_MEDIA_TYPE };
}

/** Reads the JSON value a reference stands for (checked against its digest, as {@link getBlobBytes}). */
export async function getBlob(env: Env, ref: BlobRef): Promise<unknown> {
  const { bytes } = await getBlobBytes(env, ref.$blob);
  if (bytes.byteLength !== ref.size) {
    throw EngineError.terminal(
      "blob.corrupt",
      `blob ${ref.$blob}: ${bytes.byteLength} bytes, its reference says ${ref.size}`,
    );
  }
  try {
    return JSON.parse(new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(bytes));
  } catch {
    throw EngineError.terminal("blob.corrupt", `blob ${ref.$blob} is not the JSON its reference stands for`);
  }
}

/** The workflows whose runs hold the blob (none: no run holds it). */
export async function blobHolderWorkflows(env: Env, digest: string): Promise<string[]> {
  const rows = await env.RUN_INDEX.prepare("SELECT DISTINCT workflow_id FROM blob_holders WHERE digest = ?")
    .bind(digest)
    .all<{ workflow_id: string }>();
  return rows.results.map((row) => row.workflow_id);
}

/**
 * Gives up one run's holding of its blobs (on delete and on erase): deletes
 * from R2 each blob no other run holds, then removes the run's holder rows.
 * The rows go last, so a release that fails part way leaves them, and the
 * retry (the alarm's, or the operator's second request) finds every blob it
 * still has to delete. Idempotent: a second call finds no rows.
 */
export async function releaseRunBlobs(env: Env, runId: string): Promise<{ deleted: string[]; kept: string[] }> {
  const held = await env.RUN_INDEX.prepare("SELECT digest FROM blob_holders WHERE run_id = ?").bind(runId).all<{
    digest: string;
  }>();
  const deleted: string[] = [];
  const kept: string[] = [];
  const other = env.RUN_INDEX.prepare("SELECT 1 AS held FROM blob_holders WHERE digest = ? AND run_id != ? LIMIT 1");
  for (const { digest } of held.results) {
    if ((await other.bind(digest, runId).first()) === null) {
      await env.BLOBS.delete(blobKey(digest));
      deleted.push(digest);
    } else {
      kept.push(digest);
    }
  }
  await env.RUN_INDEX.prepare("DELETE FROM blob_holders WHERE run_id = ?").bind(runId).run();
  return { deleted, kept };
}
