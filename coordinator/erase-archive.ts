import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { importSigningKey, signEntryText } from "../lib/journal/index.ts";
import { ERASED_KIND, type JournalEntry } from "../schemas/journal.ts";
import { parseJournalBody } from "../schemas/journal-bodies.ts";
import { archiveKeyOf } from "../schemas/retention.ts";
import type { RunErasure } from "../schemas/run.ts";
import { erasedEntryAt, erasedRows, type Erasure } from "./erase.ts";
import { readArchivedJournal } from "./retention.ts";

/**
 * Erasing a deleted run whose journal was archived (docs/security.md,
 * "Erasure"): the archive is the only copy of its values left, so its entries
 * lose their sealed values and salts, and a signed `erased` entry chained to
 * its last entry closes it, as an erasure does to a live run's journal. Its
 * blobs were released when the run was deleted. An archive that ends with an
 * `erased` entry is erased already: its erasure is answered, nothing written.
 */
export async function eraseArchive(
  bucket: R2Bucket,
  secret: string,
  runId: string,
  erasure: Omit<Erasure, "seqs" | "blobs">,
): Promise<RunErasure> {
  const entries = await readArchive(bucket, runId);
  const last = entries.at(-1);
  if (last === undefined) {
    throw new EngineError("retention.archive_corrupt", `the archived journal of ${runId} is empty`);
  }
  if (last.kind === ERASED_KIND) {
    const parsed = parseJournalBody(ERASED_KIND, last.body);
    if (!parsed.success) {
      throw new EngineError("retention.archive_corrupt", `the archived journal of ${runId} ends with a bad erasure`);
    }
    return { at: Date.parse(last.at), ...parsed.data };
  }
  const rows = erasedRows(entries.map((entry) => ({ seq: entry.seq, entry: JSON.stringify(entry) })));
  const done: RunErasure = { ...erasure, seqs: rows.map((row) => row.seq), blobs: [] };
  const unsigned = erasedEntryAt(last.seq + 1, done);
  const signed = await signEntryText(await importSigningKey(secret), { ...unsigned, run_id: runId, prev: last.hash });
  const rewritten = new Map(rows.map((row) => [row.seq, row.entry]));
  const texts = entries.map((entry) => rewritten.get(entry.seq) ?? JSON.stringify(entry));
  await writeArchive(bucket, runId, `{"entries":[${[...texts, signed.text].join(",")}]}`);
  return done;
}

async function readArchive(bucket: R2Bucket, runId: string): Promise<JournalEntry[]> {
  const archived = await readArchivedJournal(bucket, runId);
  if (archived === null) {
    throw EngineError.retryable("retention.archive_unavailable", `the archived journal of ${runId} cannot be read`);
  }
  return archived.entries;
}

async function writeArchive(bucket: R2Bucket, runId: string, text: string): Promise<void> {
  try {
    await bucket.put(archiveKeyOf(runId), text, { httpMetadata: { contentType: "application/json" } });
  } catch (error) {
    throw EngineError.retryable(
      "retention.archive_unavailable",
      `the erased journal could not be archived: ${ensureEngineError(error).message}`,
    );
  }
}
