import { ATTEST_KIND, ERASED_KIND } from "../schemas/journal.ts";
import type { Context } from "hono";
import { streamSSE } from "hono/streaming";
import { EngineError } from "../lib/errors.ts";
import type { Principal } from "../schemas/auth.ts";
import { runEvents } from "./service.ts";

/** How long one long poll of the coordinator waits for new entries. */
const POLL_WAIT_MS = 20_000;
/** A stream ends after this long; `EventSource` reconnects with `Last-Event-ID` and loses nothing. */
const STREAM_LIFETIME_MS = 5 * 60_000;

/**
 * `GET /v1/runs/{id}/events`: the run's journal as Server-Sent Events, one
 * event per entry (`id` = seq, `event` = kind, `data` = the signed entry).
 * Resumable: `Last-Event-ID` (or `?after=`) names the last seq seen. The
 * stream closes after the attestation that ends the run, or after its erasure.
 */
export async function streamRunEvents(
  c: Context<{ Bindings: Env; Variables: { principal: Principal } }>,
  runId: string,
): Promise<Response> {
  let after = Number(c.req.header("last-event-id") ?? c.req.query("after") ?? "0");
  if (!Number.isInteger(after) || after < 0) {
    throw EngineError.terminal("request.invalid_cursor", "Last-Event-ID must be a journal seq");
  }
  // Fails with 404 before the stream opens when the run does not exist.
  const first = await runEvents(c.env, runId, after, 0);
  return streamSSE(c, async (stream) => {
    const started = Date.now();
    let entries = first;
    for (;;) {
      for (const entry of entries) {
        await stream.writeSSE({ id: String(entry.seq), event: entry.kind, data: JSON.stringify(entry) });
        after = entry.seq;
      }
      const last = entries.at(-1)?.kind;
      // Nothing follows an erasure; an attestation may yet be followed (a redrive, a compensation, an erasure).
      const ended =
        last === ERASED_KIND || (last === ATTEST_KIND && (await runEvents(c.env, runId, after, 0)).length === 0);
      if (ended || stream.aborted || Date.now() - started > STREAM_LIFETIME_MS) {
        return;
      }
      entries = await runEvents(c.env, runId, after, POLL_WAIT_MS);
      if (entries.length === 0) {
        await stream.write(": keep-alive\n\n");
      }
    }
  });
}
