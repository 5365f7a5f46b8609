import { existsSync, readFileSync } from "node:fs";
import { verifyJournal, type VerifyReport } from "../lib/journal/index.ts";
import { CliError, type Api } from "./api.ts";

/**
 * Verifies a journal offline: the hash chain and every Ed25519 signature,
 * with the same code the Worker signs with (docs/journal.md). `target` is a
 * run id (its journal and the keys are fetched, then checked here) or a saved
 * journal file, checked against a saved JWKS file or, without one, the
 * server's published keys.
 */
export async function verify(api: Api, target: string, jwksFile: string | undefined): Promise<VerifyReport> {
  const fromFile = existsSync(target);
  if (!fromFile && !/^run_[0-9a-f]{32}$/.test(target)) {
    throw new CliError("cli.not_found", `${target} is neither a file nor a run id (run_ and 32 hex digits)`);
  }
  const journal = fromFile
    ? readJsonFile(target, "journal")
    : await api.json("GET", `/v1/runs/${encodeURIComponent(target)}/journal`);
  const jwks = jwksFile === undefined ? await api.json("GET", "/v1/journal-keys") : readJsonFile(jwksFile, "JWKS");
  return verifyJournal(journal, jwks, fromFile ? {} : { runId: target });
}

function readJsonFile(path: string, what: string): unknown {
  try {
    return JSON.parse(readFileSync(path, "utf8"));
  } catch (thrown) {
    const reason = thrown instanceof Error ? thrown.message : String(thrown);
    throw new CliError("cli.invalid_file", `cannot read the ${what} ${path}: ${reason}`);
  }
}
