import { EngineError } from "../errors.ts";
import { JournalSignedFields, type JournalEntry } from "../../schemas/journal.ts";
import { canonicalJson, canonicalString } from "./canonical.ts";
import type { EntryFields } from "./envelope.ts";
import { base64UrlEncode, toHex } from "./encoding.ts";
import type { JournalSigningKey } from "./keys.ts";
import { newSalt, sealBody } from "./seal.ts";

/** Members to seal as an entry is signed (lib/journal/seal.ts): their pointers, and the salt (absent: a fresh one). */
export interface SealOptions {
  seal?: readonly string[];
  salt?: Uint8Array;
}

/** The signed fields but the body, checked when signing (the body is checked by canonicalization). */
const JournalHeaderFields = JournalSignedFields.omit({ body: true });

/**
 * Signs one journal entry. The returned entry's fields are exactly what was
 * signed (the body as its canonical JSON reads back: members whose value is
 * `undefined` dropped, `toJSON` applied), so storing it as JSON and verifying
 * it later gives the same hash.
 *
 * @throws EngineError `journal.invalid_entry` when a field is out of contract
 *   (seq < 1, `at` not ISO-8601, `prev` not a hash or not null, …), or
 *   `journal.not_canonicalizable` when the body is not JSON.
 */
export async function signEntry(
  key: JournalSigningKey,
  fields: EntryFields,
  options: SealOptions = {},
): Promise<JournalEntry> {
  const { header, bodyText, hash, sig } = await signParts(key, fields, options);
  const { seq, run_id, kind, at, prev } = header;
  const body = JSON.parse(bodyText) as JournalEntry["body"];
  return { seq, run_id, kind, at, body, prev, hash, sig, kid: key.kid }; // the envelope's order
}

/** A signed entry as a journal stores it: its JSON text, with the fields its writer reads. */
export interface SignedEntryText {
  seq: number;
  kind: string;
  hash: string;
  /** The entry as JSON, members in envelope order, the body as it was signed: what `JSON.stringify` of {@link signEntry}'s entry gives, but for the order of a body's integer-like keys. */
  text: string;
}

/**
 * {@link signEntry} for a writer that stores the entry as text: the text is
 * put together from the signed parts, so the entry is neither read back nor
 * written out again (the coordinator signs every entry of every run).
 */
export async function signEntryText(
  key: JournalSigningKey,
  fields: EntryFields,
  options: SealOptions = {},
): Promise<SignedEntryText> {
  const { header, bodyText, hash, sig } = await signParts(key, fields, options);
  const { seq, run_id, kind, at, prev } = header;
  const text =
    `{"seq":${String(seq)},"run_id":${JSON.stringify(run_id)},"kind":${JSON.stringify(kind)},` +
    `"at":${JSON.stringify(at)},"body":${bodyText},"prev":${JSON.stringify(prev)},` +
    `"hash":"${hash}","sig":"${sig}","kid":${JSON.stringify(key.kid)}}`;
  return { seq, kind, hash, text };
}

/**
 * The checked header, the body as it is served (with its sealed values and
 * salt, when `options.seal` names members it has), and the hash and signature
 * of the whole as signed.
 */
async function signParts(
  key: JournalSigningKey,
  fields: EntryFields,
  options: SealOptions,
): Promise<{ header: Omit<EntryFields, "body">; bodyText: string; hash: string; sig: string }> {
  const { seq, run_id, kind, at, body, prev } = fields;
  // The scalar fields go through their schema (unless they plainly fit it: the
  // coordinator signs thousands of entries a run); the body needs no second
  // pass: canonicalJson already refuses anything that is not JSON.
  const parsed = plainHeader(fields) ?? JournalHeaderFields.safeParse({ seq, run_id, kind, at, prev });
  if (!parsed.success || !isPlainObject(body)) {
    const issue = parsed.success ? { path: ["body"], message: "expected a JSON object" } : parsed.error.issues[0];
    throw new EngineError(
      "journal.invalid_entry",
      `cannot sign journal entry seq ${String(seq)}: ${issue === undefined ? "invalid" : `${issue.path.join(".") || "entry"}: ${issue.message}`}`,
    );
  }
  const header = parsed.data;
  const sealed =
    options.seal === undefined || options.seal.length === 0
      ? null
      : await sealBody(body, options.seal, options.salt ?? newSalt());
  const bodyText = sealed === null ? canonicalJson(body, "$.body") : sealed.signedText;
  // JCS({ seq, run_id, kind, at, body, prev }): the members in code-unit order, put together around the body.
  const text =
    `{"at":${canonicalString(header.at, "$.at")},"body":${bodyText},"kind":${canonicalString(header.kind, "$.kind")},` +
    `"prev":${header.prev === null ? "null" : canonicalString(header.prev, "$.prev")},` +
    `"run_id":${canonicalString(header.run_id, "$.run_id")},"seq":${String(header.seq)}}`;
  const signed = new TextEncoder().encode(text);
  const [digest, signature] = await Promise.all([
    crypto.subtle.digest("SHA-256", signed),
    crypto.subtle.sign("Ed25519", key.privateKey, signed),
  ]);
  return {
    header: { seq: header.seq, run_id: header.run_id, kind: header.kind, at: header.at, prev: header.prev },
    bodyText: sealed === null ? bodyText : sealed.servedText,
    hash: toHex(new Uint8Array(digest)),
    sig: base64UrlEncode(new Uint8Array(signature)),
  };
}

/** What an entry hash is: lowercase hex of 32 bytes. */
const HASH_TEXT = /^[0-9a-f]{64}$/;

/**
 * The header as its schema would return it, when every field is of the plain
 * form the coordinator writes (`at` from `toISOString()`), else null: a subset
 * of what the schema accepts, checked without it.
 */
function plainHeader(fields: EntryFields): { success: true; data: Omit<EntryFields, "body"> } | null {
  const { seq, run_id, kind, at, prev } = fields;
  const plain =
    Number.isSafeInteger(seq) &&
    seq >= 1 &&
    typeof run_id === "string" &&
    run_id.length > 0 &&
    typeof kind === "string" &&
    kind.length > 0 &&
    typeof at === "string" &&
    at.length === 24 &&
    at.endsWith("Z") &&
    Number.isFinite(Date.parse(at)) &&
    new Date(at).toISOString() === at &&
    (prev === null || (typeof prev === "string" && HASH_TEXT.test(prev)));
  return plain ? { success: true, data: { seq, run_id, kind, at, prev } } : null;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && Object.prototype.toString.call(value) === "[object Object]";
}
