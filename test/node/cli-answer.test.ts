import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, it } from "vitest";
import { CliError, type Api } from "../../cli/api.ts";
import { answerCommand, runCommand, type Io } from "../../cli/commands.ts";

/** A flag's JSON that does not parse: the error names the flag the user typed (docs/cli.md). */

const dir = mkdtempSync(join(tmpdir(), "trellis-cli-answer-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// Nothing may be sent: the JSON is refused before any request.
const api = { json: () => Promise.reject(new Error("no request expected")) } as unknown as Api;
const io: Io = { api, json: false, out: process.stdout };

async function refusal(promise: Promise<unknown>): Promise<[string, string]> {
  try {
    await promise;
  } catch (thrown) {
    if (thrown instanceof CliError) {
      return [thrown.code, thrown.message];
    }
    throw thrown;
  }
  throw new Error("expected a refusal");
}

describe("a flag's JSON that does not parse", () => {
  it("is blamed on --json in trellis answer", async ({ expect }) => {
    const [code, message] = await refusal(answerCommand(io, "run_1", "gate_1", { json: "{ok: true}" }));
    expect(code).toBe("cli.invalid_input");
    expect(message).toMatch(/^--json is neither a JSON value nor a file: .+: \{ok: true\}$/);
  });

  it("is blamed on --input in trellis run", async ({ expect }) => {
    const [code, message] = await refusal(runCommand(io, "greet", { input: "{name: Ada}" }));
    expect(code).toBe("cli.invalid_input");
    expect(message).toMatch(/^--input is neither a JSON value nor a file: .+: \{name: Ada\}$/);
  });

  it("names the file it read when the flag names a file that is not JSON", async ({ expect }) => {
    const file = join(dir, "answer.yaml");
    writeFileSync(file, "approved: true\n");
    const [, message] = await refusal(answerCommand(io, "run_1", "gate_1", { json: file }));
    expect(message).toMatch(new RegExp(`^--json names the file ${file}, which does not hold JSON: .+`));
  });
});
