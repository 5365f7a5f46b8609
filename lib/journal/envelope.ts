import {
  ATTEST_KIND,
  COMPENSATION_KIND,
  ERASED_KIND,
  JournalAttestationBody,
  JournalEntry,
  JournalErasedBody,
  REDRIVE_KIND,
} from "../../schemas/journal.ts";
import { causedBy, type CausedEntry } from "./by.ts";
import { canonicalBytes } from "./canonical.ts";
import { base64UrlDecode, toHex } from "./encoding.ts";
import { readJwks, type WebCryptoKey } from "./keys.ts";
import { checkSealed } from "./seal.ts";

/**
 * The journal envelope (docs/journal.md, "The envelope", a contract):
 *
 * ```
 * signed = JCS({ seq, run_id, kind, at, body, prev })   // RFC 8785, UTF-8
 * hash   = hex(SHA-256(signed))
 * sig    = base64url(Ed25519(private key, signed))
 * entry  = { seq, run_id, kind, at, body, prev, hash, sig, kid }
 * ```
 */

/** What the caller supplies to sign an entry; `body` must be a JSON object. */
export interface EntryFields {
  seq: number;
  run_id: string;
  kind: string;
  /** ISO-8601 timestamp with `Z` or an offset, e.g. `new Date().toISOString()`. */
  at: string;
  body: Record<string, unknown>;
  /** The previous entry's `hash`; `null` for seq 1. */
  prev: string | null;
}

/** Why a journal failed verification; the first problem found wins. */
export type VerifyFailureReason =
  | "malformed"
  | "bad_seq"
  | "wrong_run"
  | "broken_link"
  | "bad_hash"
  | "unknown_kid"
  | "bad_signature"
  | "missing_attestation"
  | "after_attestation"
  | "bad_sealed_value"
  | "after_erasure";

/** An entry whose sealed values were erased (docs/journal.md, "Sealed values and erasure"). */
export interface ErasedValues {
  seq: number;
  kind: string;
  /** The pointers of the values erased. */
  pointers: string[];
}

/** What a journal's sealed members came to: values checked against their digests, and values erased. */
export interface SealedSummary {
  /** Sealed values present and matching their digests. */
  checked: number;
  /** The entries with values erased, in journal order. */
  erased: ErasedValues[];
}

/** The journal's `erased` entry: when, why and by whom its run's values were erased. */
export interface ErasureSummary {
  seq: number;
  at: string;
  reason: string;
  by?: unknown;
}

/**
 * The verdict on a journal. On success, `by` lists who caused each entry
 * whose body carries `by`, in journal order (absent when none does). On
 * failure, `index` is the 0-based position of the offending entry (-1 for a
 * problem with the document as a whole, such as an unusable JWKS), `seq` is
 * that entry's `seq` field when it is an integer, and `message` names both.
 */
export type VerifyReport =
  | {
      ok: true;
      entries: number;
      run_id: string | null;
      attested: boolean;
      outcome?: string;
      by?: CausedEntry[];
      /** Present when some entry seals values. */
      sealed?: SealedSummary;
      /** Present when the journal ends with an `erased` entry. */
      erasure?: ErasureSummary;
    }
  | { ok: false; seq: number | null; index: number; reason: VerifyFailureReason; message: string };

/** Options of {@link verifyJournal}. */
export interface VerifyOptions {
  /** Fail with `missing_attestation` unless the last entry is an `attest` entry. */
  requireAttestation?: boolean;
  /** Fail with `wrong_run` unless the entries belong to this run. */
  runId?: string;
}

/** The exact bytes that are hashed and signed: UTF-8 of `JCS({ seq, run_id, kind, at, body, prev })`. */
export function signedBytes(fields: EntryFields): Uint8Array<ArrayBuffer> {
  const { seq, run_id, kind, at, body, prev } = fields;
  return canonicalBytes({ seq, run_id, kind, at, body, prev });
}

/** `hex(SHA-256(signed))` of an entry's signed fields. */
export async function entryHash(fields: EntryFields): Promise<string> {
  return toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", signedBytes(fields))));
}

const LABELS: Record<VerifyFailureReason, string> = {
  malformed: "malformed",
  bad_seq: "bad seq",
  wrong_run: "wrong run",
  broken_link: "broken link",
  bad_hash: "bad hash",
  unknown_kid: "unknown kid",
  bad_signature: "bad signature",
  missing_attestation: "missing attestation",
  after_attestation: "after attestation",
  bad_sealed_value: "bad sealed value",
  after_erasure: "after erasure",
};

function failure(reason: VerifyFailureReason, index: number, seq: number | null, detail: string): VerifyFailure {
  const where = index < 0 ? "journal" : seq === null ? `entry index ${index}` : `entry seq ${seq} (index ${index})`;
  return { ok: false, seq, index, reason, message: `${where}: ${LABELS[reason]} — ${detail}` };
}

/**
 * The body exactly as given (zod drops a `__proto__` member from records,
 * which would change the hash of a body that has one as an own property).
 * Only called once the entry has passed its schema.
 */
function bodyOf(validated: unknown): JournalEntry["body"] {
  const body: unknown =
    typeof validated === "object" && validated !== null ? Reflect.get(validated, "body") : undefined;
  return body as JournalEntry["body"];
}

function claimedSeq(entry: unknown): number | null {
  const seq: unknown = typeof entry === "object" && entry !== null ? Reflect.get(entry, "seq") : undefined;
  return typeof seq === "number" && Number.isSafeInteger(seq) ? seq : null;
}

/**
 * Verifies a journal offline against a JWKS.
 *
 * `entries` is an array of entries or `{ entries: [...] }` (the body of
 * `GET /v1/runs/{id}/journal`); `jwks` is `{ keys: [...] }` (the body of
 * `GET /v1/journal-keys`). Each entry is checked in order — schema, `seq` =
 * index + 1, same `run_id` as entry 1 (and as `options.runId`), `prev` = the
 * previous `hash` (null for seq 1), `hash` recomputed from the canonical
 * signed fields, `kid` in the JWKS, Ed25519 signature — and no entry may
 * follow an `attest` entry. The first problem is reported.
 */
export async function verifyJournal(
  entries: unknown,
  jwks: unknown,
  options: VerifyOptions = {},
): Promise<VerifyReport> {
  const list: unknown =
    typeof entries === "object" && entries !== null && !Array.isArray(entries)
      ? Reflect.get(entries, "entries")
      : entries;
  if (!Array.isArray(list)) {
    return failure("malformed", -1, null, 'expected an array of entries or { "entries": [...] }');
  }
  let keys: Map<string, WebCryptoKey>;
  try {
    keys = await readJwks(jwks);
  } catch (error) {
    return failure("malformed", -1, null, error instanceof Error ? error.message : String(error));
  }

  let previous: JournalEntry | undefined;
  let runId: string | null = null;
  const caused: CausedEntry[] = [];
  const sealed: SealedSummary = { checked: 0, erased: [] };
  let sealing = false;
  for (const [index, raw] of list.entries()) {
    const entry = readEntry(raw, index, previous);
    // A failure report has no `hash`; every entry that passed its schema has one.
    if (!("hash" in entry)) {
      return entry;
    }
    const expectedRun = index === 0 ? options.runId : runId;
    const chained = checkChain(entry, index, previous, expectedRun);
    if (chained !== null) {
      return chained;
    }
    const seal = await checkSealed(entry.body);
    if (!seal.ok) {
      return failure(seal.reason, index, entry.seq, seal.detail);
    }
    const problem = await checkSignature({ ...entry, body: seal.signed as JournalEntry["body"] }, index, keys);
    if (problem !== null) {
      return problem;
    }
    runId = entry.run_id;
    previous = entry;
    sealing ||= seal.signed !== entry.body || seal.erased.length > 0;
    sealed.checked += seal.present.length;
    if (seal.erased.length > 0) {
      sealed.erased.push({ seq: entry.seq, kind: entry.kind, pointers: seal.erased });
    }
    const who = causedBy(entry.body);
    if (who !== null) {
      caused.push({ seq: entry.seq, kind: entry.kind, by: entry.body["by"], who });
    }
  }
  return conclude(list, caused, sealing ? sealed : null, runId, options);
}

type VerifyFailure = Extract<VerifyReport, { ok: false }>;

/** The schema checks of one entry, in the contract's order: shape, nothing after an attestation, attestation body. */
function readEntry(raw: unknown, index: number, previous: JournalEntry | undefined): JournalEntry | VerifyFailure {
  const parsed = JournalEntry.safeParse(raw);
  if (!parsed.success) {
    const issue = parsed.error.issues[0];
    const detail = issue === undefined ? "not a journal entry" : `${issue.path.join(".") || "entry"}: ${issue.message}`;
    return failure("malformed", index, claimedSeq(raw), detail);
  }
  const entry: JournalEntry = { ...parsed.data, body: bodyOf(raw) };
  const { seq } = entry;
  if (previous?.kind === ERASED_KIND) {
    return failure("after_erasure", index, seq, `the journal was closed by the erasure at seq ${previous.seq}`);
  }
  // An attestation closes the journal; only a redrive of a failed run, or the compensation
  // of a failed or cancelled one, may reopen it, and an erasure may follow it.
  if (previous?.kind === ATTEST_KIND && !mayReopen(previous, entry.kind)) {
    return failure("after_attestation", index, seq, `the journal was closed by the attestation at seq ${previous.seq}`);
  }
  if (entry.kind === ERASED_KIND) {
    return readErasure(entry, index, previous);
  }
  if (entry.kind === ATTEST_KIND) {
    const body = JournalAttestationBody.safeParse(entry.body);
    if (!body.success) {
      const issue = body.error.issues[0];
      return failure(
        "malformed",
        index,
        seq,
        `attestation body ${issue === undefined ? "invalid" : `${issue.path.join(".")}: ${issue.message}`}`,
      );
    }
  }
  return entry;
}

/** An `erased` entry: right after an attestation, with its body's contract. */
function readErasure(
  entry: JournalEntry,
  index: number,
  previous: JournalEntry | undefined,
): JournalEntry | VerifyFailure {
  if (previous?.kind !== ATTEST_KIND) {
    return failure("malformed", index, entry.seq, "an erasure must follow the run's attestation");
  }
  const body = JournalErasedBody.safeParse(entry.body);
  if (!body.success) {
    const issue = body.error.issues[0];
    return failure(
      "malformed",
      index,
      entry.seq,
      `erasure body ${issue === undefined ? "invalid" : `${issue.path.join(".")}: ${issue.message}`}`,
    );
  }
  return entry;
}

/** The chain checks of one entry: its `seq`, its `run_id` and its link to the previous entry. */
function checkChain(
  entry: JournalEntry,
  index: number,
  previous: JournalEntry | undefined,
  expectedRun: string | null | undefined,
): VerifyFailure | null {
  const { seq } = entry;
  if (seq !== index + 1) {
    return failure(
      "bad_seq",
      index,
      seq,
      `found seq ${seq} where seq ${index + 1} was expected (a gap, a reordering or an altered seq)`,
    );
  }
  if (expectedRun !== undefined && expectedRun !== null && entry.run_id !== expectedRun) {
    return failure(
      "wrong_run",
      index,
      seq,
      `run_id ${JSON.stringify(entry.run_id)} is not ${JSON.stringify(expectedRun)}`,
    );
  }
  const expectedPrev = previous === undefined ? null : previous.hash;
  if (entry.prev !== expectedPrev) {
    return failure(
      "broken_link",
      index,
      seq,
      expectedPrev === null
        ? "the first entry must have prev null"
        : `prev does not equal the hash of entry seq ${seq - 1}`,
    );
  }
  return null;
}

/** The cryptographic checks of one entry: canonical bytes, hash, key id, signature. */
async function checkSignature(
  entry: JournalEntry,
  index: number,
  keys: Map<string, WebCryptoKey>,
): Promise<VerifyFailure | null> {
  const { seq } = entry;
  let signed: Uint8Array<ArrayBuffer>;
  try {
    signed = signedBytes(entry);
  } catch (error) {
    // Valid JSON can still hold what JCS refuses, such as a lone surrogate written "\ud800".
    return failure("malformed", index, seq, error instanceof Error ? error.message : String(error));
  }
  const hash = toHex(new Uint8Array(await crypto.subtle.digest("SHA-256", signed)));
  if (hash !== entry.hash) {
    return failure(
      "bad_hash",
      index,
      seq,
      "hash does not match the SHA-256 of the canonical signed fields (the entry was altered)",
    );
  }
  const key = keys.get(entry.kid);
  if (key === undefined) {
    return failure("unknown_kid", index, seq, `kid ${JSON.stringify(entry.kid)} is not in the JWKS`);
  }
  let valid = false;
  try {
    valid = await crypto.subtle.verify("Ed25519", key, base64UrlDecode(entry.sig), signed);
  } catch {
    valid = false;
  }
  if (!valid) {
    return failure("bad_signature", index, seq, `the signature does not verify with key ${entry.kid}`);
  }
  return null;
}

/** The verdict once every entry has passed: the attestation requirement, then the summary. */
function conclude(
  list: unknown[],
  caused: CausedEntry[],
  sealed: SealedSummary | null,
  runId: string | null,
  options: VerifyOptions,
): VerifyReport {
  const count = list.length;
  const last = count === 0 ? undefined : (list[count - 1] as JournalEntry);
  // An erasure follows the attestation: the journal stays attested.
  const erasure = last?.kind === ERASED_KIND ? last : undefined;
  const closing = erasure === undefined ? last : (list[count - 2] as JournalEntry);
  if (options.requireAttestation === true && closing?.kind !== ATTEST_KIND) {
    if (last === undefined) {
      return failure("missing_attestation", -1, null, "the journal is empty, so it has no attestation");
    }
    return failure(
      "missing_attestation",
      count - 1,
      last.seq,
      `the last entry is a ${JSON.stringify(last.kind)} entry, not an attestation (the journal is incomplete or truncated)`,
    );
  }
  const attestation = closing?.kind === ATTEST_KIND ? JournalAttestationBody.safeParse(closing.body) : undefined;
  const erased = erasure === undefined ? undefined : JournalErasedBody.parse(erasure.body);
  return {
    ok: true,
    entries: count,
    run_id: runId,
    attested: attestation?.success === true,
    ...(attestation?.success === true ? { outcome: attestation.data.outcome } : {}),
    ...(caused.length > 0 ? { by: caused } : {}),
    ...(sealed === null ? {} : { sealed }),
    ...(erasure === undefined || erased === undefined
      ? {}
      : {
          erasure: {
            seq: erasure.seq,
            at: erasure.at,
            reason: erased.reason,
            ...(erased.by === undefined ? {} : { by: erased.by }),
          },
        }),
  };
}

/**
 * A report in words, as the verifier commands print it: one line,
 * `OK: 12 entries, run run_x, attested completed` or
 * `FAIL: entry seq 4 (index 3): bad signature — …`; after an `OK` line, one
 * more line per entry that carries `by`, naming who caused it:
 * `  seq 5 gate.answered by token "ops" (tok_…)`.
 */
export function formatReport(report: VerifyReport): string {
  if (!report.ok) {
    return `FAIL: ${report.message}`;
  }
  const run = report.run_id === null ? "no run" : `run ${report.run_id}`;
  const attested = report.attested ? `attested ${report.outcome ?? ""}`.trimEnd() : "not attested";
  const summary = `OK: ${report.entries} ${report.entries === 1 ? "entry" : "entries"}, ${run}, ${attested}`;
  const causes = (report.by ?? []).map((entry) => `  seq ${entry.seq} ${entry.kind} by ${entry.who}`);
  return [summary, ...sealedLines(report), ...causes].join("\n");
}

/** The lines about sealed values: how many were checked, which were erased, and the erasure. */
function sealedLines(report: Extract<VerifyReport, { ok: true }>): string[] {
  const { sealed, erasure } = report;
  if (sealed === undefined && erasure === undefined) {
    return [];
  }
  const erasedCount = (sealed?.erased ?? []).reduce((sum, entry) => sum + entry.pointers.length, 0);
  const lines = [
    `  sealed values: ${sealed?.checked ?? 0} match their digests, ${erasedCount} erased` +
      (erasedCount > 0 ? ` (verified with values erased: ${sealed?.erased.length ?? 0} entries)` : ""),
  ];
  for (const entry of sealed?.erased ?? []) {
    lines.push(`  seq ${entry.seq} ${entry.kind}: erased ${entry.pointers.join(", ")}`);
  }
  if (erasure !== undefined) {
    lines.push(`  erased at seq ${erasure.seq} (${erasure.at}): ${erasure.reason}`);
  }
  return lines;
}

/** Whether an entry of `kind` may follow the attestation `attest` (docs/journal.md, "The attestation", "Sealed values and erasure"). */
function mayReopen(attest: JournalEntry, kind: string): boolean {
  const outcome = attest.body.outcome;
  return (
    kind === ERASED_KIND ||
    (kind === REDRIVE_KIND && outcome === "failed") ||
    (kind === COMPENSATION_KIND && (outcome === "failed" || outcome === "cancelled"))
  );
}
