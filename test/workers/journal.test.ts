import { env } from "cloudflare:workers";
import { describe, expect, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import {
  canonicalJson,
  formatReport,
  importSigningKey,
  signEntry,
  signEntryText,
  toJwks,
  verifyJournal,
  type EntryFields,
  type JournalEntry,
  type JournalSigningKey,
  type SignedEntryText,
} from "../../lib/journal/index.ts";

/** The key the vitest config binds from test/global-setup.ts (base64 PKCS#8 Ed25519). */
function signingKeySecret(): string {
  const value: unknown = Reflect.get(env, "JOURNAL_SIGNING_KEY");
  if (typeof value !== "string" || value === "") {
    throw new Error("JOURNAL_SIGNING_KEY is not bound in the test environment");
  }
  return value;
}

async function journalOf(key: JournalSigningKey, count: number): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  let prev: string | null = null;
  for (let seq = 1; seq <= count; seq++) {
    const last = seq === count;
    const entry = await signEntry(key, {
      seq,
      run_id: "run_workerd",
      kind: last ? "attest" : "node.completed",
      at: new Date().toISOString(),
      body: last
        ? { outcome: "completed", reason: "all nodes completed", cited: [1], created_by: "token:test" }
        : { node: `n${seq}`, output: { text: "héllo 😀", n: seq / 3 } },
      prev,
    });
    entries.push(entry);
    prev = entry.hash;
  }
  return entries;
}

describe("the signed journal inside workerd", () => {
  it("imports the PKCS#8 key from JOURNAL_SIGNING_KEY, signs with Ed25519 and verifies", async () => {
    const key = await importSigningKey(signingKeySecret());
    expect(key.kid).toMatch(/^[A-Za-z0-9_-]{43}$/);
    expect(key.publicJwk).toMatchObject({ kty: "OKP", crv: "Ed25519", alg: "EdDSA", use: "sig", kid: key.kid });
    const entries = await journalOf(key, 5);
    const jwks = toJwks([key.publicJwk]);
    const report = await verifyJournal({ entries }, jwks, { requireAttestation: true });
    expect(report).toEqual({ ok: true, entries: 5, run_id: "run_workerd", attested: true, outcome: "completed" });
    expect(formatReport(report)).toBe("OK: 5 entries, run run_workerd, attested completed");
  });

  it("detects tampering inside workerd", async () => {
    const key = await importSigningKey(signingKeySecret());
    const entries = structuredClone(await journalOf(key, 4));
    const third = entries[2];
    if (third === undefined) {
      throw new Error("no entry");
    }
    third.body["node"] = "other";
    const report = await verifyJournal(entries, toJwks([key.publicJwk]));
    expect(report).toMatchObject({ ok: false, reason: "bad_hash", seq: 3, index: 2 });
  });

  it("gives the same canonical JSON as in Node (no code generation needed)", () => {
    expect(canonicalJson({ b: [1e21, 1e-7, -0], a: "\u20ac\n" })).toBe('{"a":"€\\n","b":[1e+21,1e-7,0]}');
  });

  it("stores an entry as the text it was signed into: the same entry signEntry gives, and it verifies", async () => {
    const key = await importSigningKey(signingKeySecret());
    const bodies: Record<string, unknown>[] = [
      { node: "n1", output: { text: 'héllo 😀\u2028"q"\\', n: 1 / 3, big: 1e21, tiny: 1e-7, zero: -0 } },
      { dropped: undefined, at: new Date(0), nested: [{ b: 1, a: [null, true] }] }, // undefined left out, toJSON applied
      { "10": "ten", "9": "nine", "b": 2, "a": 1 }, // integer-like keys: JavaScript orders them apart from the rest
      {},
    ];
    let prev: string | null = null;
    const texts: string[] = [];
    for (const [index, body] of bodies.entries()) {
      const fields: EntryFields = {
        seq: index + 1,
        run_id: "run_text",
        kind: "node.completed",
        at: new Date(index).toISOString(),
        body,
        prev,
      };
      const [entry, text]: [JournalEntry, SignedEntryText] = await Promise.all([
        signEntry(key, fields),
        signEntryText(key, fields),
      ]);
      expect(JSON.parse(text.text)).toEqual(entry);
      expect(text).toMatchObject({ seq: entry.seq, kind: entry.kind, hash: entry.hash });
      texts.push(text.text);
      prev = entry.hash;
    }
    // The members in envelope order, as JSON.stringify writes a JournalEntry.
    expect(Object.keys(JSON.parse(texts[0] ?? "{}") as object)).toEqual([
      "seq",
      "run_id",
      "kind",
      "at",
      "body",
      "prev",
      "hash",
      "sig",
      "kid",
    ]);
    const entries = texts.map((text) => JSON.parse(text) as JournalEntry);
    expect(await verifyJournal(entries, toJwks([key.publicJwk]))).toMatchObject({ ok: true, entries: bodies.length });
    // The header is canonicalized as the whole entry would be: a lone surrogate is refused, with its place.
    await expect(
      signEntryText(key, {
        seq: 1,
        run_id: "run_\ud800",
        kind: "k",
        at: new Date(0).toISOString(),
        body: {},
        prev: null,
      }),
    ).rejects.toThrow("cannot canonicalize $.run_id: string contains a lone UTF-16 surrogate");
  });

  it("names the path to what cannot be canonicalized", () => {
    const refusal = (value: unknown) => {
      try {
        return canonicalJson(value);
      } catch (thrown) {
        return thrown instanceof EngineError ? `${thrown.code}: ${thrown.message}` : "not an EngineError";
      }
    };
    expect(refusal({ z: 1, a: [0, { b: Number.NaN }] })).toBe(
      "journal.not_canonicalizable: cannot canonicalize $.a[1].b: NaN is not a JSON number",
    );
    expect(refusal({ a: { ["k\udc00"]: 1 } })).toBe(
      "journal.not_canonicalizable: cannot canonicalize $.a.k\udc00: string contains a lone UTF-16 surrogate (not I-JSON)",
    );
    expect(refusal([new Map()])).toBe(
      "journal.not_canonicalizable: cannot canonicalize $[0]: Map is not a plain JSON object",
    );
    const cycle: Record<string, unknown> = {};
    cycle["self"] = [cycle];
    expect(refusal(cycle)).toBe("journal.not_canonicalizable: cannot canonicalize $.self[0]: cyclic structure");
    // Siblings are fine again once a failed walk is left: a shared (not cyclic) value is not a cycle.
    const shared = { n: 1 };
    expect(refusal({ a: shared, b: [shared] })).toBe('{"a":{"n":1},"b":[{"n":1}]}');
  });

  it("rejects a malformed key with journal.bad_key", async () => {
    let error: unknown;
    try {
      await importSigningKey("bm90IGEga2V5");
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(EngineError);
    expect(error instanceof EngineError ? error.code : undefined).toBe("journal.bad_key");
  });
});
