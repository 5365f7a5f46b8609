import { existsSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import { ACTION_KINDS } from "../../schemas/index.ts";

/**
 * The docs are one of the places a new action kind must reach
 * (docs/architecture.md, "A new action kind"): these tests fail until the
 * definition language documents every kind of `ACTION_IMPLEMENTATIONS`, and
 * while the architecture names a file that does not exist.
 */
const root = fileURLToPath(new URL("../../", import.meta.url));
const read = (path: string) => readFileSync(`${root}${path}`, "utf8");

/** The text of the section that starts at `heading`, up to the next heading of its level or higher. */
function section(markdown: string, heading: string): string {
  const start = markdown.indexOf(`\n${heading}\n`);
  expect(start, `no "${heading}" heading`).toBeGreaterThanOrEqual(0);
  const level = heading.indexOf(" ");
  const rest = markdown.slice(start + heading.length + 2);
  const end = rest.search(new RegExp(`\\n#{1,${level}} `));
  return end === -1 ? rest : rest.slice(0, end);
}

const sorted = (values: Iterable<string>) => [...values].sort();

describe("the docs of action kinds", () => {
  const definitions = read("docs/definitions.md");

  it("list every kind, and only those, in the kind row of the Action table", () => {
    const row = section(definitions, "## Action")
      .split("\n")
      .find((line) => line.startsWith("| `kind` |"));
    expect(row).toBeDefined();
    const listed = (row ?? "").split("|")[2]?.match(/`([a-z]+)`/g) ?? [];
    expect(sorted(listed.map((code) => code.slice(1, -1)))).toEqual(sorted(ACTION_KINDS));
  });

  it("describe each kind's implementation", () => {
    const implementations = section(definitions, "### Implementation per kind");
    const described = [...implementations.matchAll(/^\*\*`([a-z]+)`\*\*/gm)].map((match) => match[1] ?? "");
    expect(sorted(new Set(described))).toEqual(sorted(ACTION_KINDS));
  });

  it("name, for a new kind, only files that exist", () => {
    const steps = section(read("docs/architecture.md"), "### A new action kind");
    const files = [...steps.matchAll(/`((?:schemas|catalog|executor|coordinator|docs|test)\/[\w./-]+\.(?:ts|md))`/g)]
      .map((match) => match[1] ?? "")
      .filter((file) => !file.includes("<"));
    expect(files.length).toBeGreaterThan(5);
    for (const file of files) {
      expect(existsSync(`${root}${file}`), file).toBe(true);
    }
  });
});
