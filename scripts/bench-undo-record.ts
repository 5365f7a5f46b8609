/**
 * `node scripts/bench-undo-record.ts`: what recording an enqueued undo costs
 * the journal, two ways (docs/journal.md, "Undos on the journal"): a field on
 * the step record inside the `task.completed` entry that is signed anyway,
 * or an entry of its own. Signs with the engine's own modules (WebCrypto
 * Ed25519, RFC 8785, SHA-256); reports, never asserts.
 */
import { generateKeyPairSync } from "node:crypto";
import { importSigningKey, signEntry } from "../lib/journal/index.ts";

const { privateKey } = generateKeyPairSync("ed25519");
const key = await importSigningKey(privateKey.export({ format: "der", type: "pkcs8" }).toString("base64"));
const step = {
  step: "make",
  action: "http make@1",
  status: "completed",
  duration_ms: 12,
  attempts: [{ attempt: 1, duration_ms: 12, call: { method: "GET", url: "http://127.0.0.1:1234/json", status: 200 } }],
};
const undo = { action: "http remove@1", input: { id: "item-123", key: "k-1" } };
const base = { node: "a", item: null, token: "run_x.1", attempt: 1, duration_ms: 12, output: { id: "item-123" } };
const N = 4000;
const prev = "0".repeat(64);
async function time(label: string, fn: (i: number) => Promise<unknown>) {
  for (let i = 0; i < 300; i++) await fn(i);
  const t0 = performance.now();
  for (let i = 0; i < N; i++) await fn(i);
  const us = ((performance.now() - t0) / N) * 1000;
  console.log(`${label}: ${us.toFixed(1)} µs per completed step`);
  return us;
}
const at = new Date().toISOString();
const plain = await time("task.completed, no undo", (i) =>
  signEntry(key, { seq: i + 2, run_id: "run_x", kind: "task.completed", at, body: { ...base, steps: [step] }, prev }),
);
const field = await time("task.completed, undo on its step record", (i) =>
  signEntry(key, {
    seq: i + 2,
    run_id: "run_x",
    kind: "task.completed",
    at,
    body: { ...base, steps: [{ ...step, undo }] },
    prev,
  }),
);
const entry = await time("task.completed + an undo.enqueued entry", async (i) => {
  await signEntry(key, {
    seq: i + 2,
    run_id: "run_x",
    kind: "task.completed",
    at,
    body: { ...base, steps: [step] },
    prev,
  });
  await signEntry(key, {
    seq: i + 3,
    run_id: "run_x",
    kind: "undo.enqueued",
    at,
    body: { node: "a", item: null, step: "make", ...undo },
    prev,
  });
});
console.log(`extra per undo: field ${(field - plain).toFixed(1)} µs, entry ${(entry - plain).toFixed(1)} µs`);
