/**
 * The journal verified in the browser: the project's own verifier
 * (lib/journal, WebCrypto only, the same code as `npm run verify` and the
 * Worker) checks, for the entries exactly as the stream delivered them, the
 * seq order, the hash chain (`prev` = previous `hash`, `hash` = SHA-256 of the
 * RFC 8785 canonical signed fields) and every Ed25519 signature against the
 * keys of `GET /v1/journal-keys` (docs/journal.md#what-is-checked), and
 * each sealed value against its digest, counting the entries verified with
 * their values erased (docs/journal.md#sealed-values-and-erasure).
 */
import { verifyJournal } from "../../lib/journal/envelope.ts";
import type { ReceivedEntry } from "./events.ts";

export type Verification =
  | { state: "waiting" }
  | {
      state: "verified";
      entries: number;
      attested: boolean;
      outcome: string | undefined;
      /** Entries verified with their sealed values erased. */
      erased: number;
    }
  | { state: "failed"; seq: number | null; message: string };

export async function verifyInBrowser(
  runId: string,
  entries: readonly ReceivedEntry[],
  jwks: Promise<unknown>,
): Promise<Verification> {
  if (entries.length === 0) {
    return { state: "waiting" };
  }
  let keys: unknown;
  try {
    keys = await jwks;
  } catch (error) {
    return { state: "failed", seq: null, message: `the keys could not be fetched: ${String(error)}` };
  }
  const report = await verifyJournal(
    entries.map((received) => received.raw),
    keys,
    { runId },
  );
  return report.ok
    ? {
        state: "verified",
        entries: report.entries,
        attested: report.attested,
        outcome: report.outcome,
        erased: report.sealed?.erased.length ?? 0,
      }
    : { state: "failed", seq: report.seq, message: report.message };
}

/**
 * The line the run page shows: "verified · 14 entries · attested completed"
 * (with "· values erased in 5 entries" after an erasure), or the first entry that fails.
 */
export function verificationText(verification: Verification): string {
  switch (verification.state) {
    case "waiting":
      return "verifying…";
    case "verified":
      return (
        `verified · ${verification.entries} ${verification.entries === 1 ? "entry" : "entries"}` +
        (verification.attested ? ` · attested ${verification.outcome ?? ""}` : " · not attested yet") +
        (verification.erased > 0
          ? ` · values erased in ${verification.erased} ${verification.erased === 1 ? "entry" : "entries"}`
          : "")
      );
    case "failed":
      return `not verified: ${verification.message}`;
  }
}
