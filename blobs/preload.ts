import { ensureEngineError, EngineError } from "../lib/errors.ts";
import type { BlobLookup } from "../lib/expr/blob-scope.ts";
import type { Json } from "../schemas/common.ts";
import { MAX_RESOLVED_BLOB_BYTES, resolveRefs } from "./offload.ts";
import { blobRefsIn } from "./ref.ts";
import { getBlob } from "./store.ts";

/**
 * The blobs `values` refer to, read ahead, as a {@link BlobLookup} for pure code that
 * cannot wait on R2 (an event hub planning what its triggers start): expressions then
 * read into the values while a mapping that takes a reference whole keeps it. Null when
 * the values hold no reference. A blob that cannot be read (corrupt, missing, over
 * {@link MAX_RESOLVED_BLOB_BYTES} in all) fails whatever reads it with that error.
 */
export async function preloadBlobs(env: Env, values: readonly unknown[]): Promise<BlobLookup | null> {
  const refs = [...new Map(values.flatMap((value) => blobRefsIn(value)).map((ref) => [ref.$blob, ref])).values()];
  if (refs.length === 0) {
    return null;
  }
  const read = new Map<string, Json>();
  const failed = new Map<string, EngineError>();
  const budget = { left: MAX_RESOLVED_BLOB_BYTES };
  for (const ref of refs) {
    try {
      if (ref.size > budget.left) {
        throw EngineError.terminal(
          "blob.too_large",
          `blob ${ref.$blob} is over what is left to read (${budget.left} bytes)`,
        );
      }
      budget.left -= ref.size;
      read.set(ref.$blob, await resolveRefs(env, (await getBlob(env, ref)) as Json, budget));
    } catch (thrown) {
      failed.set(ref.$blob, ensureEngineError(thrown, "blob.unavailable"));
    }
  }
  return {
    cached(ref) {
      const failure = failed.get(ref.$blob);
      if (failure !== undefined) {
        throw failure;
      }
      return read.get(ref.$blob);
    },
    need() {},
  };
}
