import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, it } from "vitest";
import { z } from "zod";
import { JOURNAL_BODIES, JOURNAL_KINDS, redriveReason, RUN_STATUS_REASONS } from "../../schemas/journal-bodies.ts";

/**
 * docs/journal.md's "Entry kinds" table and the schema table in
 * schemas/journal-bodies.ts say the same: the same kinds, and for each kind the same
 * top-level body fields. In the docs, a field is a name in backticks in the
 * body column (`name`, `name?` or `name { … }`) outside parentheses; quoted
 * values (`"started"`) and what parentheses explain are not fields.
 */

const DOC = readFileSync(fileURLToPath(new URL("../../docs/journal.md", import.meta.url)), "utf8");

/** The rows of the "Entry kinds" table: kind → its body cell. */
function documentedRows(markdown: string): Map<string, string> {
  const section = markdown.split(/^## Entry kinds$/m)[1]?.split(/^## /m)[0] ?? "";
  const rows = new Map<string, string>();
  for (const line of section.split("\n")) {
    const cells = line.split(/(?<!\\)\|/).map((cell) => cell.trim());
    // A row: | kind | when | body |, the kind in backticks (the header and the rule are skipped).
    const kind = /^`([a-z_.]+)`$/.exec(cells[1] ?? "")?.[1];
    if (kind !== undefined && cells.length === 5) {
      rows.set(kind, cells[3] ?? "");
    }
  }
  return rows;
}

/** Removes every parenthesised part, nested ones included. */
function withoutParentheses(text: string): string {
  let out = "";
  let depth = 0;
  for (const char of text) {
    if (char === "(") {
      depth += 1;
    } else if (char === ")") {
      depth = Math.max(0, depth - 1);
    } else if (depth === 0) {
      out += char;
    }
  }
  return out;
}

function documentedFields(body: string): string[] {
  const fields = new Set<string>();
  for (const match of withoutParentheses(body).matchAll(/`([^`]+)`/g)) {
    const field = /^([a-z_][a-z0-9_]*)\??(\s*\{.*\})?$/.exec(match[1] ?? "")?.[1];
    if (field !== undefined) {
      fields.add(field);
    }
  }
  return [...fields].sort();
}

/** The top-level keys a body schema allows: an object's, or those of every member of a union. */
function schemaFields(schema: z.ZodType): string[] {
  if (schema instanceof z.ZodObject) {
    return Object.keys(schema.shape).sort();
  }
  if (schema instanceof z.ZodUnion) {
    const options = schema.options as readonly z.ZodType[];
    return [...new Set(options.flatMap(schemaFields))].sort();
  }
  throw new Error(`a body schema is an object or a union of objects, not ${schema.constructor.name}`);
}

describe("docs/journal.md's entry kinds", () => {
  const rows = documentedRows(DOC);

  it("documents exactly the kinds of the schema table", ({ expect }) => {
    expect(rows.size).toBeGreaterThan(20);
    expect([...rows.keys()].sort()).toEqual([...JOURNAL_KINDS].sort());
  });

  it.for(JOURNAL_KINDS)("documents the body fields of %s as its schema has them", (kind, { expect }) => {
    expect(documentedFields(rows.get(kind) ?? "")).toEqual(schemaFields(JOURNAL_BODIES[kind]));
  });

  it.for(Object.values(RUN_STATUS_REASONS))(
    "names the run.status reason %j the engine writes",
    (reason, { expect }) => {
      expect(rows.get("run.status")).toContain(`\`"${reason}"\``);
    },
  );

  it("names the redrive reason in the form the engine writes it", ({ expect }) => {
    expect(redriveReason(3)).toBe("redrive 3");
    expect(rows.get("run.status")).toContain('`"redrive <n>"`');
  });
});
