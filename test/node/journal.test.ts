import { createHash, createPublicKey, generateKeyPairSync, verify as nodeVerify } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import canonicalize from "canonicalize";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import {
  canonicalBytes,
  canonicalJson,
  formatReport,
  importSigningKey,
  importVerifyKey,
  JournalEntry,
  jwkThumbprint,
  signEntry,
  toJwks,
  verifyJournal,
  type JournalSigningKey,
  type VerifyFailureReason,
  type VerifyReport,
} from "../../lib/journal/index.ts";
import type { Jwks } from "../../schemas/journal.ts";

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const RUN = "run_x";

function freshKeyBase64(): string {
  const { privateKey } = generateKeyPairSync("ed25519");
  return privateKey.export({ type: "pkcs8", format: "der" }).toString("base64");
}

function hexToDouble(hex: string): number {
  const view = new DataView(new ArrayBuffer(8));
  view.setBigUint64(0, BigInt(`0x${hex}`));
  return view.getFloat64(0);
}

function expectEngineError(thrown: unknown, code: string): void {
  expect(thrown).toBeInstanceOf(EngineError);
  expect(thrown instanceof EngineError ? thrown.code : undefined).toBe(code);
}

async function rejection(promise: Promise<unknown>): Promise<unknown> {
  try {
    await promise;
  } catch (error) {
    return error;
  }
  throw new Error("expected a rejection");
}

function thrown(fn: () => unknown): unknown {
  try {
    fn();
  } catch (error) {
    return error;
  }
  throw new Error("expected a throw");
}

/** Body of each entry of the test journal, the last one the attestation. */
const BODIES: [string, Record<string, unknown>][] = [
  ["run.created", { workflow: { id: "review", version: 2 }, input: { user_id: "u1", count: 3 } }],
  ["run.started", { status: "running" }],
  ["node.dispatched", { node: "fetch", attempt: 1, token_id: "tok_1" }],
  ["node.completed", { node: "fetch", output: { user: { name: "Zoë", tags: ["a", "€", "😀"] }, score: 0.1 } }],
  ["gate.opened", { gate_id: "g1", prompt: 'Approve?\n"quoted"' }],
  ["run.completed", { status: "completed" }],
  ["attest", { outcome: "completed", reason: "all nodes completed", cited: [1, 4, 6], created_by: "token:test" }],
];

async function buildJournal(key: JournalSigningKey, bodies = BODIES, runId = RUN): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  let prev: string | null = null;
  for (const [i, [kind, body]] of bodies.entries()) {
    const entry = await signEntry(key, {
      seq: i + 1,
      run_id: runId,
      kind,
      at: new Date(Date.UTC(2026, 0, 2, 3, 4, 5, i)).toISOString(),
      body,
      prev,
    });
    entries.push(entry);
    prev = entry.hash;
  }
  return entries;
}

function clone<T>(value: T): T {
  return structuredClone(value);
}

/**
 * Changes one character of `text` (at about its middle) to another character
 * of the same alphabet, so hex stays hex and base64url stays base64url.
 */
function flipChar(text: string, at = Math.floor(text.length / 2)): string {
  const c = text[at] ?? "";
  let replacement: string;
  if (/\d/.test(c)) {
    replacement = String((Number(c) + 1) % 10);
  } else if (/[a-zA-Z]/.test(c)) {
    replacement = String.fromCharCode(c.charCodeAt(0) + ("fFzZ".includes(c) ? -1 : 1));
  } else {
    replacement = c === "x" ? "y" : "x";
  }
  return text.slice(0, at) + replacement + text.slice(at + 1);
}

function failed(report: VerifyReport): Extract<VerifyReport, { ok: false }> {
  if (report.ok) {
    throw new Error(`expected a failure, got ${formatReport(report)}`);
  }
  return report;
}

describe("canonicalJson (RFC 8785)", () => {
  it("serializes the RFC 8785 §3.2.2 example exactly, byte for byte", () => {
    // Input of RFC 8785 §3.2.2 (the number literals are read by JSON.parse, as the RFC's parser would).
    const input: unknown = JSON.parse(
      '{"numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],' +
        ' "string": "\\u20ac$\\u000F\\u000aA\'\\u0042\\u0022\\u005c\\\\\\"\\/",' +
        ' "literals": [null, true, false]}',
    );
    const expected =
      '{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\\u000f\\nA\'B\\"\\\\\\\\\\"/"}';
    expect(canonicalJson(input)).toBe(expected);
    // RFC 8785 §3.2.4: the UTF-8 of the result, as printed in the RFC.
    const hex = [
      "7b 22 6c 69 74 65 72 61 6c 73 22 3a 5b 6e 75 6c 6c 2c 74 72",
      "75 65 2c 66 61 6c 73 65 5d 2c 22 6e 75 6d 62 65 72 73 22 3a",
      "5b 33 33 33 33 33 33 33 33 33 2e 33 33 33 33 33 33 33 2c 31",
      "65 2b 33 30 2c 34 2e 35 2c 30 2e 30 30 32 2c 31 65 2d 32 37",
      "5d 2c 22 73 74 72 69 6e 67 22 3a 22 e2 82 ac 24 5c 75 30 30",
      "30 66 5c 6e 41 27 42 5c 22 5c 5c 5c 5c 5c 22 2f 22 7d",
    ].join(" ");
    expect(Buffer.from(canonicalBytes(input)).toString("hex")).toBe(hex.replace(/ /g, ""));
  });

  it("sorts members by UTF-16 code units (RFC 8785 §3.2.3)", () => {
    const input = {
      "\u20ac": "Euro Sign",
      "\r": "Carriage Return",
      "\ufb33": "Hebrew Letter Dalet With Dagesh",
      "1": "One",
      "\ud83d\ude00": "Emoji: Grinning Face",
      "\u0080": "Control",
      "\u00f6": "Latin Small Letter O With Diaeresis",
    };
    expect(canonicalJson(input)).toBe(
      '{"\\r":"Carriage Return","1":"One","\u0080":"Control","ö":"Latin Small Letter O With Diaeresis",' +
        '"€":"Euro Sign","😀":"Emoji: Grinning Face","\ufb33":"Hebrew Letter Dalet With Dagesh"}',
    );
  });

  // RFC 8785 Appendix B: IEEE 754 double (hex) → JSON text.
  const NUMBERS: [string, string][] = [
    ["0000000000000000", "0"],
    ["8000000000000000", "0"],
    ["0000000000000001", "5e-324"],
    ["8000000000000001", "-5e-324"],
    ["7fefffffffffffff", "1.7976931348623157e+308"],
    ["ffefffffffffffff", "-1.7976931348623157e+308"],
    ["4340000000000000", "9007199254740992"],
    ["c340000000000000", "-9007199254740992"],
    ["4430000000000000", "295147905179352830000"],
    ["44b52d02c7e14af5", "9.999999999999997e+22"],
    ["44b52d02c7e14af6", "1e+23"],
    ["44b52d02c7e14af7", "1.0000000000000001e+23"],
    ["444b1ae4d6e2ef4e", "999999999999999700000"],
    ["444b1ae4d6e2ef4f", "999999999999999900000"],
    ["444b1ae4d6e2ef50", "1e+21"],
    ["3eb0c6f7a0b5ed8c", "9.999999999999997e-7"],
    ["3eb0c6f7a0b5ed8d", "0.000001"],
    ["41b3de4355555553", "333333333.3333332"],
    ["41b3de4355555554", "333333333.33333325"],
    ["41b3de4355555555", "333333333.3333333"],
    ["41b3de4355555556", "333333333.3333334"],
    ["41b3de4355555557", "333333333.33333343"],
    ["becbf647612f3696", "-0.0000033333333333333333"],
    ["43143ff3c1cb0959", "1424953923781206.2"],
  ];
  it.each(NUMBERS)("serializes the double %s as %s (Appendix B)", (hex, text) => {
    expect(canonicalJson(hexToDouble(hex))).toBe(text);
    expect(canonicalJson([hexToDouble(hex)])).toBe(`[${text}]`);
  });

  it.each([
    ["7fffffffffffffff", "NaN"],
    ["7ff0000000000000", "Infinity"],
    ["fff0000000000000", "-Infinity"],
  ])("rejects the double %s (%s) (Appendix B)", (hex) => {
    expectEngineError(
      thrown(() => canonicalJson({ a: [hexToDouble(hex)] })),
      "journal.not_canonicalizable",
    );
  });

  it("escapes strings as RFC 8785 §3.2.2.2 requires", () => {
    expect(canonicalJson('\u0000\u0007\b\t\n\u000b\f\r\u001f "\\/\u007f\u2028é😀')).toBe(
      '"\\u0000\\u0007\\b\\t\\n\\u000b\\f\\r\\u001f \\"\\\\/\u007f\u2028é😀"',
    );
  });

  it("drops undefined members, honours toJSON, and agrees with the canonicalize package", () => {
    expect(canonicalJson({ b: undefined, a: new Date(0), c: [1, { z: 1, y: null }] })).toBe(
      '{"a":"1970-01-01T00:00:00.000Z","c":[1,{"y":null,"z":1}]}',
    );
    const samples: unknown[] = [
      BODIES,
      { "": 0, "a": -0, "b": 1e-7, "c": 123456789012345680000, "d": [[], {}, ""], "\u00e9": true, "e": "\u00e9" },
      [1.5, -2.25e-300, 2 ** 60, "x\u0000y"],
    ];
    for (const sample of samples) {
      expect(canonicalJson(sample)).toBe(canonicalize(sample));
    }
  });

  it.each<[string, () => unknown]>([
    ["undefined at the top", () => undefined],
    ["undefined in an array", () => [1, undefined]],
    ["a function in an array", () => [() => 1]],
    ["a bigint", () => ({ a: 1n })],
    ["a Map", () => ({ a: new Map([["k", 1]]) })],
    ["a typed array", () => ({ a: new Uint8Array(2) })],
    [
      "a cycle",
      () => {
        const a: Record<string, unknown> = {};
        a["self"] = a;
        return a;
      },
    ],
    ["a lone surrogate", () => ({ a: "x\ud800y" })],
    ["a lone surrogate in a key", () => ({ "\udc00": 1 })],
  ])("rejects %s with a clear error", (_name, make) => {
    const error = thrown(() => canonicalJson(make()));
    expectEngineError(error, "journal.not_canonicalizable");
    expect(error instanceof Error ? error.message : "").toMatch(/^cannot canonicalize \$/);
  });

  it("accepts shared (non-cyclic) references", () => {
    const shared = { x: 1 };
    expect(canonicalJson({ a: shared, b: [shared, shared] })).toBe('{"a":{"x":1},"b":[{"x":1},{"x":1}]}');
  });
});

describe("journal keys", () => {
  it("imports a PKCS#8 key; kid is the RFC 7638 thumbprint of the public key", async () => {
    const { privateKey, publicKey } = generateKeyPairSync("ed25519");
    const key = await importSigningKey(privateKey.export({ type: "pkcs8", format: "der" }).toString("base64"));
    const jwk = publicKey.export({ format: "jwk" });
    expect(key.publicJwk).toEqual({ kty: "OKP", crv: "Ed25519", x: jwk.x, kid: key.kid, alg: "EdDSA", use: "sig" });
    const thumbprint = createHash("sha256")
      .update(`{"crv":"Ed25519","kty":"OKP","x":"${jwk.x ?? ""}"}`)
      .digest("base64url");
    expect(key.kid).toBe(thumbprint);
    expect(await jwkThumbprint(jwk.x ?? "")).toBe(thumbprint);
    expect(key.privateKey.extractable).toBe(false);
    expect(toJwks([key.publicJwk])).toEqual({ keys: [key.publicJwk] });
  });

  it("RFC 7638 §3.1 style: the thumbprint hashes only crv, kty, x in order", async () => {
    // RFC 8037 Appendix A.3 gives this Ed25519 key's thumbprint.
    expect(await jwkThumbprint("11qYAYKxCrfVS_7TyWQHOg7hcvPapiMlrwIaaPcHURo")).toBe(
      "kPrK_qmxVWaYVA9wwBF6Iuo3vVzz7TxHCTwXBygrS4k",
    );
  });

  it("accepts PEM and whitespace around the base64", async () => {
    const { privateKey } = generateKeyPairSync("ed25519");
    const pem = privateKey.export({ type: "pkcs8", format: "pem" }).toString();
    const fromPem = await importSigningKey(pem);
    const fromDer = await importSigningKey(
      ` ${privateKey.export({ type: "pkcs8", format: "der" }).toString("base64")}\n`,
    );
    expect(fromPem.kid).toBe(fromDer.kid);
  });

  it.each<[string, () => string]>([
    ["an empty string", () => ""],
    ["text that is not base64", () => "not a key!"],
    ["random bytes", () => Buffer.from("0123456789abcdef0123456789abcdef").toString("base64")],
    [
      "an EC P-256 key",
      () =>
        generateKeyPairSync("ec", { namedCurve: "P-256" })
          .privateKey.export({ type: "pkcs8", format: "der" })
          .toString("base64"),
    ],
    [
      "an Ed25519 public key (SPKI)",
      () => generateKeyPairSync("ed25519").publicKey.export({ type: "spki", format: "der" }).toString("base64"),
    ],
  ])("rejects %s with journal.bad_key", async (_name, make) => {
    const error = await rejection(importSigningKey(make()));
    expectEngineError(error, "journal.bad_key");
    expect(error instanceof Error ? error.message : "").toMatch(/JOURNAL_SIGNING_KEY/);
  });

  it("importVerifyKey rejects what is not an Ed25519 public JWK", async () => {
    expectEngineError(await rejection(importVerifyKey({ kty: "EC", crv: "P-256", x: "AA" })), "journal.bad_key");
    expectEngineError(await rejection(importVerifyKey({ kty: "OKP", crv: "Ed25519", x: "AAAA" })), "journal.bad_key");
    expectEngineError(await rejection(importVerifyKey({ kty: "OKP", crv: "Ed25519", x: "!!" })), "journal.bad_key");
  });

  it("works with a key made by the documented openssl command", async (context) => {
    const result = spawnSync("sh", ["-c", "openssl genpkey -algorithm ed25519 -outform DER | base64 -w0"], {
      encoding: "utf8",
    });
    if (result.status !== 0 || result.stdout === "") {
      context.skip("openssl is not available here");
    }
    const key = await importSigningKey(result.stdout);
    const entries = await buildJournal(key, BODIES.slice(0, 2));
    expect((await verifyJournal(entries, toJwks([key.publicJwk]))).ok).toBe(true);
  });
});

describe("signEntry and verifyJournal", () => {
  let key: JournalSigningKey;
  let jwks: Jwks;
  let journal: JournalEntry[];

  beforeAll(async () => {
    key = await importSigningKey(freshKeyBase64());
    jwks = toJwks([key.publicJwk]);
    journal = await buildJournal(key);
  });

  it("produces the contract envelope, verifiable with other implementations", async () => {
    const publicKey = createPublicKey({ key: { kty: "OKP", crv: "Ed25519", x: key.publicJwk.x }, format: "jwk" });
    let prev: string | null = null;
    for (const [i, entry] of journal.entries()) {
      expect(Object.keys(entry)).toEqual(["seq", "run_id", "kind", "at", "body", "prev", "hash", "sig", "kid"]);
      expect(entry.seq).toBe(i + 1);
      expect(entry.prev).toBe(prev);
      expect(entry.kid).toBe(key.kid);
      // Independent check: the canonicalize package, node:crypto SHA-256 and Ed25519.
      const signed = Buffer.from(
        canonicalize({
          seq: entry.seq,
          run_id: entry.run_id,
          kind: entry.kind,
          at: entry.at,
          body: entry.body,
          prev: entry.prev,
        }) ?? "",
        "utf8",
      );
      expect(entry.hash).toBe(createHash("sha256").update(signed).digest("hex"));
      expect(nodeVerify(null, signed, publicKey, Buffer.from(entry.sig, "base64url"))).toBe(true);
      expect(JournalEntry.safeParse(entry).success).toBe(true);
      prev = entry.hash;
    }
  });

  it("verifies a whole journal, given as an array or as { entries }", async () => {
    const expected: VerifyReport = {
      ok: true,
      entries: BODIES.length,
      run_id: RUN,
      attested: true,
      outcome: "completed",
    };
    expect(await verifyJournal(journal, jwks)).toEqual(expected);
    expect(await verifyJournal({ entries: journal }, jwks, { requireAttestation: true, runId: RUN })).toEqual(expected);
    // After a round trip through JSON text, as a client fetching the API sees it.
    expect(
      await verifyJournal(JSON.parse(JSON.stringify({ entries: journal }, null, 2)), JSON.parse(JSON.stringify(jwks))),
    ).toEqual(expected);
    expect(formatReport(expected)).toBe(`OK: ${BODIES.length} entries, run ${RUN}, attested completed`);
  });

  it("verifies an unfinished journal unless an attestation is required", async () => {
    const open = journal.slice(0, 3);
    expect(await verifyJournal(open, jwks)).toEqual({ ok: true, entries: 3, run_id: RUN, attested: false });
    expect(formatReport(await verifyJournal(open, jwks))).toBe(`OK: 3 entries, run ${RUN}, not attested`);
    expect(await verifyJournal([], jwks)).toEqual({ ok: true, entries: 0, run_id: null, attested: false });
  });

  type Field = "seq" | "run_id" | "kind" | "at" | "body" | "prev" | "hash" | "sig" | "kid";
  const FIELDS: Field[] = ["seq", "run_id", "kind", "at", "body", "prev", "hash", "sig", "kid"];

  function tamper(entry: JournalEntry, field: Field): void {
    switch (field) {
      case "seq":
        entry.seq = entry.seq ^ 8; // one bit; stays a valid seq
        break;
      case "run_id":
        entry.run_id = flipChar(entry.run_id);
        break;
      case "kind":
        entry.kind = flipChar(entry.kind);
        break;
      case "at":
        entry.at = flipChar(entry.at, 18); // a digit of the seconds
        break;
      case "body": {
        // The first string or number member (sorted), else the first member wrapped.
        const names = Object.keys(entry.body).sort();
        const name = names.find((n) => ["string", "number"].includes(typeof entry.body[n])) ?? names[0];
        if (name === undefined) {
          throw new Error("empty body");
        }
        const value = entry.body[name];
        entry.body[name] =
          typeof value === "string" ? flipChar(value) : typeof value === "number" ? value + 1 : { was: value ?? null };
        break;
      }
      case "prev":
        entry.prev = entry.prev === null ? "0".repeat(64) : flipChar(entry.prev);
        break;
      case "hash":
        entry.hash = flipChar(entry.hash);
        break;
      case "sig":
        entry.sig = flipChar(entry.sig, 10);
        break;
      case "kid":
        entry.kid = flipChar(entry.kid);
        break;
    }
  }

  const EXPECTED_REASON: Record<Field, VerifyFailureReason> = {
    seq: "bad_seq",
    run_id: "wrong_run",
    kind: "bad_hash",
    at: "bad_hash",
    body: "bad_hash",
    prev: "broken_link",
    hash: "bad_hash",
    sig: "bad_signature",
    kid: "unknown_kid",
  };

  it("fails on a one-character change to any field of any entry, naming that entry", async () => {
    let cases = 0;
    for (let index = 0; index < journal.length; index++) {
      for (const field of FIELDS) {
        const copy = clone(journal);
        const entry = copy[index];
        if (entry === undefined) {
          throw new Error("no entry");
        }
        const seq = entry.seq;
        tamper(entry, field);
        const report = failed(await verifyJournal(copy, jwks));
        const context = `${field} of entry seq ${seq}: ${report.message}`;
        expect(report.index, context).toBe(index);
        expect(report.message, context).toContain(`(index ${index})`);
        if (field === "seq") {
          expect(report.reason, context).toBe("bad_seq");
          expect(report.message, context).toContain(`seq ${seq} was expected`);
        } else {
          expect(report.seq, context).toBe(seq);
          expect(report.message, context).toMatch(new RegExp(`^entry seq ${seq} \\(index ${index}\\): `));
          // The first entry has nothing to compare its run_id with: the change breaks its hash.
          const expected = field === "run_id" && index === 0 ? "bad_hash" : EXPECTED_REASON[field];
          expect(report.reason, context).toBe(expected);
        }
        cases++;
      }
    }
    expect(cases).toBe(BODIES.length * FIELDS.length);
  });

  it("fails with bad_signature when the hash and the chain are recomputed after a change", async () => {
    const copy = clone(journal);
    const target = copy[2];
    if (target === undefined) {
      throw new Error("no entry");
    }
    target.body["attempt"] = 2;
    // A forger without the private key recomputes every hash and link from the altered entry on.
    for (let i = 2; i < copy.length; i++) {
      const entry = copy[i];
      const before = copy[i - 1];
      if (entry === undefined || before === undefined) {
        throw new Error("no entry");
      }
      entry.prev = before.hash;
      entry.hash = createHash("sha256")
        .update(
          canonicalBytes({
            seq: entry.seq,
            run_id: entry.run_id,
            kind: entry.kind,
            at: entry.at,
            body: entry.body,
            prev: entry.prev,
          }),
        )
        .digest("hex");
    }
    const report = failed(await verifyJournal(copy, jwks));
    expect(report).toMatchObject({ reason: "bad_signature", seq: 3, index: 2 });
    expect(formatReport(report)).toMatch(/^FAIL: entry seq 3 \(index 2\): bad signature — /);
  });

  it("rejects a signature in non-canonical base64url (same bytes, other text)", async () => {
    const copy = clone(journal);
    const entry = copy[1];
    if (entry === undefined) {
      throw new Error("no entry");
    }
    // 64 bytes take 86 characters; the last one carries 4 unused bits.
    const last = entry.sig.slice(-1);
    const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    entry.sig = entry.sig.slice(0, -1) + (alphabet[alphabet.indexOf(last) ^ 1] ?? "A");
    expect(Buffer.from(entry.sig, "base64url").equals(Buffer.from(journal[1]?.sig ?? "", "base64url"))).toBe(true);
    expect(failed(await verifyJournal(copy, jwks))).toMatchObject({ reason: "bad_signature", seq: 2, index: 1 });
  });

  it("fails on reordered entries", async () => {
    const copy = clone(journal);
    const [second, third] = [copy[1], copy[2]];
    if (second === undefined || third === undefined) {
      throw new Error("no entry");
    }
    copy[1] = third;
    copy[2] = second;
    expect(failed(await verifyJournal(copy, jwks))).toMatchObject({ reason: "bad_seq", seq: 3, index: 1 });
  });

  it("fails when a middle entry is deleted", async () => {
    const copy = clone(journal);
    copy.splice(3, 1);
    const report = failed(await verifyJournal(copy, jwks));
    expect(report).toMatchObject({ reason: "bad_seq", seq: 5, index: 3 });
    expect(report.message).toBe(
      "entry seq 5 (index 3): bad seq — found seq 5 where seq 4 was expected (a gap, a reordering or an altered seq)",
    );
  });

  it("fails when a middle entry is deleted and the later ones renumbered", async () => {
    const copy = clone(journal);
    copy.splice(3, 1);
    copy.forEach((entry, i) => {
      entry.seq = i + 1;
    });
    // Renumbering changes the signed fields; the link is checked before the hash.
    expect(failed(await verifyJournal(copy, jwks))).toMatchObject({ reason: "broken_link", seq: 4, index: 3 });
  });

  it("fails when the attestation is cut off and an attestation is required", async () => {
    const cut = journal.slice(0, -1);
    const report = failed(await verifyJournal(cut, jwks, { requireAttestation: true }));
    expect(report).toMatchObject({ reason: "missing_attestation", seq: cut.length, index: cut.length - 1 });
    expect(report.message).toContain(`entry seq ${cut.length} (index ${cut.length - 1})`);
    expect(failed(await verifyJournal([], jwks, { requireAttestation: true }))).toMatchObject({
      reason: "missing_attestation",
      seq: null,
      index: -1,
    });
  });

  it("fails on a validly signed entry after the attestation", async () => {
    const last = journal[journal.length - 1];
    if (last === undefined) {
      throw new Error("no entry");
    }
    const extra = await signEntry(key, {
      seq: last.seq + 1,
      run_id: RUN,
      kind: "node.completed",
      at: new Date().toISOString(),
      body: { node: "late" },
      prev: last.hash,
    });
    const report = failed(await verifyJournal([...journal, extra], jwks));
    expect(report).toMatchObject({ reason: "after_attestation", seq: extra.seq, index: journal.length });
  });

  it("fails on a second attestation", async () => {
    const last = journal[journal.length - 1];
    if (last === undefined) {
      throw new Error("no entry");
    }
    const again = await signEntry(key, {
      seq: last.seq + 1,
      run_id: RUN,
      kind: "attest",
      at: new Date().toISOString(),
      body: { outcome: "failed", reason: "x", cited: [], created_by: "y" },
      prev: last.hash,
    });
    expect(failed(await verifyJournal([...journal, again], jwks)).reason).toBe("after_attestation");
  });

  it("accepts a compensation section after a failed or cancelled attestation, closed by a new attestation", async () => {
    for (const outcome of ["failed", "cancelled"]) {
      const attest = (extra: Record<string, unknown> = {}) =>
        ["attest", { outcome, reason: "x", cited: [1], created_by: "y", ...extra }] as [
          string,
          Record<string, unknown>,
        ];
      const compensated = await buildJournal(key, [
        ["run.created", {}],
        attest(),
        ["compensation.started", { trigger: "manual", pending: [0] }],
        ["undo.dispatched", { undo: 0 }],
        ["undo.completed", { undo: 0 }],
        ["compensation.finished", { status: "completed", undone: 1, undos: 1 }],
        attest({ compensation: { status: "completed", undone: 1, undos: 1 } }),
      ]);
      expect(await verifyJournal(compensated, jwks, { requireAttestation: true })).toMatchObject({
        ok: true,
        outcome,
      });
    }
  });

  it("refuses a compensation after a completed attestation, and any other kind after a cancelled one", async () => {
    const afterCompleted = await buildJournal(key, [
      ["run.created", {}],
      ["attest", { outcome: "completed", reason: "x", cited: [1], created_by: "y" }],
      ["compensation.started", { trigger: "manual", pending: [] }],
    ]);
    expect(failed(await verifyJournal(afterCompleted, jwks))).toMatchObject({ reason: "after_attestation", seq: 3 });
    const afterCancelled = await buildJournal(key, [
      ["run.created", {}],
      ["attest", { outcome: "cancelled", reason: "x", cited: [1], created_by: "y" }],
      ["run.redriven", { redrive: 1, nodes: [] }],
    ]);
    expect(failed(await verifyJournal(afterCancelled, jwks))).toMatchObject({ reason: "after_attestation", seq: 3 });
  });

  it("fails on an attestation whose body is out of contract", async () => {
    const bad = await buildJournal(key, [
      ["run.created", {}],
      ["attest", { outcome: "done", reason: "x", cited: [1], created_by: "y" }],
    ]);
    expect(failed(await verifyJournal(bad, jwks))).toMatchObject({ reason: "malformed", seq: 2, index: 1 });
  });

  it("fails with a wrong key in the JWKS", async () => {
    const other = await importSigningKey(freshKeyBase64());
    expect(failed(await verifyJournal(journal, toJwks([other.publicJwk])))).toMatchObject({
      reason: "unknown_kid",
      seq: 1,
      index: 0,
    });
    // Another key published under this journal's kid.
    const impostor = toJwks([{ ...other.publicJwk, kid: key.kid }]);
    const report = failed(await verifyJournal(journal, impostor));
    expect(report).toMatchObject({ reason: "bad_signature", seq: 1, index: 0 });
    expect(report.message).toContain(key.kid);
  });

  it("verifies a journal signed across a key rotation when the JWKS has both keys", async () => {
    const next = await importSigningKey(freshKeyBase64());
    const first = journal.slice(0, 3);
    const tail = first[first.length - 1];
    if (tail === undefined) {
      throw new Error("no entry");
    }
    const rotated = await signEntry(next, {
      seq: 4,
      run_id: RUN,
      kind: "run.completed",
      at: "2026-01-02T03:04:05+01:00",
      body: {},
      prev: tail.hash,
    });
    const both = toJwks([key.publicJwk, next.publicJwk]);
    expect(await verifyJournal([...first, rotated], both)).toMatchObject({ ok: true, entries: 4 });
    expect(failed(await verifyJournal([...first, rotated], jwks))).toMatchObject({ reason: "unknown_kid", seq: 4 });
  });

  it("checks the run id against the option and across entries", async () => {
    expect(failed(await verifyJournal(journal, jwks, { runId: "run_other" }))).toMatchObject({
      reason: "wrong_run",
      seq: 1,
      index: 0,
    });
    const mixed = [
      ...(await buildJournal(key, BODIES.slice(0, 2))),
      ...(await buildJournal(key, BODIES.slice(0, 3), "run_y")).slice(2),
    ];
    const report = failed(await verifyJournal(mixed, jwks));
    expect(report).toMatchObject({ reason: "wrong_run", seq: 3, index: 2 });
  });

  it("reports malformed input", async () => {
    expect(failed(await verifyJournal("nope", jwks))).toMatchObject({ reason: "malformed", seq: null, index: -1 });
    expect(failed(await verifyJournal({ entries: {} }, jwks))).toMatchObject({ reason: "malformed", index: -1 });
    expect(failed(await verifyJournal(journal, { keys: "x" }))).toMatchObject({ reason: "malformed", index: -1 });
    const extraField = clone(journal);
    Object.assign(extraField[1] ?? {}, { note: "unsigned" });
    expect(failed(await verifyJournal(extraField, jwks))).toMatchObject({ reason: "malformed", seq: 2, index: 1 });
    const loneSurrogate: unknown = JSON.parse(
      JSON.stringify(journal).replace('"status":"running"', '"status":"\\ud800"'),
    );
    expect(failed(await verifyJournal(loneSurrogate, jwks))).toMatchObject({ reason: "malformed", seq: 2, index: 1 });
    const notObject = [journal[0], 42];
    const report = failed(await verifyJournal(notObject, jwks));
    expect(report).toMatchObject({ reason: "malformed", seq: null, index: 1 });
    expect(report.message).toMatch(/^entry index 1: malformed — /);
  });

  it("keeps a body member named __proto__ through signing, JSON and verification", async () => {
    const body: unknown = JSON.parse('{"__proto__":{"polluted":true},"ok":1}');
    if (typeof body !== "object" || body === null) {
      throw new Error("unreachable");
    }
    const entry = await signEntry(key, {
      seq: 1,
      run_id: RUN,
      kind: "run.created",
      at: "2026-01-01T00:00:00Z",
      body: body as Record<string, unknown>,
      prev: null,
    });
    expect(JSON.stringify(entry.body)).toBe('{"__proto__":{"polluted":true},"ok":1}');
    expect((await verifyJournal(JSON.parse(JSON.stringify([entry])), jwks)).ok).toBe(true);
    expect(Reflect.get({}, "polluted")).toBeUndefined();
  });

  it("refuses to sign fields out of contract", async () => {
    const base = { seq: 1, run_id: RUN, kind: "run.created", at: "2026-01-01T00:00:00.000Z", body: {}, prev: null };
    expectEngineError(await rejection(signEntry(key, { ...base, seq: 0 })), "journal.invalid_entry");
    expectEngineError(await rejection(signEntry(key, { ...base, seq: 1.5 })), "journal.invalid_entry");
    expectEngineError(await rejection(signEntry(key, { ...base, at: "yesterday" })), "journal.invalid_entry");
    expectEngineError(await rejection(signEntry(key, { ...base, prev: "abc" })), "journal.invalid_entry");
    expectEngineError(await rejection(signEntry(key, { ...base, run_id: "" })), "journal.invalid_entry");
    expectEngineError(
      await rejection(signEntry(key, { ...base, body: { n: Number.NaN } })),
      "journal.not_canonicalizable",
    );
    // Members that JSON drops are dropped from what is signed and returned.
    const entry = await signEntry(key, { ...base, body: { a: 1, b: undefined } });
    expect(entry.body).toEqual({ a: 1 });
    expect(Object.keys(entry.body)).toEqual(["a"]);
  });
});

describe("the verifier command (node scripts/verify-journal.ts)", () => {
  let dir: string;
  let journalPath: string;
  let jwksPath: string;
  let tamperedPath: string;
  let openPath: string;
  let seq4Message: string;

  function run(args: string[], input?: string): { status: number | null; stdout: string; stderr: string } {
    const result = spawnSync(process.execPath, ["scripts/verify-journal.ts", ...args], {
      cwd: ROOT,
      input: input ?? "",
      encoding: "utf8",
      timeout: 20_000,
    });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr };
  }

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), "trellis-journal-"));
    const key = await importSigningKey(freshKeyBase64());
    const journal = await buildJournal(key);
    journalPath = join(dir, "journal.json");
    jwksPath = join(dir, "jwks.json");
    tamperedPath = join(dir, "tampered.json");
    openPath = join(dir, "open.json");
    writeFileSync(journalPath, JSON.stringify({ entries: journal }, null, 2));
    writeFileSync(jwksPath, JSON.stringify(toJwks([key.publicJwk])));
    writeFileSync(openPath, JSON.stringify(journal.slice(0, -1)));
    const tampered = clone(journal);
    const fourth = tampered[3];
    if (fourth === undefined) {
      throw new Error("no entry");
    }
    fourth.sig = flipChar(fourth.sig, 5);
    writeFileSync(tamperedPath, JSON.stringify({ entries: tampered }));
    seq4Message = `FAIL: entry seq 4 (index 3): bad signature — the signature does not verify with key ${key.kid}\n`;
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("runs on Node 22 with type stripping", () => {
    const [major = 0, minor = 0] = process.versions.node.split(".").map(Number);
    expect(major > 22 || (major === 22 && minor >= 18), `node ${process.versions.node}`).toBe(true);
  });

  it("prints OK and exits 0 for a good journal", () => {
    const result = run([journalPath, jwksPath, "--require-attestation"]);
    expect(result).toMatchObject({
      status: 0,
      stdout: `OK: ${BODIES.length} entries, run ${RUN}, attested completed\n`,
    });
    expect(result.stderr).toBe("");
  });

  it("prints FAIL naming the entry and exits 1 for a tampered journal", () => {
    expect(run([tamperedPath, jwksPath])).toMatchObject({ status: 1, stdout: seq4Message });
  });

  it("reads the journal from stdin with -", async () => {
    const { readFileSync } = await import("node:fs");
    expect(run(["-", jwksPath], readFileSync(journalPath, "utf8"))).toMatchObject({ status: 0 });
    expect(run(["-", jwksPath], readFileSync(tamperedPath, "utf8"))).toMatchObject({ status: 1, stdout: seq4Message });
    expect(run(["-", jwksPath], "{ not json")).toMatchObject({
      status: 1,
      stdout: expect.stringMatching(/^FAIL: journal: malformed — not JSON/),
    });
  });

  it("requires the attestation only when asked", () => {
    expect(run([openPath, jwksPath])).toMatchObject({
      status: 0,
      stdout: `OK: ${BODIES.length - 1} entries, run ${RUN}, not attested\n`,
    });
    const result = run([openPath, jwksPath, "--require-attestation"]);
    expect(result.status).toBe(1);
    expect(result.stdout).toMatch(
      new RegExp(`^FAIL: entry seq ${BODIES.length - 1} \\(index ${BODIES.length - 2}\\): missing attestation — `),
    );
  });

  it("checks --run-id and prints the report as JSON with --json", () => {
    expect(run([journalPath, jwksPath, "--run-id", "run_other"]).status).toBe(1);
    expect(run([journalPath, jwksPath, `--run-id=${RUN}`]).status).toBe(0);
    const result = run([tamperedPath, jwksPath, "--json"]);
    expect(result.status).toBe(1);
    expect(JSON.parse(result.stdout)).toMatchObject({ ok: false, seq: 4, index: 3, reason: "bad_signature" });
  });

  it("exits 2 on usage errors", () => {
    for (const args of [
      [],
      [journalPath],
      [journalPath, jwksPath, "--bogus"],
      [journalPath, jwksPath, "extra"],
      [journalPath, "-"],
      [join(dir, "missing.json"), jwksPath],
      [journalPath, join(dir, "missing.json")],
      [journalPath, journalPath],
    ]) {
      const result = run(args);
      expect(result.status, args.join(" ")).toBe(2);
      expect(result.stdout, args.join(" ")).toBe("");
      expect(result.stderr, args.join(" ")).toMatch(/^verify-journal: /);
    }
    const help = run(["--help"]);
    expect(help.status).toBe(0);
    expect(help.stdout).toMatch(/^usage: node scripts\/verify-journal\.ts/);
  });
});
