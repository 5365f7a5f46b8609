/**
 * The signed journal: RFC 8785 canonical JSON, Ed25519 keys as JWKs, the
 * envelope signer and the offline verifier. Runs unchanged in workerd and in
 * Node ≥ 22 (WebCrypto only). See docs/journal.md.
 */
export { causedBy, describeBy, type CausedEntry } from "./by.ts";
export { canonicalBytes, canonicalJson } from "./canonical.ts";
export { base64Decode, base64UrlDecode, base64UrlEncode, toHex } from "./encoding.ts";
export {
  importSigningKey,
  importVerifyKey,
  isJwks,
  jwkThumbprint,
  readJwks,
  toJwks,
  type JournalSigningKey,
  type WebCryptoKey,
} from "./keys.ts";
export {
  entryHash,
  formatReport,
  signedBytes,
  verifyJournal,
  type EntryFields,
  type VerifyFailureReason,
  type VerifyOptions,
  type VerifyReport,
} from "./envelope.ts";
export { signEntry, signEntryText, type SignedEntryText } from "./sign.ts";
export {
  ATTEST_KIND,
  JournalAttestationBody,
  JournalEntry,
  JournalSignedFields,
  Jwks,
  PublicJwk,
  type AttestationOutcome,
} from "../../schemas/journal.ts";
