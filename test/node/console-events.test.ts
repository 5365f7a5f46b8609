// The console's event-stream follower (console/src/events.ts) against a real
// HTTP server on 127.0.0.1 speaking the API's SSE format: it sends the bearer
// token as a header, resumes with Last-Event-ID when a stream ends before the
// attestation (the API closes streams after 5 minutes), stops at the
// attestation, and gives up on a 4xx. The browser itself is exercised by
// test/e2e/console.test.mjs; here only `fetch`'s base address and
// sessionStorage, which Node lacks, are provided.
import { createServer, type IncomingHttpHeaders, type Server } from "node:http";
import type { AddressInfo } from "node:net";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { ApiError, saveToken } from "../../console/src/api.ts";
import { followJournal, type ReceivedEntry } from "../../console/src/events.ts";

let server: Server;
let origin = "";
const seen: IncomingHttpHeaders[] = [];
const urls: string[] = [];

function entry(seq: number, kind: string): string {
  const data = JSON.stringify({ seq, run_id: "run_x", kind, at: "2026-01-01T00:00:00.000Z", body: { n: seq } });
  return `id: ${seq}\nevent: ${kind}\ndata: ${data}\n\n`;
}

beforeAll(async () => {
  const store = new Map<string, string>();
  Object.assign(globalThis, {
    sessionStorage: {
      getItem: (key: string) => store.get(key) ?? null,
      setItem: (key: string, value: string) => store.set(key, value),
      removeItem: (key: string) => store.delete(key),
    },
    window: new EventTarget(),
  });
  server = createServer((req, res) => {
    seen.push(req.headers);
    urls.push(req.url ?? "");
    if (req.url === "/v1/runs/run_missing/events") {
      res.writeHead(404, { "content-type": "application/json" });
      res.end(JSON.stringify({ error: { code: "run.not_found", message: "no run run_missing" } }));
      return;
    }
    res.writeHead(200, { "content-type": "text/event-stream" });
    // The first connection ends before the attestation; the next one resumes after its last id.
    if (req.headers["last-event-id"] === "0") {
      res.end(`: keep-alive\n\n${entry(1, "run.created")}${entry(2, "run.status")}`);
    } else {
      res.end(entry(3, "attest"));
    }
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  origin = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  const realFetch = globalThis.fetch;
  // The console calls the API by path, as a page does on its own origin.
  globalThis.fetch = (input, init) => realFetch(typeof input === "string" ? `${origin}${input}` : input, init);
  saveToken("secret-token");
});

afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

describe("followJournal", () => {
  test("resumes after the last seq when a stream ends early, stops at the attestation, token in a header only", async () => {
    seen.length = 0;
    urls.length = 0;
    const received: ReceivedEntry[] = [];
    const errors: unknown[] = [];
    await followJournal("run_x", {
      after: 0,
      signal: new AbortController().signal,
      onEntries: (batch) => received.push(...batch),
      onError: (error) => errors.push(error),
    });
    expect(received.map((r) => [r.entry.seq, r.entry.kind])).toEqual([
      [1, "run.created"],
      [2, "run.status"],
      [3, "attest"],
    ]);
    expect(received[0]?.raw).toEqual(JSON.parse(entry(1, "run.created").split("data: ")[1] ?? ""));
    expect(seen.map((h) => h["last-event-id"])).toEqual(["0", "2"]);
    expect(seen.map((h) => h.authorization)).toEqual(["Bearer secret-token", "Bearer secret-token"]);
    expect(urls.every((url) => !url.includes("secret-token"))).toBe(true);
    expect(errors).toEqual([]);
  });

  test("a 4xx ends the follow with the API's error, without retrying", async () => {
    seen.length = 0;
    const errors: unknown[] = [];
    await followJournal("run_missing", {
      after: 0,
      signal: new AbortController().signal,
      onEntries: () => {},
      onError: (error) => errors.push(error),
    });
    expect(seen).toHaveLength(1);
    expect(errors).toHaveLength(1);
    expect(errors[0]).toBeInstanceOf(ApiError);
    expect((errors[0] as ApiError).code).toBe("run.not_found");
  });
});
