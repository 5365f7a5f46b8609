import { generateKeyPairSync } from "node:crypto";
import { spawnSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Api } from "../../cli/api.ts";
import { verifyCommand } from "../../cli/commands.ts";
import { summarizeEntry } from "../../console/src/journal-summary.ts";
import {
  formatReport,
  importSigningKey,
  signEntry,
  toJwks,
  verifyJournal,
  type JournalEntry,
  type JournalSigningKey,
} from "../../lib/journal/index.ts";
import type { Jwks } from "../../schemas/journal.ts";

/** Who caused each entry (docs/journal.md, "Who caused an entry"), as the verifiers and the console's timeline show it. */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const RUN = "run_0123456789abcdef0123456789abcdef";
const TOKEN = { token_id: "tok_0123456789abcdef0123", name: "ci" };
const ENV_TOKEN = { token_id: "env:9fea85daf338cd43", name: "API_TOKENS" };
const ACCESS = { email: "ops@example.com" };
const LINK = { link: "lnk_0123456789abcdef", approver: "finance@example.com" };

const BODIES: [string, Record<string, unknown>][] = [
  ["run.created", { workflow: { id: "review", version: 1 }, mode: "auto", input: {}, by: TOKEN }],
  ["gate.opened", { gate_id: "gate_1", node: "ask", step: "ok" }],
  ["gate.answered", { gate_id: "gate_1", node: "ask", step: "ok", responder: "a note", response: {}, by: ACCESS }],
  ["approval.granted", { gate_id: "gate_2", node: "pay", step: "charge", responder: null, by: LINK }],
  ["signal.received", { event_id: "evt_1", name: "nudge", data_sha256: "00", by: ENV_TOKEN }],
  ["run.status", { from: "running", to: "cancelled", reason: "r", by: { who: "someone" } }],
  ["attest", { outcome: "cancelled", reason: "r", cited: [6], created_by: "token:tok_0123456789abcdef0123" }],
];

const LINES = [
  `OK: 7 entries, run ${RUN}, attested cancelled`,
  `  seq 1 run.created by token "ci" (tok_0123456789abcdef0123)`,
  "  seq 3 gate.answered by Access user ops@example.com",
  "  seq 4 approval.granted by approval link lnk_0123456789abcdef for finance@example.com",
  `  seq 5 signal.received by token "API_TOKENS" (env:9fea85daf338cd43)`,
  `  seq 6 run.status by an unrecognised principal {"who":"someone"}`,
];

let key: JournalSigningKey;
let journal: JournalEntry[];
let jwks: Jwks;

async function sign(bodies: [string, Record<string, unknown>][]): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  let prev: string | null = null;
  for (const [i, [kind, body]] of bodies.entries()) {
    const at = new Date(Date.UTC(2026, 10, 28, 12, 0, 0, i)).toISOString();
    const entry = await signEntry(key, { seq: i + 1, run_id: RUN, kind, at, body, prev });
    entries.push(entry);
    prev = entry.hash;
  }
  return entries;
}

beforeAll(async () => {
  const der = generateKeyPairSync("ed25519").privateKey.export({ type: "pkcs8", format: "der" });
  key = await importSigningKey(der.toString("base64"));
  jwks = toJwks([key.publicJwk]);
  journal = await sign(BODIES);
});

describe("the verifier's report", () => {
  it("lists each entry that carries by, with who caused it in words", async () => {
    const report = await verifyJournal(journal, jwks, { requireAttestation: true });
    expect(report).toMatchObject({ ok: true, entries: 7, attested: true, outcome: "cancelled" });
    expect(report.ok ? report.by : undefined).toEqual([
      { seq: 1, kind: "run.created", by: TOKEN, who: `token "ci" (tok_0123456789abcdef0123)` },
      { seq: 3, kind: "gate.answered", by: ACCESS, who: "Access user ops@example.com" },
      {
        seq: 4,
        kind: "approval.granted",
        by: LINK,
        who: "approval link lnk_0123456789abcdef for finance@example.com",
      },
      { seq: 5, kind: "signal.received", by: ENV_TOKEN, who: `token "API_TOKENS" (env:9fea85daf338cd43)` },
      { seq: 6, kind: "run.status", by: { who: "someone" }, who: `an unrecognised principal {"who":"someone"}` },
    ]);
    expect(formatReport(report)).toBe(LINES.join("\n"));
  });

  it("has no by when no entry carries one, and prints its one line as before", async () => {
    const report = await verifyJournal(await sign(BODIES.map(([kind, { by: _by, ...body }]) => [kind, body])), jwks);
    expect(report).toEqual({ ok: true, entries: 7, run_id: RUN, attested: true, outcome: "cancelled" });
    expect(formatReport(report)).toBe(`OK: 7 entries, run ${RUN}, attested cancelled`);
  });

  it("names no one when the journal fails: a by is only reported once its entry verifies", async () => {
    const altered = journal.map((entry) => ({ ...entry, body: { ...entry.body } }));
    const third = altered[2];
    if (third === undefined) {
      throw new Error("no third entry");
    }
    third.body["by"] = { email: "someone-else@example.com" };
    const report = await verifyJournal(altered, jwks);
    expect(report).toMatchObject({ ok: false, seq: 3, reason: "bad_hash" });
    expect(formatReport(report)).not.toMatch(/someone-else/);
  });
});

describe("the verifier commands", () => {
  let dir: string;

  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), "trellis-by-"));
    writeFileSync(join(dir, "journal.json"), JSON.stringify({ entries: journal }));
    writeFileSync(join(dir, "jwks.json"), JSON.stringify(jwks));
  });

  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });

  it("npm run verify (scripts/verify-journal.ts) prints who caused each entry, and --json carries it", () => {
    const run = (extra: string[]) =>
      spawnSync(
        process.execPath,
        ["scripts/verify-journal.ts", join(dir, "journal.json"), join(dir, "jwks.json"), ...extra],
        { cwd: ROOT, encoding: "utf8", timeout: 20_000 },
      );
    expect(run(["--require-attestation"])).toMatchObject({ status: 0, stdout: `${LINES.join("\n")}\n`, stderr: "" });
    const json: unknown = JSON.parse(run(["--json"]).stdout);
    expect(json).toMatchObject({ ok: true, by: [{ seq: 1, by: TOKEN }, { seq: 3, by: ACCESS }, {}, {}, {}] });
  });

  it("trellis verify <run id> fetches the journal and the keys and prints who caused each entry", async () => {
    const calls: string[] = [];
    const answers: Record<string, unknown> = {
      [`/v1/runs/${RUN}/journal`]: { entries: journal },
      "/v1/journal-keys": jwks,
    };
    const api = {
      json: (method: string, path: string) => {
        calls.push(`${method} ${path}`);
        return Promise.resolve(answers[path]);
      },
    } as unknown as Api;
    let printed = "";
    const out = { write: (text: string) => ((printed += text), true) } as unknown as NodeJS.WriteStream;
    expect(await verifyCommand({ api, json: false, out }, RUN, undefined)).toBe(0);
    expect(calls).toEqual([`GET /v1/runs/${RUN}/journal`, "GET /v1/journal-keys"]);
    expect(printed).toBe(`${LINES.join("\n")}\n`);
    expect(await verifyCommand({ api, json: false, out }, join(dir, "journal.json"), join(dir, "jwks.json"))).toBe(0);
    expect(printed).toBe(`${LINES.join("\n")}\n`.repeat(2));
  });
});

describe("the console's journal timeline", () => {
  it("names who caused each entry that carries by, and nothing on the others", () => {
    const lines = BODIES.map(([kind, body]) => summarizeEntry(kind, body).by);
    expect(lines).toEqual([
      `token "ci" (tok_0123456789abcdef0123)`,
      undefined,
      "Access user ops@example.com",
      "approval link lnk_0123456789abcdef for finance@example.com",
      `token "API_TOKENS" (env:9fea85daf338cd43)`,
      `an unrecognised principal {"who":"someone"}`,
      undefined,
    ]);
    expect(Object.keys(summarizeEntry("gate.opened", { gate_id: "gate_1" }))).toEqual(["node", "step", "summary"]);
  });

  it("shows who made an approval link, and for whom", () => {
    const made = { gate_id: "gate_1", node: "ask", step: "ok", link_id: "lnk_0123456789abcdef" };
    expect(
      summarizeEntry("gate.link_created", {
        ...made,
        approver: "finance@example.com",
        expires_at: "2026-11-29T12:00:00.000Z",
        by: TOKEN,
      }),
    ).toEqual({
      node: "ask",
      step: "ok",
      summary: "gate_1: approval link lnk_0123456789abcdef for finance@example.com, expires 2026-11-29T12:00:00.000Z",
      by: `token "ci" (tok_0123456789abcdef0123)`,
    });
  });

  it("shows a responder as the answerer's note, never as who answered", () => {
    const [, answered = {}] = BODIES[2] ?? [];
    expect(summarizeEntry("gate.answered", answered)).toEqual({
      node: "ask",
      step: "ok",
      summary: "gate_1 answered (responder's note: a note): {}",
      by: "Access user ops@example.com",
    });
    expect(summarizeEntry("approval.rejected", { gate_id: "gate_2", responder: null, by: TOKEN })).toMatchObject({
      summary: "gate_2 rejected",
      by: `token "ci" (tok_0123456789abcdef0123)`,
    });
  });
});
