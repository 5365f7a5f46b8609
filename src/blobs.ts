import { blobHolderWorkflows, getBlobBytes, type BlobBytes } from "../blobs/store.ts";
import { EngineError } from "../lib/errors.ts";
import { BLOB_DIGEST_PATTERN } from "../schemas/blobs.ts";
import type { Principal } from "../schemas/auth.ts";
import { inGrant } from "./access.ts";

/**
 * `GET /v1/blobs/{digest}` (docs/api.md): a blob's bytes, to a principal that may read a
 * run holding it. A blob no run the principal may see holds is 404 `blob.not_found`, as if
 * it did not exist; bytes that do not hash to the digest are 502 `blob.corrupt`, never sent.
 */
export async function readBlob(env: Env, digest: string, principal: Principal): Promise<BlobBytes> {
  if (!BLOB_DIGEST_PATTERN.test(digest)) {
    throw EngineError.terminal(
      "blob.invalid_digest",
      `"${digest.slice(0, 100)}" is not a digest (sha256:<64 hex digits>)`,
    );
  }
  const workflows = await blobHolderWorkflows(env, digest);
  if (!workflows.some((workflow) => inGrant(principal, workflow))) {
    throw EngineError.terminal("blob.not_found", `no blob ${digest}`);
  }
  return getBlobBytes(env, digest);
}
