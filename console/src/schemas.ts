/**
 * What the console reads of the event stream: each entry's `seq`, `kind`,
 * `at` and `body`, for display. The entry itself is kept exactly as received
 * and checked by the journal verifier (verify.ts); every other answer is
 * parsed with the API's own schemas (schemas/api.ts).
 */
import { z } from "zod";

export const RawEntry = z.looseObject({
  seq: z.number().int(),
  kind: z.string(),
  at: z.string(),
  body: z.record(z.string(), z.unknown()),
});
export type RawEntry = z.infer<typeof RawEntry>;
