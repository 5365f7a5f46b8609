// What the tests that kill `wrangler dev` share: a client for one server, a
// poll with a bound, and a run's journal checked against its schema.
import assert from "node:assert/strict";
import { JournalEntry } from "../../lib/journal/index.ts";

/** Bound on any one wait of `until`. */
const WAIT_MS = 60_000;

/**
 * A tiny client for one `wrangler dev`.
 * @param {string} base
 * @param {string} token
 */
export function client(base, token) {
  /**
   * @param {string} method
   * @param {string} path
   * @param {unknown} [body]
   */
  return async (method, path, body) => {
    const response = await fetch(`${base}${path}`, {
      method,
      headers: {
        authorization: `Bearer ${token}`,
        ...(body === undefined ? {} : { "content-type": "application/json" }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(30_000),
    });
    const text = await response.text();
    return { status: response.status, json: text ? JSON.parse(text) : undefined, text };
  };
}

/**
 * Waits until `probe` returns a truthy value (polling), or throws after WAIT_MS.
 * @template T
 * @param {string} what
 * @param {() => Promise<T>} probe
 * @returns {Promise<T>}
 */
export async function until(what, probe) {
  const deadline = Date.now() + WAIT_MS;
  for (;;) {
    const value = await probe();
    if (value) {
      return value;
    }
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

/**
 * A run's whole journal, each entry checked against the journal's schema.
 * @param {ReturnType<typeof client>} api
 * @param {string} runId
 */
export async function journalOf(api, runId) {
  const read = await api("GET", `/v1/runs/${runId}/journal`);
  assert.equal(read.status, 200, read.text);
  return read.json.entries.map((/** @type {unknown} */ entry) => JournalEntry.parse(entry));
}
