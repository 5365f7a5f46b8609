import { z } from "zod";
import { JsonValue } from "./common.ts";

/**
 * The signed journal of a run (docs/journal.md, "The envelope", a contract): every entry is the
 * envelope `{ seq, run_id, kind, at, body, prev, hash, sig, kid }` where
 * `hash = hex(SHA-256(JCS({ seq, run_id, kind, at, body, prev })))` and
 * `sig = base64url(Ed25519(JCS(…)))`. See docs/journal.md.
 */

/** Lowercase hexadecimal SHA-256 digest (64 characters). */
export const Sha256Hex = z.string().regex(/^[0-9a-f]{64}$/, "expected 64 lowercase hex characters (SHA-256)");

/** Unpadded base64url (RFC 4648 §5), as used for signatures and JWK members. */
export const Base64Url = z.string().regex(/^[A-Za-z0-9_-]+$/, "expected unpadded base64url");

/** The kind of the terminal attestation entry. */
export const ATTEST_KIND = "attest";
/** A kind that may follow an attestation: a redrive reopens a failed run's journal. */
export const REDRIVE_KIND = "run.redriven";
/**
 * The other kind that may follow an attestation: a failed or cancelled run's
 * compensation opens a section of its own, closed by a new attestation.
 */
export const COMPENSATION_KIND = "compensation.started";

/**
 * The kind of the entry that records a run's erasure: it follows the run's
 * last attestation, and nothing follows it.
 */
export const ERASED_KIND = "erased";

/** One journal entry, exactly the nine envelope fields (extra fields are rejected: they would not be signed). */
export const JournalEntry = z.strictObject({
  seq: z.number().int().min(1).max(Number.MAX_SAFE_INTEGER),
  run_id: z.string().min(1),
  kind: z.string().min(1),
  at: z.iso.datetime({ offset: true }),
  body: z.record(z.string(), JsonValue),
  prev: Sha256Hex.nullable(),
  hash: Sha256Hex,
  sig: Base64Url,
  kid: z.string().min(1),
});
/** One journal entry. */
export type JournalEntry = z.infer<typeof JournalEntry>;

/** The fields covered by the hash and the signature: the entry without `hash`, `sig` and `kid`. */
export const JournalSignedFields = JournalEntry.pick({
  seq: true,
  run_id: true,
  kind: true,
  at: true,
  body: true,
  prev: true,
});
/** The fields covered by the hash and the signature. */
export type JournalSignedFields = z.infer<typeof JournalSignedFields>;

/** Terminal outcomes an attestation can state. */
export const AttestationOutcome = z.enum(["completed", "failed", "cancelled"]);
/** A terminal outcome. */
export type AttestationOutcome = z.infer<typeof AttestationOutcome>;

/**
 * Body of the terminal `attest` entry: the outcome, why, the `seq`s of the
 * entries it rests on, and who created the run. Extra fields are kept.
 */
export const JournalAttestationBody = z.looseObject({
  outcome: AttestationOutcome,
  reason: z.string(),
  cited: z.array(z.number().int().min(1)),
  created_by: z.string(),
});
/** Body of the terminal `attest` entry. */
export type JournalAttestationBody = z.infer<typeof JournalAttestationBody>;

/**
 * Body of the `erased` entry as the verifier reads it: why, the `seq`s of
 * the entries whose sealed values were erased, and the blobs released
 * (`sha256:<hex>`). Extra fields are kept (the engine adds `by`).
 */
export const JournalErasedBody = z.looseObject({
  reason: z.string().min(1),
  seqs: z.array(z.number().int().min(1)),
  blobs: z.array(z.string()),
});
/** Body of the `erased` entry. */
export type JournalErasedBody = z.infer<typeof JournalErasedBody>;

/** A public Ed25519 key as a JWK (RFC 8037), `kid` being its RFC 7638 thumbprint. */
export const PublicJwk = z.looseObject({
  kty: z.literal("OKP"),
  crv: z.literal("Ed25519"),
  x: Base64Url,
  kid: z.string().min(1),
  alg: z.literal("EdDSA"),
  use: z.literal("sig"),
});
/** A public Ed25519 key as a JWK. */
export type PublicJwk = z.infer<typeof PublicJwk>;

/** The JWKS served at `GET /v1/journal-keys`. */
export const Jwks = z.object({ keys: z.array(PublicJwk) });
/** The JWKS served at `GET /v1/journal-keys`. */
export type Jwks = z.infer<typeof Jwks>;

/** The body of `GET /v1/runs/{run_id}/journal`. */
export const JournalResponse = z.object({ entries: z.array(JournalEntry) });
/** The body of `GET /v1/runs/{run_id}/journal`. */
export type JournalResponse = z.infer<typeof JournalResponse>;
