/**
 * ECMAScript regular expressions (ECMA-262, the `u` flag: what JSON Schema's `pattern`
 * and `patternProperties` are written in) on the linear-time VM of `iregexp.ts`: this
 * file is a second parser for that VM. V8's `RegExp` backtracks: `^(a|aa)+$` against 42
 * characters ran for seconds, ×2.6 for every two more, and a definition's schema and
 * the strings it checks may both come from anyone holding a token.
 *
 * What is accepted is the regular part of the language, which is what schemas use:
 * characters and escapes (`\n`, `\t`, `\xHH`, `\uHHHH`, `\u{H…}`, `\cX`, `\0`, escaped
 * syntax characters), `.`, classes `[…]` / `[^…]` with ranges, `\d \D \w \W \s \S`,
 * `\p{…}` / `\P{…}` (every property name V8 knows: `L`, `Letter`, `Script=Greek`,
 * `ASCII`…), groups `( … )`, `(?: … )`, `(?<name> … )`, alternation, the quantifiers
 * `* + ? {n} {n,} {n,m}` greedy or lazy, and the assertions `^ $ \b \B`.
 * Refused, with a message saying so: lookaround (`(?= (?! (?<= (?<!`), backreferences
 * (`\1`, `\k<name>`) and inline modifiers (`(?i: …)`), which no linear-time engine
 * offers. A pattern is first compiled by V8 with the `u` flag, so what V8 refuses is
 * refused with V8's message, and what this parser accepts it reads as V8 would.
 *
 * Semantics are ECMAScript's with `u` and no other flag: code points are characters
 * (a surrogate pair is one, a lone surrogate is one); `.` is any character but `\n`,
 * `\r`, U+2028 and U+2029; `\s` is ECMAScript's white space and line terminators; `^`
 * and `$` anchor at the start and end of the text; a pattern matches when some
 * substring matches (`RegExp.prototype.test`). Lazy and greedy quantifiers accept the
 * same strings, which is all a `test` can tell apart.
 *
 * Why not `@bufbuild/re2` (linear too, used by CEL `matches`): its syntax is RE2's, not
 * ECMAScript's (`\u` escapes and `\p{Letter}` differ, `\s` and `.` match other
 * characters), so it would need a parser of ECMAScript patterns all the same; it cannot
 * count its work, only be charged up front for the worst case (input length × program
 * size, at about 45 ns per unit when its DFA cache thrashes, against 9 ns per VM step
 * here); and it has no `\b`-free fallback to tell us about. One VM for JSONPath and JSON
 * Schema also means one budget rule for both.
 */

import { compileProgram, IRegexp, RegexTooLargeError } from "./iregexp.ts";
import { EcmaParser, PatternSyntaxError, UnsupportedPattern } from "./ecma-regexp-parser.ts";

export { MAX_ECMA_PATTERN_NESTING } from "./ecma-regexp-parser.ts";

/** Longest accepted pattern, in code points. */
export const MAX_ECMA_PATTERN_CHARS = 4_096;

/**
 * Why a pattern was refused: `invalid` (V8 does not compile it with the `u` flag),
 * `unsupported` (valid, but not regular: lookaround, backreferences, modifiers) or
 * `too_large` (over a limit above, or over `MAX_IREGEXP_PROGRAM_SIZE` instructions).
 */
export type EcmaPatternRefusal = "invalid" | "unsupported" | "too_large";

export type EcmaPatternCompileResult =
  { ok: true; regex: IRegexp } | { ok: false; reason: EcmaPatternRefusal; message: string };

/** Compiles an ECMAScript pattern (with the `u` flag) for the linear-time VM. */
export function compileEcmaPattern(source: string): EcmaPatternCompileResult {
  const points = Array.from(source);
  if (points.length > MAX_ECMA_PATTERN_CHARS) {
    return {
      ok: false,
      reason: "too_large",
      message: `the pattern is longer than ${MAX_ECMA_PATTERN_CHARS} characters`,
    };
  }
  const syntax = checkEcmaPatternSyntax(source);
  if (syntax !== undefined) {
    return { ok: false, reason: "invalid", message: syntax };
  }
  try {
    return { ok: true, regex: new IRegexp(source, compileProgram(new EcmaParser(points).parseAll())) };
  } catch (thrown) {
    if (thrown instanceof UnsupportedPattern) {
      return {
        ok: false,
        reason: "unsupported",
        message: `${thrown.message}: not supported (patterns run on a linear-time engine, which has no lookaround, backreferences or modifiers)`,
      };
    }
    if (thrown instanceof RegexTooLargeError) {
      return { ok: false, reason: "too_large", message: thrown.message };
    }
    if (thrown instanceof PatternSyntaxError) {
      return { ok: false, reason: "invalid", message: `not a valid ECMAScript regular expression: ${thrown.message}` };
    }
    throw thrown;
  }
}

/**
 * Why `source` is not an ECMAScript pattern with the `u` flag, or undefined when it is:
 * V8's parser decides, with one change. V8 builds the character set of each `\p{…}` as it
 * parses (about 50 µs for `\p{L}` in workerd: 680 of them fit in 4,096 characters, and a
 * string checked against `format: "regex"` may be a megabyte of them), so each `\p{name}`
 * is parsed as `\d`, which may stand exactly where it may (a class escape, never a range
 * end), and each distinct name is checked once, alone, and remembered. Parsing is linear
 * otherwise: about 0.1 µs per character at worst (nested groups).
 */
export function checkEcmaPatternSyntax(source: string): string | undefined {
  const names = new Set<string>();
  let stripped = "";
  for (let at = 0; at < source.length; at += 1) {
    const char = source[at];
    if (char !== "\\") {
      stripped += char;
      continue;
    }
    const next = source[at + 1];
    const property =
      next === "p" || next === "P" ? PROPERTY_ESCAPE.exec(source.slice(at, at + MAX_PROPERTY_ESCAPE_CHARS)) : null;
    if (property !== null) {
      names.add(property[1] ?? "");
      stripped += "\\d";
      at += property[0].length - 1;
    } else {
      // An escape is a backslash and the code unit after it (the rest of a pair follows as is).
      stripped += source.slice(at, at + 2);
      at += 1;
    }
  }
  for (const name of names) {
    if (!isPropertyName(name)) {
      return `not a valid ECMAScript regular expression: \\p{${name}} names no Unicode property of characters`;
    }
  }
  try {
    new RegExp(stripped, "u");
    return undefined;
  } catch (thrown) {
    return `not a valid ECMAScript regular expression: ${thrown instanceof Error ? thrown.message.replace(stripped, () => source) : String(thrown)}`;
  }
}

/** `\p{name}` / `\P{name}` as V8 reads it; a longer or stranger name is left for V8 to refuse. */
const PROPERTY_ESCAPE = /^\\[pP]\{([A-Za-z0-9_=]{1,60})\}/;

const MAX_PROPERTY_ESCAPE_CHARS = 65;

/** Property names V8 accepted or refused, up to a bound (the valid ones are a few thousand spellings). */
const propertyNames = new Map<string, boolean>();

const PROPERTY_NAME_CACHE_LIMIT = 4_096;

function isPropertyName(name: string): boolean {
  let known = propertyNames.get(name);
  if (known === undefined) {
    try {
      new RegExp(`\\p{${name}}`, "u");
      known = true;
    } catch {
      known = false;
    }
    if (propertyNames.size < PROPERTY_NAME_CACHE_LIMIT) {
      propertyNames.set(name, known);
    }
  }
  return known;
}
