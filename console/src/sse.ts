/**
 * A Server-Sent Events parser (the WHATWG "event stream interpretation"),
 * fed with decoded text as it arrives. The console reads `GET
 * /v1/runs/{id}/events` with `fetch`, because `EventSource` cannot send the
 * bearer token in a header, and the token must never go in a URL.
 */

/** One dispatched event: `id` is the last id seen (the entry's `seq`), `event` its type, `data` its joined data lines. */
export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
}

/** Splits a stream of text chunks into events; a line may be cut anywhere between chunks. */
export class SseParser {
  private pending = "";
  private data: string[] = [];
  private event = "";
  private lastId: string | null = null;

  /** Feeds the next chunk; returns the events it completed, in order. */
  push(chunk: string): SseEvent[] {
    this.pending += chunk;
    const events: SseEvent[] = [];
    for (;;) {
      const match = /\r\n|\r|\n/.exec(this.pending);
      // A lone "\r" at the end may be the first half of "\r\n": wait for the next chunk.
      if (match === null || (match[0] === "\r" && match.index === this.pending.length - 1)) {
        return events;
      }
      const line = this.pending.slice(0, match.index);
      this.pending = this.pending.slice(match.index + match[0].length);
      const event = this.line(line);
      if (event !== null) {
        events.push(event);
      }
    }
  }

  private line(line: string): SseEvent | null {
    if (line === "") {
      return this.dispatch();
    }
    if (line.startsWith(":")) {
      return null; // a comment, e.g. the server's keep-alive
    }
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (field === "data") {
      this.data.push(value);
    } else if (field === "event") {
      this.event = value;
    } else if (field === "id" && !value.includes("\0")) {
      this.lastId = value;
    }
    return null;
  }

  private dispatch(): SseEvent | null {
    const data = this.data;
    const event = this.event;
    this.data = [];
    this.event = "";
    if (data.length === 0) {
      return null;
    }
    return { id: this.lastId, event: event === "" ? "message" : event, data: data.join("\n") };
  }
}
