/**
 * Follows a run's journal live: `GET /v1/runs/{id}/events` read with `fetch`
 * and the bearer header (never `EventSource`, which would need the token in
 * the URL), resumed with `Last-Event-ID` after the last entry seen whenever
 * the stream ends before the run's attestation (the server closes a stream
 * after 5 minutes) or the connection drops.
 */
import { ApiError, apiFetch, encodeSegment } from "./api.ts";
import { RawEntry } from "./schemas.ts";
import { SseParser } from "./sse.ts";

/** An entry as received (`raw`, what the verifier checks) and its parsed fields for display. */
export interface ReceivedEntry {
  raw: unknown;
  entry: RawEntry;
}

export interface FollowOptions {
  /** The last `seq` already held; the stream starts after it. */
  after: number;
  signal: AbortSignal;
  /** Called with each batch of new entries, in order. */
  onEntries: (entries: ReceivedEntry[]) => void;
  onError: (error: unknown) => void;
}

const RECONNECT_DELAY_MS = 1_000;

/** Reads the stream until the run is attested or `signal` aborts; reconnects in between. */
export async function followJournal(runId: string, options: FollowOptions): Promise<void> {
  let last = options.after;
  while (!options.signal.aborted) {
    try {
      const ended = await readOnce(runId, last, options, (seq) => {
        last = seq;
      });
      if (ended) {
        return;
      }
    } catch (error) {
      if (options.signal.aborted) {
        return;
      }
      options.onError(error);
      // A refusal (no such run, a bad token) stays a refusal: only network failures and 5xx are retried.
      if (error instanceof ApiError && error.status < 500) {
        return;
      }
    }
    await new Promise((resolve) => setTimeout(resolve, RECONNECT_DELAY_MS));
  }
}

/** One connection; true when it ended right after an attestation (the run is over). */
async function readOnce(
  runId: string,
  after: number,
  options: FollowOptions,
  advance: (seq: number) => void,
): Promise<boolean> {
  const res = await apiFetch(`/v1/runs/${encodeSegment(runId)}/events`, {
    headers: { "last-event-id": String(after), "accept": "text/event-stream" },
    signal: options.signal,
  });
  const reader = res.body?.pipeThrough(new TextDecoderStream()).getReader();
  if (reader === undefined) {
    return false;
  }
  const parser = new SseParser();
  let lastKind = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) {
      return lastKind === "attest" || lastKind === "erased";
    }
    const batch: ReceivedEntry[] = [];
    for (const event of parser.push(value)) {
      const raw: unknown = JSON.parse(event.data);
      const parsed = RawEntry.safeParse(raw);
      // An entry that does not parse is still kept, as received: the verifier then names it.
      const entry = parsed.success ? parsed.data : { seq: Number(event.id), kind: "?", at: "", body: {} };
      batch.push({ raw, entry });
      advance(entry.seq);
      lastKind = entry.kind;
    }
    if (batch.length > 0) {
      options.onEntries(batch);
    }
  }
}
