import { mkdtempSync, readdirSync, readFileSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { prepareTrellisState } from "../../scripts/peerbench/trellis-state.mjs";

const repo = new URL("../..", import.meta.url).pathname;
const tmp = mkdtempSync(join(tmpdir(), "peerbench-trellis-state-"));
afterAll(() => rmSync(tmp, { recursive: true, force: true }));

/** The text of every local D1 database file under `stateDir` (SQLite keeps a table's CREATE statement as text). */
function d1Text(stateDir: string): string {
  const dir = join(stateDir, "v3", "d1", "miniflare-D1DatabaseObject");
  return readdirSync(dir)
    .filter((name) => name.includes(".sqlite"))
    .map((name) => readFileSync(join(dir, name), "latin1"))
    .join("\n");
}

describe("the peer benchmark's Trellis state", () => {
  it("has the run index's tables before wrangler dev starts, so no index write fails during the measurement", async () => {
    const stateDir = join(tmp, "state");
    const { applied } = await prepareTrellisState({ trellisDir: repo, stateDir, logDir: join(tmp, "logs") });
    expect(applied).toBe(true);
    const text = d1Text(stateDir);
    expect(text).toContain("CREATE TABLE runs (");
    expect(text).toContain("CREATE TABLE blob_holders (");
  }, 120_000);
});
