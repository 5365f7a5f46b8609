import { readFileSync } from "node:fs";
import { describe, it } from "vitest";

type LockEntry = { optionalDependencies?: Record<string, string> };
const root = new URL("../../", import.meta.url).pathname;
const lock = JSON.parse(readFileSync(`${root}package-lock.json`, "utf8")) as { packages: Record<string, LockEntry> };

/** Where npm would look for `name` as a dependency of the package at `at`: nested first, then hoisted. */
function locked(at: string, name: string): boolean {
  const nested = `${at === "" ? "" : `${at}/`}node_modules/${name}`;
  return nested in lock.packages || `node_modules/${name}` in lock.packages;
}

describe("package-lock.json", () => {
  // npm on one platform writes the binaries of every platform into the lock it resolves fresh; a lock
  // that lacks them is rewritten by the first `npm install` (a dirty clone) and gives `npm ci` elsewhere
  // no binary at all.
  it("lists every platform binary that a locked package may need (workerd's among them)", ({ expect }) => {
    const missing = Object.entries(lock.packages).flatMap(([at, entry]) =>
      Object.keys(entry.optionalDependencies ?? {})
        .filter((name) => !locked(at, name))
        .map((name) => `${at} -> ${name}`),
    );
    expect(missing).toEqual([]);
    for (const platform of ["darwin-arm64", "darwin-64", "linux-arm64", "linux-64", "windows-64"]) {
      expect(lock.packages).toHaveProperty([`node_modules/@cloudflare/workerd-${platform}`]);
    }
  });
});
