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
import {
  CharSet,
  IRegexp,
  MAX_IREGEXP_PROGRAM_SIZE,
  RegexTooLargeError,
  compileProgram,
  type RegexNode,
} from "./iregexp.ts";

/** Longest accepted pattern, in code points. */
export const MAX_ECMA_PATTERN_CHARS = 4_096;

/** Deepest nesting of groups `( … )`. */
export const MAX_ECMA_PATTERN_NESTING = 64;

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

/** What V8 accepts but the VM cannot run. */
class UnsupportedPattern extends Error {}
/** What V8 should have refused already; kept so the parser never guesses. */
class PatternSyntaxError extends Error {}

// ───────────────────────────── character sets ─────────────────────────────

const MAX_CODE_POINT = 0x10ffff;

/** `\d`, `\w`, `\s` as inclusive code point ranges (`\s`: WhiteSpace and LineTerminator, ECMA-262 §12.2–12.3). */
const DIGIT_RANGES: readonly number[] = [0x30, 0x39];
const WORD_RANGES: readonly number[] = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];
const SPACE_RANGES: readonly number[] = [
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f, 0x205f, 0x205f,
  0x3000, 0x3000, 0xfeff, 0xfeff,
];
const LINE_TERMINATORS: readonly number[] = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

/** The complement of sorted, disjoint `ranges` within 0…U+10FFFF. */
function complement(ranges: readonly number[]): number[] {
  const out: number[] = [];
  let next = 0;
  for (let i = 0; i < ranges.length; i += 2) {
    const low = ranges[i] ?? 0;
    if (low > next) {
      out.push(next, low - 1);
    }
    next = (ranges[i + 1] ?? MAX_CODE_POINT) + 1;
  }
  if (next <= MAX_CODE_POINT) {
    out.push(next, MAX_CODE_POINT);
  }
  return out;
}

const CLASS_ESCAPES = new Map<string, readonly number[]>([
  ["d", DIGIT_RANGES],
  ["D", complement(DIGIT_RANGES)],
  ["w", WORD_RANGES],
  ["W", complement(WORD_RANGES)],
  ["s", SPACE_RANGES],
  ["S", complement(SPACE_RANGES)],
]);

function rangesSet(ranges: readonly number[], negated = false): CharSet {
  const set = new CharSet();
  addRanges(set, ranges);
  set.negated = negated;
  return set;
}

function addRanges(set: CharSet, ranges: readonly number[]): void {
  for (let i = 0; i < ranges.length; i += 2) {
    set.addRange(ranges[i] ?? 0, ranges[i + 1] ?? -1);
  }
}

// ───────────────────────────── parser (ECMA-262 §22.2.1, [+UnicodeMode]) ─────────────────────────────

/** `SyntaxCharacter` and `/`: what `\` may escape as itself with the `u` flag. */
const IDENTITY_ESCAPES = new Set(["^", "$", "\\", ".", "*", "+", "?", "(", ")", "[", "]", "{", "}", "|", "/"]);

const CONTROL_ESCAPES = new Map<string, number>([
  ["f", 0x0c],
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
  ["v", 0x0b],
]);

const QUANTIFIER_STARTS = new Set(["*", "+", "?", "{"]);

/** A class atom: one character, or a set (`\d`, `\p{L}`…) that cannot bound a range. */
type ClassAtom = { readonly point: number } | { readonly set: CharSet };

const code = (char: string): number => char.codePointAt(0) ?? -1;
const isHex = (char: string | undefined): boolean => char !== undefined && /^[0-9A-Fa-f]$/.test(char);

class EcmaParser {
  private readonly points: readonly string[];
  private at = 0;
  private depth = 0;

  constructor(points: readonly string[]) {
    this.points = points;
  }

  parseAll(): RegexNode {
    const node = this.disjunction();
    if (this.at < this.points.length) {
      throw this.syntax(`unexpected ${JSON.stringify(this.peek())}`);
    }
    return node;
  }

  private peek(offset = 0): string | undefined {
    return this.points[this.at + offset];
  }

  private next(): string {
    const char = this.points[this.at];
    if (char === undefined) {
      throw this.syntax("unexpected end of pattern");
    }
    this.at += 1;
    return char;
  }

  private lookingAt(text: string): boolean {
    return Array.from(text).every((char, i) => this.peek(i) === char);
  }

  private syntax(message: string): PatternSyntaxError {
    return new PatternSyntaxError(`${message} at character ${this.at + 1}`);
  }

  private unsupported(what: string): UnsupportedPattern {
    return new UnsupportedPattern(`${what} at character ${this.at + 1}`);
  }

  private disjunction(): RegexNode {
    const branches = [this.alternative()];
    while (this.peek() === "|") {
      this.at += 1;
      branches.push(this.alternative());
    }
    return branches.length === 1 ? (branches[0] as RegexNode) : { kind: "alternate", items: branches };
  }

  private alternative(): RegexNode {
    const items: RegexNode[] = [];
    for (let char = this.peek(); char !== undefined && char !== "|" && char !== ")"; char = this.peek()) {
      items.push(this.term());
    }
    return items.length === 1 ? (items[0] as RegexNode) : { kind: "concat", items };
  }

  private term(): RegexNode {
    const assertion = this.assertion();
    if (assertion !== undefined) {
      if (QUANTIFIER_STARTS.has(this.peek() ?? "")) {
        throw this.syntax("nothing to repeat");
      }
      return assertion;
    }
    const atom = this.atom();
    return this.quantified(atom);
  }

  private assertion(): RegexNode | undefined {
    const char = this.peek();
    if (char === "^" || char === "$") {
      this.at += 1;
      return { kind: char === "^" ? "begin" : "end" };
    }
    if (char === "\\" && (this.peek(1) === "b" || this.peek(1) === "B")) {
      const negated = this.peek(1) === "B";
      this.at += 2;
      return { kind: "word_boundary", negated };
    }
    return undefined;
  }

  private quantified(atom: RegexNode): RegexNode {
    const char = this.peek();
    let min: number;
    let max: number;
    if (char === "*" || char === "+" || char === "?") {
      this.at += 1;
      [min, max] = [char === "+" ? 1 : 0, char === "?" ? 1 : Infinity];
    } else if (char === "{") {
      [min, max] = this.braceQuantifier();
    } else {
      return atom;
    }
    if (this.peek() === "?") {
      this.at += 1; // Lazy: the same strings match.
    }
    if (QUANTIFIER_STARTS.has(this.peek() ?? "")) {
      throw this.syntax("nothing to repeat");
    }
    return { kind: "repeat", item: atom, min, max };
  }

  private braceQuantifier(): [number, number] {
    this.at += 1; // "{"
    const min = this.count();
    let max = min;
    if (this.peek() === ",") {
      this.at += 1;
      max = this.peek() === "}" ? Infinity : this.count();
    }
    if (this.next() !== "}") {
      throw this.syntax("incomplete quantifier");
    }
    if (max < min) {
      throw this.syntax("numbers out of order in {} quantifier");
    }
    return [min, max];
  }

  private count(): number {
    let digits = "";
    for (let char = this.peek(); char !== undefined && char >= "0" && char <= "9"; char = this.peek()) {
      digits += char;
      this.at += 1;
    }
    if (digits === "") {
      throw this.syntax("incomplete quantifier");
    }
    const value = Number(digits);
    if (value > MAX_IREGEXP_PROGRAM_SIZE) {
      throw new RegexTooLargeError(`quantifier count ${digits} is over ${MAX_IREGEXP_PROGRAM_SIZE}`);
    }
    return value;
  }

  private atom(): RegexNode {
    const char = this.next();
    switch (char) {
      case "(":
        return this.group();
      case ".":
        return { kind: "set", set: rangesSet(LINE_TERMINATORS, true) };
      case "[":
        return { kind: "set", set: this.characterClass() };
      case "\\":
        return { kind: "set", set: this.atomEscape() };
      case "*":
      case "+":
      case "?":
      case "{":
        throw this.syntax("nothing to repeat");
      case ")":
      case "]":
      case "}":
        throw this.syntax(`lone ${JSON.stringify(char)}`);
      default: {
        const set = new CharSet();
        set.addRange(code(char), code(char));
        return { kind: "set", set };
      }
    }
  }

  private group(): RegexNode {
    if (this.peek() === "?") {
      if (this.lookingAt("?=") || this.lookingAt("?!") || this.lookingAt("?<=") || this.lookingAt("?<!")) {
        throw this.unsupported("lookaround");
      }
      if (this.lookingAt("?:")) {
        this.at += 2;
      } else if (this.lookingAt("?<")) {
        this.groupName();
      } else {
        throw this.unsupported("an inline modifier group");
      }
    }
    this.depth += 1;
    if (this.depth > MAX_ECMA_PATTERN_NESTING) {
      throw new RegexTooLargeError(`groups nest deeper than ${MAX_ECMA_PATTERN_NESTING}`);
    }
    const inner = this.disjunction();
    if (this.next() !== ")") {
      throw this.syntax("unterminated group");
    }
    this.depth -= 1;
    return inner;
  }

  /** After `(`: skips `?<name>` (V8 has checked the name). */
  private groupName(): void {
    this.at += 2;
    while (this.next() !== ">") {
      // The name itself changes nothing that matches.
    }
  }

  /** After `\` outside a class. */
  private atomEscape(): CharSet {
    const char = this.peek();
    if (char !== undefined && char >= "1" && char <= "9") {
      throw this.unsupported("a backreference");
    }
    if (char === "k") {
      throw this.unsupported("a named backreference");
    }
    const atom = this.classEscapeOrCharacter(false);
    return "set" in atom ? atom.set : rangesSet([atom.point, atom.point]);
  }

  /** After `\`: a class escape (`\d`, `\p{…}`) or a character escape; `inClass` allows `\b` (backspace) and `\-`. */
  private classEscapeOrCharacter(inClass: boolean): ClassAtom {
    const char = this.next();
    const ranges = CLASS_ESCAPES.get(char);
    if (ranges !== undefined) {
      return { set: rangesSet(ranges) };
    }
    if (char === "p" || char === "P") {
      const set = new CharSet();
      set.addCategory(this.propertyName(), char === "P");
      return { set };
    }
    if (inClass && char === "b") {
      return { point: 0x08 };
    }
    if (inClass && char === "-") {
      return { point: 0x2d };
    }
    return { point: this.characterEscape(char) };
  }

  /** `\p{…}`'s name; V8 has checked it names a property of single characters. */
  private propertyName(): string {
    if (this.next() !== "{") {
      throw this.syntax("invalid property name");
    }
    let name = "";
    for (let char = this.next(); char !== "}"; char = this.next()) {
      name += char;
    }
    // One fixed-size character test is built from it (`iregexp.ts` CharSet): it cannot backtrack.
    if (!/^[A-Za-z0-9_=]+$/.test(name)) {
      throw this.syntax("invalid property name");
    }
    return name;
  }

  /** The character after `\` stands for (a `CharacterEscape`, `char` consumed). */
  private characterEscape(char: string): number {
    const control = CONTROL_ESCAPES.get(char);
    if (control !== undefined) {
      return control;
    }
    if (IDENTITY_ESCAPES.has(char)) {
      return code(char);
    }
    switch (char) {
      case "0":
        if (/^[0-9]$/.test(this.peek() ?? "")) {
          throw this.syntax("invalid decimal escape");
        }
        return 0;
      case "c": {
        const letter = this.next();
        if (!/^[A-Za-z]$/.test(letter)) {
          throw this.syntax("invalid unicode escape");
        }
        return code(letter) % 32;
      }
      case "x":
        return this.hexDigits(2);
      case "u":
        return this.unicodeEscape();
      default:
        throw this.syntax(`invalid escape \\${char}`);
    }
  }

  private hexDigits(count: number): number {
    let digits = "";
    for (let i = 0; i < count; i += 1) {
      const char = this.next();
      if (!isHex(char)) {
        throw this.syntax("invalid escape");
      }
      digits += char;
    }
    return Number.parseInt(digits, 16);
  }

  /** After `\u`: `{H…}`, or four hex digits, joined with a following `\uHHHH` trail surrogate when it is one. */
  private unicodeEscape(): number {
    if (this.peek() === "{") {
      this.at += 1;
      let digits = "";
      for (let char = this.next(); char !== "}"; char = this.next()) {
        if (!isHex(char)) {
          throw this.syntax("invalid unicode escape");
        }
        digits += char;
      }
      const point = Number.parseInt(digits, 16);
      if (digits === "" || point > MAX_CODE_POINT) {
        throw this.syntax("invalid unicode escape");
      }
      return point;
    }
    const lead = this.hexDigits(4);
    if (
      lead >= 0xd800 &&
      lead <= 0xdbff &&
      this.peek() === "\\" &&
      this.peek(1) === "u" &&
      [2, 3, 4, 5].every((i) => isHex(this.peek(i)))
    ) {
      const trail = Number.parseInt(this.points.slice(this.at + 2, this.at + 6).join(""), 16);
      if (trail >= 0xdc00 && trail <= 0xdfff) {
        this.at += 6;
        return 0x10000 + ((lead - 0xd800) << 10) + (trail - 0xdc00);
      }
    }
    return lead;
  }

  /** After `[`: `[^]? ClassContents ]`, without the `v` flag's set operations. */
  private characterClass(): CharSet {
    const set = new CharSet();
    if (this.peek() === "^") {
      this.at += 1;
      set.negated = true;
    }
    while (this.peek() !== "]") {
      const low = this.classAtom();
      if (this.peek() === "-" && this.peek(1) !== "]" && this.peek(1) !== undefined) {
        this.at += 1;
        const high = this.classAtom();
        if (!("point" in low) || !("point" in high)) {
          throw this.syntax("invalid character class");
        }
        if (high.point < low.point) {
          throw this.syntax("range out of order in character class");
        }
        set.addRange(low.point, high.point);
        continue;
      }
      addClassAtom(set, low);
    }
    this.at += 1; // "]"
    return set;
  }

  private classAtom(): ClassAtom {
    const char = this.next();
    if (char === "\\") {
      return this.classEscapeOrCharacter(true);
    }
    return { point: code(char) };
  }
}

/** Adds a class atom to a class: a character, or the characters of a set (a negated set as its complement or a negated category). */
function addClassAtom(set: CharSet, atom: ClassAtom): void {
  // Class escapes come as ranges already complemented (`\D`) or as categories that carry their own negation (`\P{L}`).
  if ("point" in atom) {
    set.addRange(atom.point, atom.point);
    return;
  }
  addRanges(set, atom.set.ranges);
  set.categories.push(...atom.set.categories);
}
