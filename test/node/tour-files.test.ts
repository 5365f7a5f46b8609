import { spawnSync } from "node:child_process";
import { copyFileSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, it } from "vitest";

/**
 * The README's tour saves `journal.json` and `jwks.json` in the repository's
 * folder (where `npm run verify` reads them): neither may break `npm test`'s
 * format check (`prettier --check .`) nor show up in `git status`.
 */

const root = join(import.meta.dirname, "..", "..");
const TOUR_FILES = ["journal.json", "jwks.json"];

// A copy of the repository's ignore files and format config beside the files the tour writes, as curl writes them.
const dir = mkdtempSync(join(tmpdir(), "trellis-tour-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("the files the README's tour saves", () => {
  it("do not fail the format check that npm test runs first", ({ expect }) => {
    for (const file of [".gitignore", ".prettierignore", ".prettierrc.json"]) {
      copyFileSync(join(root, file), join(dir, file));
    }
    writeFileSync(join(dir, "journal.json"), '{"run_id":"run_1","entries":[{"seq":1,"kind":"run.created"}]}');
    writeFileSync(join(dir, "jwks.json"), '{"keys":[{"kty":"OKP","crv":"Ed25519","x":"AAAA"}]}');
    // Something prettier does check, so the run is not an empty match.
    writeFileSync(join(dir, "formatted.json"), '{ "a": 1 }\n');
    const prettier = join(root, "node_modules", ".bin", "prettier");
    const result = spawnSync(prettier, ["--check", "--log-level=warn", "."], { cwd: dir, encoding: "utf8" });
    expect(`${result.stdout}${result.stderr}`).toBe("");
    expect(result.status).toBe(0);
  });

  it("are ignored by git at the repository's root", ({ expect }) => {
    const result = spawnSync("git", ["check-ignore", "--no-index", ...TOUR_FILES], { cwd: root, encoding: "utf8" });
    expect(result.stdout.split("\n").filter((line) => line !== "")).toEqual(TOUR_FILES);
  });
});
