import type { Api } from "./api.ts";

/** A journal entry as the API serves it (docs/journal.md). */
export interface Entry {
  seq: number;
  kind: string;
  at: string;
  body: Record<string, unknown>;
}

/**
 * The run's journal, entry by entry, from `GET /v1/runs/{id}/events`, until
 * the attestation that ends it. A stream the server closes early (it does
 * after a few minutes) is reopened after the last seq seen, so nothing is
 * missed and nothing is shown twice.
 */
export async function* runEntries(api: Api, runId: string, after = 0): AsyncGenerator<Entry> {
  let last = after;
  for (;;) {
    const response = await api.stream(`/v1/runs/${encodeURIComponent(runId)}/events`, {
      "last-event-id": String(last),
    });
    for await (const entry of parseStream(response)) {
      if (entry.seq <= last) {
        continue;
      }
      last = entry.seq;
      yield entry;
      if (entry.kind === "attest") {
        return;
      }
    }
  }
}

/** The `data:` of each Server-Sent Event in the body, parsed. */
async function* parseStream(response: Response): AsyncGenerator<Entry> {
  if (response.body === null) {
    return;
  }
  const decoder = new TextDecoder();
  let buffer = "";
  for await (const chunk of response.body) {
    buffer += decoder.decode(chunk, { stream: true });
    let end = buffer.indexOf("\n\n");
    while (end >= 0) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const data = block
        .split("\n")
        .filter((line) => line.startsWith("data:"))
        .map((line) => line.slice(5).trimStart())
        .join("\n");
      if (data !== "") {
        yield JSON.parse(data) as Entry;
      }
      end = buffer.indexOf("\n\n");
    }
  }
}
