/**
 * The run page of a deleted run (docs/definitions.md, "Retention"): every
 * route of the run answers 410 `run.deleted`, whose message says when it was
 * deleted. The journal may outlive the run in its archive: when
 * `GET /v1/runs/{id}/journal` still answers, it is shown and verified in this
 * browser as a live run's is.
 */
import { useEffect, useState } from "preact/hooks";
import { ApiError, apiFetch, encodeSegment } from "./api.ts";
import type { ReceivedEntry } from "./events.ts";
import { JournalTimeline } from "./journal-timeline.tsx";
import { RawEntry } from "./schemas.ts";
import { ErrorNote, Section, StatusBadge } from "./ui.tsx";
import { verificationText, verifyInBrowser, type Verification } from "./verify.ts";

/** Whether the API said the run was deleted. */
export function isRunDeleted(error: unknown): error is ApiError {
  return error instanceof ApiError && error.code === "run.deleted";
}

/** What is left to show: the archived journal and its verification, none (410), or an error reading it. */
type Archive =
  | { state: "reading" }
  | { state: "none" }
  | { state: "archived"; entries: ReceivedEntry[]; verification: Verification }
  | { state: "error"; error: unknown };

export function DeletedRunPage(props: { runId: string; error: ApiError }) {
  const archive = useArchivedJournal(props.runId);
  return (
    <>
      <h1 class="mono run-id">{props.runId}</h1>
      <p class="deleted-run" role="status">
        <StatusBadge status="deleted" /> {sentenceOf(props.error.message)}: its state, nodes and gates are gone. The run
        list keeps its row.
      </p>
      <ArchiveSection archive={archive} />
    </>
  );
}

/** The server's message, as a sentence: "Run run_… was deleted at 2026-…Z". */
function sentenceOf(message: string): string {
  return message.charAt(0).toUpperCase() + message.slice(1);
}

function ArchiveSection(props: { archive: Archive }) {
  const { archive } = props;
  if (archive.state === "reading") {
    return <p class="muted">Reading the archived journal…</p>;
  }
  if (archive.state === "none") {
    return <p class="muted">Its journal was not archived: it was deleted with the run.</p>;
  }
  if (archive.state === "error") {
    return <ErrorNote error={archive.error} />;
  }
  return (
    <>
      <p class={`verify verify-${archive.verification.state}`} data-state={archive.verification.state} role="status">
        archived journal · {verificationText(archive.verification)}
      </p>
      <Section title={`Archived journal (${archive.entries.length})`}>
        <JournalTimeline entries={archive.entries} />
      </Section>
    </>
  );
}

/** Reads the archived journal once and verifies it against the published keys. */
function useArchivedJournal(runId: string): Archive {
  const [archive, setArchive] = useState<Archive>({ state: "reading" });
  useEffect(() => {
    readArchive(runId).then(setArchive, (error: unknown) => setArchive({ state: "error", error }));
  }, [runId]);
  return archive;
}

async function readArchive(runId: string): Promise<Archive> {
  let body: unknown;
  try {
    body = await (await apiFetch(`/v1/runs/${encodeSegment(runId)}/journal`)).json();
  } catch (error) {
    if (isRunDeleted(error)) {
      return { state: "none" };
    }
    throw error;
  }
  const raws =
    typeof body === "object" && body !== null && "entries" in body && Array.isArray(body.entries) ? body.entries : [];
  const entries = raws.map((raw: unknown, index): ReceivedEntry => {
    const parsed = RawEntry.safeParse(raw);
    // An entry that does not parse is still kept, as received: the verifier then names it.
    return { raw, entry: parsed.success ? parsed.data : { seq: index + 1, kind: "?", at: "", body: {} } };
  });
  const jwks = apiFetch("/v1/journal-keys").then((res) => res.json() as Promise<unknown>);
  return { state: "archived", entries, verification: await verifyInBrowser(runId, entries, jwks) };
}
