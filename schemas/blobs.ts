import { z } from "zod";

/** A blob's digest as references and the API name it: `sha256:` and 64 lowercase hex digits. */
export const BLOB_DIGEST_PATTERN = /^sha256:[0-9a-f]{64}$/;

/**
 * A reference to a large value kept once in R2, content-addressed
 * (docs/journal.md, "Blobs"): it stands in a run's state and journal bodies
 * where the value would. `$blob` is the SHA-256 of the value's bytes (the
 * value's canonical JSON, UTF-8), `size` their length, `media_type` theirs
 * when not `application/json`. Exactly these members: an object with any other
 * member is a value, not a reference.
 */
export const BlobRef = z.strictObject({
  $blob: z.string().regex(BLOB_DIGEST_PATTERN),
  size: z.number().int().min(0),
  media_type: z.string().min(1).optional(),
});
export type BlobRef = z.infer<typeof BlobRef>;

/** The media type of a blob whose bytes are a value's canonical JSON. */
export const BLOB_JSON_MEDIA_TYPE = "application/json";
