import { generateKeyPairSync } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  eraseSealed,
  formatReport,
  importSigningKey,
  signEntry,
  signEntryText,
  toJwks,
  verifyJournal,
  type JournalEntry,
  type JournalSigningKey,
  type VerifyReport,
} from "../../lib/journal/index.ts";
import type { Jwks } from "../../schemas/journal.ts";
import { parseJournalBody, sealedPointersOf } from "../../schemas/journal-bodies.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const RUN = "run_sealed";
const SALT = new Uint8Array(16).fill(7);

type Spec = [kind: string, body: Record<string, unknown>, seal?: string[]];

/** A run's journal whose content members are sealed, closed by its attestation. */
const SPECS: Spec[] = [
  ["run.created", { workflow: { id: "signup", version: 1 }, input: { email: "ada@example.com" } }, ["/input"]],
  ["node.started", { node: "welcome", iteration: 1, invocations: 1, skipped: 0 }],
  [
    "task.completed",
    {
      node: "welcome",
      output: { sent: true },
      steps: [{ step: "send", undo: { action: "http unsend@1", input: { id: 4 } } }, { step: "log" }],
    },
    ["/output", "/steps/0/undo/input"],
  ],
  ["gate.answered", { gate_id: "g1", response: false }, ["/response"]],
  ["attest", { outcome: "completed", reason: "all nodes settled", cited: [3, 4], created_by: "token:x" }],
];

let key: JournalSigningKey;
let jwks: Jwks;

async function build(specs: Spec[], salt: Uint8Array | undefined = SALT): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  let prev: string | null = null;
  for (const [index, [kind, body, seal]] of specs.entries()) {
    const fields = { seq: index + 1, run_id: RUN, kind, at: "2026-11-28T16:00:00.000Z", body, prev };
    const entry = await signEntry(key, fields, { ...(seal === undefined ? {} : { seal }), ...(salt ? { salt } : {}) });
    entries.push(entry);
    prev = entry.hash;
  }
  return entries;
}

function erased(entries: JournalEntry[]): JournalEntry[] {
  return entries.map((entry) => ({ ...entry, body: eraseSealed(entry.body).body as JournalEntry["body"] }));
}

function failureOf(report: VerifyReport): { reason: string; seq: number | null } {
  return report.ok ? { reason: "ok", seq: null } : { reason: report.reason, seq: report.seq };
}

beforeAll(async () => {
  const { privateKey } = generateKeyPairSync("ed25519");
  key = await importSigningKey(privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"));
  jwks = toJwks([key.publicJwk]);
});

describe("sealed members", () => {
  it("serves each sealed value in place with its digest and the salt", async () => {
    const [created] = await build(SPECS);
    expect(created?.body).toEqual({
      workflow: { id: "signup", version: 1 },
      input: { email: "ada@example.com" },
      $sealed: { "/input": expect.stringMatching(/^sha256:[0-9a-f]{64}$/) },
      $salt: "BwcHBwcHBwcHBwcHBwcHBw",
    });
  });

  it("signs the same bytes for the same salt, and the text form is the entry", async () => {
    const [, , spec] = SPECS;
    if (spec === undefined) {
      throw new Error("no spec");
    }
    const fields = { seq: 3, run_id: RUN, kind: spec[0], at: "2026-11-28T16:00:00.000Z", body: spec[1], prev: null };
    const first = await signEntryText(key, fields, { seal: spec[2] ?? [], salt: SALT });
    const again = await signEntryText(key, fields, { seal: spec[2] ?? [], salt: SALT });
    const entry = await signEntry(key, fields, { seal: spec[2] ?? [], salt: SALT });
    expect(again.text).toBe(first.text);
    expect(JSON.parse(first.text)).toEqual(entry);
    const other = await signEntryText(key, fields, { seal: spec[2] ?? [] });
    expect(other.hash).not.toBe(first.hash); // a fresh salt, another digest
  });

  it("leaves a body without its sealed members as it is (no $sealed, no $salt)", async () => {
    const [entry] = await build([["node.skipped", { node: "a", reason: "x" }, ["/output"]]]);
    expect(entry?.body).toEqual({ node: "a", reason: "x" });
  });

  it("verifies a journal with its values, counting them", async () => {
    const report = await verifyJournal(await build(SPECS), jwks, { requireAttestation: true });
    expect(report).toMatchObject({ ok: true, entries: 5, attested: true, sealed: { checked: 4, erased: [] } });
  });

  it("verifies the journal with its values erased, listing them", async () => {
    const entries = erased(await build(SPECS));
    expect(entries[2]?.body).toEqual({
      node: "welcome",
      steps: [{ step: "send", undo: { action: "http unsend@1" } }, { step: "log" }],
      $sealed: expect.any(Object) as unknown,
    });
    const report = await verifyJournal(entries, jwks, { requireAttestation: true });
    expect(report).toMatchObject({
      ok: true,
      sealed: {
        checked: 0,
        erased: [
          { seq: 1, kind: "run.created", pointers: ["/input"] },
          { seq: 3, kind: "task.completed", pointers: ["/output", "/steps/0/undo/input"] },
          { seq: 4, kind: "gate.answered", pointers: ["/response"] },
        ],
      },
    });
    expect(formatReport(report)).toContain("sealed values: 0 match their digests, 4 erased");
  });

  it("verifies a journal with some values erased and others present", async () => {
    const entries = await build(SPECS);
    const partial = entries.map((entry) => (entry.seq === 4 ? (erased([entry])[0] ?? entry) : entry));
    const report = await verifyJournal(partial, jwks);
    expect(report).toMatchObject({ ok: true, sealed: { checked: 3, erased: [{ seq: 4, pointers: ["/response"] }] } });
  });

  it("catches a value that does not match its digest", async () => {
    const entries = await build(SPECS);
    const third = entries[2];
    if (third === undefined) {
      throw new Error("no entry");
    }
    third.body = { ...third.body, output: { sent: false } };
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "bad_sealed_value", seq: 3 });
  });

  it("catches a nested value that does not match its digest", async () => {
    const entries = await build(SPECS);
    const text = JSON.stringify(entries).replace('"input":{"id":4}', '"input":{"id":5}');
    expect(failureOf(await verifyJournal(JSON.parse(text), jwks))).toEqual({ reason: "bad_sealed_value", seq: 3 });
  });

  it("catches a changed digest in $sealed (it is signed)", async () => {
    const entries = erased(await build(SPECS));
    const first = entries[0];
    if (first === undefined) {
      throw new Error("no entry");
    }
    first.body = { ...first.body, $sealed: { "/input": `sha256:${"0".repeat(64)}` } };
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "bad_hash", seq: 1 });
  });

  it("catches a sealed member dropped from $sealed (the value would be signed as it is)", async () => {
    const entries = await build(SPECS);
    const first = entries[0];
    if (first === undefined) {
      throw new Error("no entry");
    }
    first.body = { ...first.body, $sealed: {} };
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "bad_hash", seq: 1 });
  });

  it("refuses a value without its salt, a salt without $sealed, and a malformed $sealed", async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ $salt: undefined }, "bad_sealed_value"],
      [{ $sealed: undefined }, "malformed"],
      [{ $sealed: { input: `sha256:${"0".repeat(64)}` } }, "malformed"],
      [{ $sealed: { "/input": "md5:00" } }, "malformed"],
      [{ $sealed: { "/$salt": `sha256:${"0".repeat(64)}` } }, "malformed"],
      [{ $salt: "short" }, "malformed"],
    ];
    for (const [change, reason] of cases) {
      const entries = await build(SPECS);
      const first = entries[0];
      if (first === undefined) {
        throw new Error("no entry");
      }
      const body: Record<string, unknown> = { ...first.body, ...change };
      for (const name of Object.keys(change)) {
        if (change[name] === undefined) {
          delete body[name];
        }
      }
      first.body = body as JournalEntry["body"];
      expect(failureOf(await verifyJournal(entries, jwks)), JSON.stringify(change)).toEqual({ reason, seq: 1 });
    }
  });
});

describe("what the engine seals", () => {
  const completed = {
    node: "a",
    item: null,
    token: "t",
    attempt: 1,
    duration_ms: 5,
    output: { summary: "…" },
    steps: [
      {
        step: "ask",
        action: "llm ask@1",
        status: "completed",
        duration_ms: 4,
        attempts: [
          { attempt: 1, duration_ms: 1, error: { code: "llm.overloaded", message: "busy", retryable: true } },
          {
            attempt: 2,
            duration_ms: 3,
            call: { provider: "openai", model: "m", messages: [{ role: "user", content: "Ada?" }], answer: "yes" },
          },
        ],
      },
      {
        step: "book",
        action: "http book@1",
        status: "completed",
        duration_ms: 1,
        attempts: [{ attempt: 1, duration_ms: 1, call: { method: "POST", url: "https://x.test/b", status: 200 } }],
        undo: { action: "http unbook@1", input: { id: 7 } },
      },
    ],
  };

  it("seals a kind's content members, each call's prompt and answer and each undo's input, and nothing of a kind without content", () => {
    expect(sealedPointersOf("task.completed", completed)).toEqual([
      "/output",
      "/steps/0/attempts/1/call/messages",
      "/steps/0/attempts/1/call/answer",
      "/steps/1/undo/input",
    ]);
    expect(sealedPointersOf("run.created", { input: 1 })).toEqual(["/input"]);
    expect(sealedPointersOf("run.status", { from: "a", to: "b", reason: "r" })).toEqual([]);
    expect(sealedPointersOf("node.started", { node: "a" })).toBe(sealedPointersOf("run.status", {}));
  });

  it("reads an erased body with its kind's schema, each erased value as null", async () => {
    const entry = await signEntry(
      key,
      { seq: 1, run_id: RUN, kind: "task.completed", at: "2026-11-28T16:00:00.000Z", body: completed, prev: null },
      { seal: sealedPointersOf("task.completed", completed) },
    );
    expect(parseJournalBody("task.completed", entry.body)).toMatchObject({ success: true, data: completed });
    const { body } = eraseSealed(entry.body);
    expect(JSON.stringify(body)).not.toMatch(/Ada|yes|"id":7|summary/);
    const parsed = parseJournalBody("task.completed", body);
    expect(parsed.success && parsed.data.output).toBeNull();
    expect(parsed.success && parsed.data.steps?.[0]?.attempts[1]?.call).toEqual({
      provider: "openai",
      model: "m",
      messages: null,
      answer: null,
    });
  });
});

describe("the erased entry", () => {
  const ERASED: Spec = ["erased", { reason: "subject request", seqs: [1, 3, 4], blobs: [], by: { email: "a@b.c" } }];

  it("is accepted after the attestation, and the journal stays attested", async () => {
    const entries = await build([...SPECS, ERASED]);
    const report = await verifyJournal(erased(entries), jwks, { requireAttestation: true });
    expect(report).toMatchObject({
      ok: true,
      entries: 6,
      attested: true,
      outcome: "completed",
      erasure: { seq: 6, reason: "subject request", by: { email: "a@b.c" } },
    });
    expect(formatReport(report)).toContain("erased at seq 6 (2026-11-28T16:00:00.000Z): subject request");
  });

  it("is refused anywhere but right after an attestation", async () => {
    const entries = await build([...SPECS.slice(0, 2), ERASED]);
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "malformed", seq: 3 });
  });

  it("closes the journal: nothing may follow it", async () => {
    const entries = await build([...SPECS, ERASED, ["run.redriven", { redrive: 1, nodes: [] }]]);
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "after_erasure", seq: 7 });
  });

  it("needs a reason, the seqs and the blobs", async () => {
    const entries = await build([...SPECS, ["erased", { reason: "", seqs: [], blobs: [] }]]);
    expect(failureOf(await verifyJournal(entries, jwks))).toEqual({ reason: "malformed", seq: 6 });
  });
});

describe("a journal signed before sealed members existed", () => {
  const fixture = JSON.parse(readFileSync(join(ROOT, "test/fixtures/journal-before-sealing.json"), "utf8")) as {
    jwks: Jwks;
    entries: JournalEntry[];
  };

  it("verifies exactly as before: no sealed summary, its values signed as they are", async () => {
    const report = await verifyJournal(fixture.entries, fixture.jwks, { requireAttestation: true });
    expect(report).toEqual({
      ok: true,
      entries: 4,
      run_id: "run_before_sealing",
      attested: true,
      outcome: "completed",
      by: [expect.objectContaining({ seq: 1, kind: "run.created" })],
    });
  });

  it("still catches a changed value there (by the hash)", async () => {
    const entries = structuredClone(fixture.entries);
    const second = entries[1];
    if (second === undefined) {
      throw new Error("no entry");
    }
    second.body = { ...second.body, output: { sent: false } };
    expect(failureOf(await verifyJournal(entries, fixture.jwks))).toEqual({ reason: "bad_hash", seq: 2 });
  });
});

describe("the verifier command on an erased journal", () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "trellis-sealed-"));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  function run(journal: unknown): { status: number | null; stdout: string } {
    const journalPath = join(dir, "journal.json");
    const jwksPath = join(dir, "jwks.json");
    writeFileSync(journalPath, JSON.stringify({ entries: journal }));
    writeFileSync(jwksPath, JSON.stringify(jwks));
    const result = spawnSync(process.execPath, ["scripts/verify-journal.ts", journalPath, jwksPath], {
      cwd: ROOT,
      encoding: "utf8",
      timeout: 20_000,
    });
    return { status: result.status, stdout: result.stdout };
  }

  it("prints OK with the values erased, and FAIL for a tampered value", async () => {
    const entries = await build([...SPECS, ["erased", { reason: "subject request", seqs: [1, 3, 4], blobs: [] }]]);
    const ok = run(erased(entries));
    expect(ok.status).toBe(0);
    expect(ok.stdout).toContain("OK: 6 entries, run run_sealed, attested completed\n");
    expect(ok.stdout).toContain("4 erased (verified with values erased: 3 entries)");
    const tampered = structuredClone(entries);
    const first = tampered[0];
    if (first === undefined) {
      throw new Error("no entry");
    }
    first.body = { ...first.body, input: { email: "eve@example.com" } };
    const failed = run(tampered);
    expect(failed.status).toBe(1);
    expect(failed.stdout).toMatch(
      /^FAIL: entry seq 1 \(index 0\): bad sealed value — the value at \/input does not match/,
    );
  });
});
