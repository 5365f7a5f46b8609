#!/usr/bin/env node
/**
 * Offline verifier of a Trellis run journal.
 *
 *   node scripts/verify-journal.ts <journal.json|-> <jwks.json> [--require-attestation] [--run-id <id>] [--json]
 *
 * <journal.json> is the body of `GET /v1/runs/{id}/journal` (`{ "entries": [...] }`)
 * or a bare array of entries; `-` reads it from standard input. <jwks.json> is
 * the body of `GET /v1/journal-keys`. Files only: nothing is fetched.
 *
 * Prints one line, `OK: …` or `FAIL: …`, and exits 0 when the journal verifies,
 * 1 when it does not, 2 on a usage error (bad arguments, unreadable file,
 * unusable JWKS). `--json` prints the full report as JSON instead.
 *
 * Runs on Node ≥ 22.18 (type stripping), importing the same modules as the Worker.
 */
import { readFileSync } from "node:fs";
import { formatReport, readJwks, verifyJournal, type VerifyReport } from "../lib/journal/index.ts";

const USAGE = `usage: node scripts/verify-journal.ts <journal.json|-> <jwks.json> [--require-attestation] [--run-id <id>] [--json]

  <journal.json>         the body of GET /v1/runs/{id}/journal, or an array of entries; - for stdin
  <jwks.json>            the body of GET /v1/journal-keys
  --require-attestation  fail unless the journal ends with its attestation (a finished run)
  --run-id <id>          fail unless the journal belongs to this run
  --json                 print the verification report as JSON

exit status: 0 verified, 1 not verified, 2 usage error`;

class UsageError extends Error {}

interface Args {
  journal: string;
  jwks: string;
  requireAttestation: boolean;
  runId: string | undefined;
  json: boolean;
}

function parseArgs(argv: string[]): Args | "help" {
  const positional: string[] = [];
  let requireAttestation = false;
  let runId: string | undefined;
  let json = false;
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i] ?? "";
    if (arg === "-h" || arg === "--help") {
      return "help";
    } else if (arg === "--require-attestation") {
      requireAttestation = true;
    } else if (arg === "--json") {
      json = true;
    } else if (arg === "--run-id" || arg.startsWith("--run-id=")) {
      const value = arg === "--run-id" ? argv[++i] : arg.slice("--run-id=".length);
      if (value === undefined || value === "") {
        throw new UsageError("--run-id needs a value");
      }
      runId = value;
    } else if (arg.startsWith("-") && arg !== "-") {
      throw new UsageError(`unknown option ${arg}`);
    } else {
      positional.push(arg);
    }
  }
  const [journal, jwks, ...rest] = positional;
  if (journal === undefined || jwks === undefined) {
    throw new UsageError("expected a journal file and a JWKS file");
  }
  if (rest.length > 0) {
    throw new UsageError(`unexpected argument ${rest[0] ?? ""}`);
  }
  if (jwks === "-") {
    throw new UsageError("only the journal can be read from stdin (-)");
  }
  return { journal, jwks, requireAttestation, runId, json };
}

function readText(path: string, what: string): string {
  try {
    return readFileSync(path === "-" ? 0 : path, "utf8");
  } catch (error) {
    const reason = error instanceof Error ? error.message : String(error);
    throw new UsageError(`cannot read the ${what} ${path === "-" ? "from stdin" : path}: ${reason}`);
  }
}

/** The JWKS file's JSON, checked to hold usable keys; a UsageError when it does not. */
async function loadJwks(path: string): Promise<unknown> {
  const jwksText = readText(path, "JWKS");
  let jwks: unknown;
  try {
    jwks = JSON.parse(jwksText);
  } catch (error) {
    throw new UsageError(`the JWKS ${path} is not JSON: ${error instanceof Error ? error.message : String(error)}`);
  }
  try {
    await readJwks(jwks);
  } catch (error) {
    throw new UsageError(`the JWKS ${path} is unusable: ${error instanceof Error ? error.message : String(error)}`);
  }
  return jwks;
}

async function main(argv: string[]): Promise<number> {
  let args: Args | "help";
  try {
    args = parseArgs(argv);
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`verify-journal: ${error.message}\n${USAGE}\n`);
      return 2;
    }
    throw error;
  }
  if (args === "help") {
    process.stdout.write(`${USAGE}\n`);
    return 0;
  }
  let jwks: unknown;
  let journal: unknown;
  try {
    jwks = await loadJwks(args.jwks);
    const journalText = readText(args.journal, "journal");
    try {
      journal = JSON.parse(journalText);
    } catch (error) {
      const report: VerifyReport = {
        ok: false,
        seq: null,
        index: -1,
        reason: "malformed",
        message: `journal: malformed — not JSON: ${error instanceof Error ? error.message : String(error)}`,
      };
      process.stdout.write(`${args.json ? JSON.stringify(report) : formatReport(report)}\n`);
      return 1;
    }
  } catch (error) {
    if (error instanceof UsageError) {
      process.stderr.write(`verify-journal: ${error.message}\n`);
      return 2;
    }
    throw error;
  }
  const report = await verifyJournal(journal, jwks, {
    requireAttestation: args.requireAttestation,
    ...(args.runId === undefined ? {} : { runId: args.runId }),
  });
  process.stdout.write(`${args.json ? JSON.stringify(report) : formatReport(report)}\n`);
  return report.ok ? 0 : 1;
}

process.exitCode = await main(process.argv.slice(2));
