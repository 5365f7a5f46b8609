import { EngineError } from "../lib/errors.ts";
import { JournalResponse } from "../schemas/journal.ts";
import { archiveKeyOf } from "../schemas/retention.ts";

/**
 * The archived journal of a deleted run (docs/architecture.md, "Retention"),
 * or null when it has none: `{ entries }` as `GET /v1/runs/{id}/journal`
 * answered it before the run was deleted, signed entries unchanged, so it
 * verifies as it did. Parsed as it is read: R2 is a boundary like any other.
 */
export async function readArchivedJournal(env: Env, runId: string): Promise<JournalResponse | null> {
  const object = await env.BLOBS.get(archiveKeyOf(runId));
  if (!object) {
    return null;
  }
  const parsed = JournalResponse.safeParse(await object.json());
  if (!parsed.success) {
    throw new EngineError("retention.archive_corrupt", `the archived journal of ${runId} is not a journal`);
  }
  return parsed.data;
}
