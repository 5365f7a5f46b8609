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
  type ErasedValues,
  type ErasureSummary,
  type SealedSummary,
  type VerifyFailureReason,
  type VerifyOptions,
  type VerifyReport,
} from "./envelope.ts";
export { signEntry, signEntryText, type SealOptions, type SignedEntryText } from "./sign.ts";
export {
  checkSealed,
  eraseSealed,
  parsePointer,
  SALT_MEMBER,
  sealBody,
  SEALED_MEMBER,
  toPointer,
  type SealedCheck,
} from "./seal.ts";
export {
  ATTEST_KIND,
  ERASED_KIND,
  JournalAttestationBody,
  JournalErasedBody,
  JournalEntry,
  JournalSignedFields,
  Jwks,
  PublicJwk,
  type AttestationOutcome,
} from "../../schemas/journal.ts";
