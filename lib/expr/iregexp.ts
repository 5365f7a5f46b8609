/**
 * I-Regexp (RFC 9485), the regular expressions of JSONPath's `match()` and `search()`,
 * on a linear-time engine of our own: a parser of the RFC's grammar and a Pike VM (a
 * breadth-first NFA simulation, as in RE2) that visits each program instruction at most
 * once per input position, so a match costs O(input length × program size) and never
 * backtracks. Every step is charged to a {@link RegexBudget}; exceeding it fails with
 * `expr.budget_exceeded`.
 *
 * Why not the alternatives (measured in Node 22 on this machine):
 * - json-p3's own `match`/`search` use the backtracking `RegExp`: `(a|aa)+` against 41
 *   characters ran for seconds, growing ×11 per 5 characters, and the pattern can come
 *   from run input (`match(@.name, $.input.re)`).
 * - `@bufbuild/re2` (the RE2 port `@bufbuild/cel` uses for CEL `matches`, already
 *   installed) is linear, but its fallback when its DFA cache thrashes costs about 45 ns
 *   per input character × instruction (`[ab]*a[ab]{250}[cd]` on 400 KB: 4.2 s;
 *   `{999}` on 100 KB: 4.5 s), it offers no hook to count or stop work, and it speaks
 *   RE2 syntax, so I-Regexp would still need its own parser and a translation.
 * - `re2js` (npm) is the same RE2/J port with the same properties, and a new dependency.
 * A Pike VM over the I-Regexp grammar is about 300 lines, implements exactly the RFC's
 * semantics (no translation), and charges every step to the one budget of the JSONPath
 * evaluation, which no library offered; its worst case is measured in
 * docs/definitions.md ("Budgets").
 *
 * Semantics: a pattern matches code points (a surrogate pair is one character, a lone
 * surrogate is one character); `.` is any character but `\n` and `\r`; `\p{…}`/`\P{…}`
 * take the RFC's general categories (`L`, `Lu`, `Nd`, …), tested with single-character
 * `RegExp`s (`/\p{Lu}/uy`), which cannot backtrack. One deviation from the grammar, where
 * `^` and `$` are ordinary characters: unescaped outside a class they anchor at the start
 * and end of the input, as in the ECMAScript and RE2 mappings of RFC 9485 §5 and as the
 * JSONPath Compliance Test Suite expects (`match(@, '^ab.*')` matches `"abc"`).
 */

import type { RegexBudget } from "./iregexp-limits.ts";
import { MAX_IREGEXP_SOURCE_CHARS, RegexTooLargeError } from "./iregexp-limits.ts";
import { Parser, RegexSyntaxError } from "./iregexp-parser.ts";
import { compileProgram, type Program } from "./iregexp-program.ts";
import { runVm } from "./iregexp-vm.ts";

export { CharSet } from "./iregexp-charset.ts";
export { type Program, compileProgram } from "./iregexp-program.ts";
export type { RegexNode } from "./iregexp-parser.ts";
export {
  MAX_IREGEXP_NESTING,
  MAX_IREGEXP_PROGRAM_SIZE,
  MAX_IREGEXP_SOURCE_CHARS,
  MAX_REGEX_STEPS,
  RegexBudget,
  RegexTooLargeError,
} from "./iregexp-limits.ts";

/** A compiled pattern, or why it is not one (`invalid`: not I-Regexp; `too_large`: over a limit above). */
export type IRegexpCompileResult =
  { ok: true; regex: IRegexp } | { ok: false; reason: "invalid" | "too_large"; message: string };

/** A compiled I-Regexp. */
export class IRegexp {
  readonly source: string;
  readonly program: Program;
  constructor(source: string, program: Program) {
    this.source = source;
    this.program = program;
  }
  /** Instructions of the compiled program. */
  get size(): number {
    return this.program.op.length;
  }
  /** Whether the whole of `text` matches (JSONPath `match()`). */
  matches(text: string, budget: RegexBudget): boolean {
    return runVm(this.program, text, true, budget);
  }
  /** Whether some substring of `text` matches (JSONPath `search()`). */
  search(text: string, budget: RegexBudget): boolean {
    return runVm(this.program, text, false, budget);
  }
}

/** Parses and compiles `source`. */
export function compileIRegexp(source: string): IRegexpCompileResult {
  const points = Array.from(source);
  if (points.length > MAX_IREGEXP_SOURCE_CHARS) {
    return {
      ok: false,
      reason: "too_large",
      message: `regular expression is longer than ${MAX_IREGEXP_SOURCE_CHARS} characters`,
    };
  }
  try {
    const node = new Parser(points).parseAll();
    return { ok: true, regex: new IRegexp(source, compileProgram(node)) };
  } catch (thrown) {
    if (thrown instanceof RegexSyntaxError) {
      return { ok: false, reason: "invalid", message: `not a valid I-Regexp (RFC 9485): ${thrown.message}` };
    }
    if (thrown instanceof RegexTooLargeError) {
      return { ok: false, reason: "too_large", message: thrown.message };
    }
    throw thrown;
  }
}
