import { generateKeyPairSync } from "node:crypto";
import { describe, it } from "vitest";
import { eraseCommand, verifyCommand } from "../../cli/commands.ts";
import { eraseSealed, importSigningKey, signEntry, toJwks, type JournalEntry } from "../../lib/journal/index.ts";
import { sealedPointersOf } from "../../schemas/journal-bodies.ts";
import { recording } from "./cli-recording.ts";

/** `trellis erase` and `trellis verify` of an erased run, against a recording stand-in for the API (docs/cli.md). */

const RUN = `run_${"ab".repeat(16)}`;

/** A short run's journal as the engine signs it (content members sealed), erased, with its keys. */
async function erasedJournal(): Promise<{ entries: JournalEntry[]; jwks: unknown }> {
  const { privateKey } = generateKeyPairSync("ed25519");
  const key = await importSigningKey(privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"));
  const bodies: [string, Record<string, unknown>][] = [
    ["run.created", { workflow: { id: "w", version: 1 }, input: { email: "ada@example.com" } }],
    ["task.completed", { node: "a", item: null, token: "t", attempt: 1, duration_ms: 1, output: { ok: true } }],
    ["attest", { outcome: "completed", reason: "all nodes settled", cited: [2], created_by: "rpc", output: {} }],
    ["erased", { reason: "the subject asked", seqs: [1, 2, 3], blobs: [] }],
  ];
  const entries: JournalEntry[] = [];
  let prev: string | null = null;
  for (const [index, [kind, body]] of bodies.entries()) {
    const fields = { seq: index + 1, run_id: RUN, kind, at: "2026-11-28T16:00:00.000Z", body, prev };
    const entry = await signEntry(key, fields, { seal: sealedPointersOf(kind, body) });
    entries.push({ ...entry, body: eraseSealed(entry.body).body as JournalEntry["body"] });
    prev = entry.hash;
  }
  return { entries, jwks: toJwks([key.publicJwk]) };
}

describe("trellis erase", () => {
  it("posts the reason and says what was erased", async ({ expect }) => {
    const path = `/v1/runs/${RUN}/erase`;
    const { io, calls, bodies, printed } = recording({
      [path]: { run_id: RUN, status: "completed", erased: { seqs: [1, 2, 3], blobs: ["sha256:00"] } },
    });
    expect(await eraseCommand(io, RUN, "the subject asked")).toBe(0);
    expect(calls).toEqual([`POST ${path}`]);
    expect(bodies).toEqual([{ reason: "the subject asked" }]);
    expect(printed()).toBe(`${RUN}  erased: the values of 3 journal entries, 1 blobs\n`);
  });
});

describe("trellis verify of an erased run", () => {
  it("prints OK with the values erased, and FAIL for a value put back that does not match", async ({ expect }) => {
    const { entries, jwks } = await erasedJournal();
    const ok = recording({ [`/v1/runs/${RUN}/journal`]: { entries }, "/v1/journal-keys": jwks });
    expect(await verifyCommand(ok.io, RUN, undefined)).toBe(0);
    expect(ok.printed()).toBe(
      `OK: 4 entries, run ${RUN}, attested completed\n` +
        "  sealed values: 0 match their digests, 3 erased (verified with values erased: 3 entries)\n" +
        "  seq 1 run.created: erased /input\n" +
        "  seq 2 task.completed: erased /output\n" +
        "  seq 3 attest: erased /output\n" +
        "  erased at seq 4 (2026-11-28T16:00:00.000Z): the subject asked\n",
    );
    const [first, ...rest] = entries;
    const forged = [{ ...first, body: { ...first?.body, input: { email: "eve@example.com" } } }, ...rest];
    const failed = recording({ [`/v1/runs/${RUN}/journal`]: { entries: forged }, "/v1/journal-keys": jwks });
    expect(await verifyCommand(failed.io, RUN, undefined)).toBe(1);
    expect(failed.printed()).toMatch(/^FAIL: entry seq 1 \(index 0\): bad sealed value/);
  });
});
