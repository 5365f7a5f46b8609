#!/usr/bin/env node
/**
 * `npm run check:size`: no source file over 400 lines and no function over 60
 * (issue 11's bound on where complexity may hide). Tests, vendored and
 * generated files are exempt. Prints every offender and exits non-zero when
 * there is one; `--report` prints them without failing.
 */
import { readFileSync } from "node:fs";
import { execFileSync } from "node:child_process";
import ts from "typescript";

const MAX_FILE_LINES = 400;
const MAX_FUNCTION_LINES = 60;
const SOURCE = /\.(ts|tsx|mjs|js)$/;
const EXEMPT = [/^test\//, /\/vendor\//, /\.d\.ts$/, /^node_modules\//, /^\.wrangler\//];

const files = execFileSync("git", ["ls-files", "--cached", "--others", "--exclude-standard"], { encoding: "utf8" })
  .split("\n")
  .filter((file) => SOURCE.test(file) && !EXEMPT.some((pattern) => pattern.test(file)));

/** @type {string[]} */
const problems = [];
for (const file of files) {
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch {
    continue; // deleted in the work tree
  }
  const lines = text.split("\n").length;
  if (lines > MAX_FILE_LINES) {
    problems.push(`${file}: ${lines} lines (max ${MAX_FILE_LINES})`);
  }
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const visit = (/** @type {ts.Node} */ node) => {
    if (ts.isFunctionLike(node) && "body" in node && node.body) {
      const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
      const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
      const length = end - start + 1;
      if (length > MAX_FUNCTION_LINES) {
        problems.push(`${file}:${start + 1}: ${functionName(node)} is ${length} lines (max ${MAX_FUNCTION_LINES})`);
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
}

/** @param {ts.Node} node */
function functionName(node) {
  const named = /** @type {{ name?: ts.Node }} */ (node).name;
  if (named && ts.isIdentifier(named)) {
    return named.text;
  }
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) {
    return parent.name.text;
  }
  if (parent && ts.isPropertyAssignment(parent)) {
    return parent.name.getText();
  }
  return "a function";
}

for (const problem of problems) {
  process.stdout.write(`${problem}\n`);
}
if (problems.length > 0 && !process.argv.includes("--report")) {
  process.stderr.write(`[check-size] ${problems.length} over the bounds\n`);
  process.exit(1);
}
