/**
 * The two pattern dialects, read by one translator that writes RE2 syntax with the
 * dialect's meaning for the engine of `regex.ts`: every literal as `\x{…}`, `.` as a class
 * without the dialect's line terminators, groups as `(?:…)`. Characters are code points
 * (a lone surrogate is one); RE2's `$` is the end of the input, never before a final newline.
 *
 * **I-Regexp** (RFC 9485, JSONPath `match()`/`search()`) is checked here by the grammar of
 * its §5.3, with one deviation: unescaped `^` and `$` outside a class anchor at the start
 * and end (the grammar has them ordinary), as the JSONPath Compliance Test Suite expects
 * (`match(@, '^ab.*')` matches `"abc"`).
 *
 * **ECMAScript** with the `u` flag (JSON Schema `pattern`, `patternProperties`, `format:
 * "regex"`) is checked by V8 ({@link checkEcmaPatternSyntax}), whose backtracking `RegExp`
 * never matches (`^(a|aa)+$` against 42 characters ran for seconds). Its additions: `\s`
 * and `\S` as ECMAScript's white space and line terminators (RE2's `\s` is ASCII; `\d \w
 * \b` are ASCII in both), `[^]` as any character, `[]` as none, `[\b]` as a backspace,
 * `\p{…}` names ({@link propertyItems}), lazy quantifiers (the same strings match). Refused
 * as `unsupported`: lookaround, backreferences and inline modifiers, which no linear-time
 * engine offers.
 */
import { RE2JS, RE2JSException } from "@bufbuild/re2";
import { setBounded } from "../bounded-cache.ts";
import { compileRe2, compileWorkAfter, compileWorkBefore, type Regex } from "./regex.ts";

/** Longest I-Regexp or ECMAScript pattern accepted, in code points. */
export const MAX_REGEX_SOURCE_CHARS = 4_096;

/** Largest program, in instructions with `{n,m}` expanded, estimated before compiling. */
export const MAX_REGEX_PROGRAM_SIZE = 10_000;

/** Deepest nesting of groups `( … )`. */
export const MAX_REGEX_NESTING = 64;

/** RE2's largest repeat count in `{n,m}`. */
export const MAX_REGEX_REPEAT = 1_000;

/** Why a pattern was refused: not the dialect (`invalid`), not regular (`unsupported`), over a limit above (`too_large`). */
type RegexRefusal = "invalid" | "unsupported" | "too_large";

export type RegexCompileResult = { ok: true; regex: Regex } | { ok: false; reason: RegexRefusal; message: string };

class RegexRefused extends Error {
  readonly reason: RegexRefusal;
  constructor(reason: RegexRefusal, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** An I-Regexp (RFC 9485) compiled to RE2: `match()` runs it anchored at both ends, `search()` anywhere. */
export function compileIRegexp(source: string, charge?: (work: number) => void): RegexCompileResult {
  return compilePattern(source, false, charge);
}

/** An ECMAScript pattern (the `u` flag) compiled to RE2: it matches where it matches somewhere (`RegExp.prototype.test`). */
export function compileEcmaPattern(source: string, charge?: (work: number) => void): RegexCompileResult {
  return compilePattern(source, true, charge);
}

/**
 * Checks, translates and compiles a pattern, charging `charge` (when given)
 * {@link compileWorkBefore} once translated and {@link compileWorkAfter} once compiled.
 * RE2's own refusals of a translation are its size limits (nested repeats over 1,000).
 */
function compilePattern(source: string, ecma: boolean, charge?: (work: number) => void): RegexCompileResult {
  try {
    const translator = new Translator(source, ecma);
    const syntax = ecma ? checkEcmaPatternSyntax(source) : undefined;
    if (syntax !== undefined) {
      throw new RegexRefused("invalid", syntax);
    }
    const translation = translator.translate();
    charge?.(compileWorkBefore(translation.size));
    const regex = compileRe2(translation.source);
    charge?.(compileWorkAfter(regex));
    return { ok: true, regex };
  } catch (thrown) {
    if (thrown instanceof RegexRefused) {
      return { ok: false, reason: thrown.reason, message: thrown.message };
    }
    if (thrown instanceof RE2JSException) {
      return { ok: false, reason: "too_large", message: `the pattern is too large for RE2: ${thrown.message}` };
    }
    throw thrown;
  }
}

/**
 * The estimated program size of a pattern as it is read: a size per open group,
 * multiplied out by each quantifier, refused past {@link MAX_REGEX_PROGRAM_SIZE}.
 */
class ProgramSize {
  private readonly groups: number[] = [0];
  private last = 0;
  get total(): number {
    return this.groups[0] ?? 0;
  }
  open(): void {
    if (this.groups.length > MAX_REGEX_NESTING) {
      throw new RegexRefused("too_large", `groups nest deeper than ${MAX_REGEX_NESTING}`);
    }
    this.groups.push(0);
  }
  close(): void {
    this.last = 1 + (this.groups.pop() ?? 0);
    this.add(this.last);
  }
  atom(): void {
    this.last = 1;
    this.add(1);
  }
  /** The last atom or group, repeated `min` to `max` times (`max` Infinity: unbounded). */
  repeat(min: number, max: number): void {
    if (min > MAX_REGEX_REPEAT || (max !== Infinity && max > MAX_REGEX_REPEAT)) {
      throw new RegexRefused("too_large", `repeat count ${max === Infinity ? min : max} is over ${MAX_REGEX_REPEAT}`);
    }
    this.add(this.last * ((max === Infinity ? min + 1 : max) - 1) + 1);
  }
  private add(size: number): void {
    const top = this.groups.length - 1;
    this.groups[top] = (this.groups[top] ?? 0) + size;
    if ((this.groups[top] ?? 0) > MAX_REGEX_PROGRAM_SIZE) {
      throw new RegexRefused("too_large", `the program would pass ${MAX_REGEX_PROGRAM_SIZE} instructions`);
    }
  }
}

const ANY = "\\x{0}-\\x{10ffff}";
const NEVER = `[^${ANY}]`;
const SPACE =
  "\\x{9}-\\x{d}\\x{20}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}";
const NOT_SPACE =
  "\\x{0}-\\x{8}\\x{e}-\\x{1f}\\x{21}-\\x{9f}\\x{a1}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{fefe}\\x{ff00}-\\x{10ffff}";

/** `\` and a character, as the character it stands for: I-Regexp's `SingleCharEsc`, and ECMAScript's. */
const ESCAPES = new Map<string, number>([
  ...Array.from("()*+-.?[\\]^{|}$/", (c): [string, number] => [c, c.codePointAt(0) ?? 0]),
  ...Object.entries({ n: 0x0a, r: 0x0d, t: 0x09, f: 0x0c, v: 0x0b, b: 0x08, 0: 0 }),
]);

/** Of {@link ESCAPES}, ECMAScript's only (V8 allows `\-` in a class only, `\b` there is a backspace). */
const ECMA_ONLY_ESCAPES = "$/fvb0";

/** An escape: one character (which may bound a range), or class items (`\d`, `\p{L}`…). */
type EscapeItem = { readonly point: number } | { readonly items: string };

const isSurrogate = (point: number): boolean => point >= 0xd800 && point <= 0xdfff;

/** A code point as an RE2 literal. */
function re2Literal(point: number): string {
  return /^[A-Za-z0-9]$/.test(String.fromCodePoint(point)) ? String.fromCodePoint(point) : `\\x{${point.toString(16)}}`;
}

/** Reads a pattern of either dialect (ECMAScript when `ecma`: then V8 has checked its syntax) and writes it for RE2. */
class Translator {
  private readonly points: readonly string[];
  private readonly ecma: boolean;
  private at = 0;
  private readonly size = new ProgramSize();

  constructor(source: string, ecma: boolean) {
    this.points = Array.from(source);
    this.ecma = ecma;
    if (this.points.length > MAX_REGEX_SOURCE_CHARS) {
      throw new RegexRefused("too_large", `the pattern is longer than ${MAX_REGEX_SOURCE_CHARS} characters`);
    }
  }

  translate(): { source: string; size: number } {
    const source = this.disjunction();
    if (this.at < this.points.length) {
      throw this.invalid(this.peek() === ")" ? "unbalanced )" : `unexpected ${JSON.stringify(this.peek())}`);
    }
    return { source, size: this.size.total };
  }

  private peek(offset = 0): string | undefined {
    return this.points[this.at + offset];
  }

  private next(): string {
    const char = this.points[this.at];
    if (char === undefined) {
      throw this.invalid("unexpected end of pattern");
    }
    this.at += 1;
    return char;
  }

  /** `back`: characters already read past the one at fault. */
  private invalid(message: string, back = 0): RegexRefused {
    const dialect = this.ecma ? "ECMAScript regular expression" : "I-Regexp (RFC 9485)";
    return new RegexRefused("invalid", `not a valid ${dialect}: ${message} at character ${this.at + 1 - back}`);
  }

  private unsupported(what: string): RegexRefused {
    return new RegexRefused(
      "unsupported",
      `${what} at character ${this.at + 1}: not supported (patterns run on RE2, a linear-time engine, which has no lookaround, backreferences or modifiers)`,
    );
  }

  private disjunction(): string {
    let out = "";
    for (let char = this.peek(); char !== undefined && char !== ")"; char = this.peek()) {
      if (char === "|") {
        this.at += 1;
        out += "|";
      } else {
        out += this.atom() + this.quantifier();
      }
    }
    return out;
  }

  /** An atom (V8 has refused a quantifier after an ECMAScript assertion). */
  private atom(): string {
    const char = this.next();
    if (char === "(") {
      return this.group();
    }
    this.size.atom();
    if (char === "^" || char === "$") {
      return char;
    }
    if (char === ".") {
      return this.ecma ? "[^\\x{a}\\x{d}\\x{2028}\\x{2029}]" : "[^\\x{a}\\x{d}]";
    }
    if (char === "[") {
      return this.characterClass();
    }
    if (char === "\\") {
      return this.atomEscape();
    }
    const point = char.codePointAt(0) ?? 0;
    if ("()*+.?[\\]{|}".includes(char) || (!this.ecma && isSurrogate(point))) {
      throw this.invalid(`unexpected ${JSON.stringify(char)}`, 1);
    }
    return re2Literal(point);
  }

  private quantifier(): string {
    const char = this.peek();
    let out: string;
    if (char === "*" || char === "+" || char === "?") {
      this.at += 1;
      this.size.repeat(char === "+" ? 1 : 0, char === "?" ? 1 : Infinity);
      out = char;
    } else if (char === "{") {
      out = this.counts();
    } else {
      return "";
    }
    if (this.ecma && this.peek() === "?") {
      this.at += 1;
      out += "?";
    }
    return out;
  }

  /** At `{`: `{n}`, `{n,}` or `{n,m}`. */
  private counts(): string {
    this.at += 1;
    const min = this.count();
    let max = min;
    if (this.peek() === ",") {
      this.at += 1;
      max = this.peek() === "}" ? Infinity : this.count();
    }
    if (this.next() !== "}") {
      throw this.invalid("expected } to close a {n,m} quantifier", 1);
    }
    if (max < min) {
      throw this.invalid(`quantifier {${min},${max}} has its maximum below its minimum`);
    }
    this.size.repeat(min, max);
    return `{${min}${max === min ? "" : `,${max === Infinity ? "" : max}`}}`;
  }

  private count(): number {
    let digits = "";
    for (let char = this.peek(); char !== undefined && char >= "0" && char <= "9"; char = this.peek()) {
      digits += char;
      this.at += 1;
    }
    if (digits === "") {
      throw this.invalid("expected a number in a {n,m} quantifier");
    }
    return Number(digits);
  }

  /** After `(`. */
  private group(): string {
    const head = this.points.slice(this.at, this.at + 3).join("");
    if (this.ecma && head.startsWith("?")) {
      if (/^\?(=|!|<=|<!)/.test(head)) {
        throw this.unsupported("lookaround");
      }
      if (head.startsWith("?:")) {
        this.at += 2;
      } else if (head.startsWith("?<")) {
        // A group name changes nothing that matches (V8 has checked it).
        while (this.next() !== ">") {}
      } else {
        throw this.unsupported("an inline modifier group");
      }
    }
    this.size.open();
    const inner = this.disjunction();
    if (this.next() !== ")") {
      throw this.invalid("expected )", 1);
    }
    this.size.close();
    return `(?:${inner})`;
  }

  /** After `\` outside a class. */
  private atomEscape(): string {
    const char = this.peek() ?? "";
    if (this.ecma && (char === "b" || char === "B")) {
      this.at += 1;
      return `\\${char}`;
    }
    if (this.ecma && ((char >= "1" && char <= "9") || char === "k")) {
      throw this.unsupported(char === "k" ? "a named backreference" : "a backreference");
    }
    const item = this.escape(false);
    return "point" in item ? re2Literal(item.point) : item.items === "" ? NEVER : `[${item.items}]`;
  }

  /** After `\`: a class escape (`\d`, `\p{L}`…) unless `pointOnly` (a range's end), or a character escape. */
  private escape(inClass: boolean, pointOnly = false): EscapeItem {
    const char = this.next();
    if (!pointOnly && (char === "p" || char === "P")) {
      return { items: this.property(char) };
    }
    if (!pointOnly && this.ecma && "dDwWsS".includes(char)) {
      return { items: char === "s" ? SPACE : char === "S" ? NOT_SPACE : `\\${char}` };
    }
    const point = ESCAPES.get(char);
    if (point !== undefined && (this.ecma || !ECMA_ONLY_ESCAPES.includes(char))) {
      return { point };
    }
    if (!this.ecma) {
      throw this.invalid(`\\${char} is not an I-Regexp escape${inClass ? " in a character class" : ""}`, 1);
    }
    return { point: this.numericEscape(char) };
  }

  /** After `\p` or `\P`: `{name}`, as class items. */
  private property(sign: string): string {
    if (this.next() !== "{") {
      throw this.invalid("expected { after \\p", 1);
    }
    let name = "";
    for (let char = this.next(); char !== "}"; char = this.next()) {
      name += char;
    }
    // RFC 9485 allows the short names of general categories but LC and Cs.
    if (!this.ecma && (GENERAL_CATEGORIES.get(name) !== name || name === "LC" || name === "Cs")) {
      throw this.invalid(`unknown character category ${JSON.stringify(name)}`);
    }
    return propertyItems(name, sign === "P", () => this.unsupported(`\\${sign}{${name}}`));
  }

  /** ECMAScript's `\cX`, `\xHH`, `\uHHHH` (a surrogate pair of them: one character) and `\u{H…}` (`char` read). */
  private numericEscape(char: string): number {
    if (char === "c") {
      return (this.next().codePointAt(0) ?? 0) % 32;
    }
    if (char === "x") {
      return this.hex(2);
    }
    if (char !== "u") {
      throw this.invalid(`invalid escape \\${char}`, 1);
    }
    if (this.peek() === "{") {
      const close = this.points.indexOf("}", this.at);
      const point = Number.parseInt(this.points.slice(this.at + 1, close).join(""), 16);
      this.at = close + 1;
      return point;
    }
    const lead = this.hex(4);
    const next = this.points.slice(this.at, this.at + 6).join("");
    const trail = /^\\u[0-9A-Fa-f]{4}$/.test(next) ? Number.parseInt(next.slice(2), 16) : 0;
    if (lead >= 0xd800 && lead <= 0xdbff && trail >= 0xdc00 && trail <= 0xdfff) {
      this.at += 6;
      return 0x10000 + ((lead - 0xd800) << 10) + (trail - 0xdc00);
    }
    return lead;
  }

  private hex(count: number): number {
    const digits = this.points.slice(this.at, this.at + count).join("");
    this.at += count;
    return Number.parseInt(digits, 16);
  }

  /** After `[`: `[^]? … ]`; I-Regexp has no empty class and `-` first or last, ECMAScript no `v`-flag set operations. */
  private characterClass(): string {
    const negated = this.peek() === "^";
    this.at += negated ? 1 : 0;
    let items = "";
    for (let first = true; this.peek() !== "]" || (first && !this.ecma); first = false) {
      items += this.classItem(first);
    }
    this.at += 1; // "]"
    if (items === "") {
      return negated ? `[${ANY}]` : NEVER;
    }
    return `[${negated ? "^" : ""}${items}]`;
  }

  /** A character, a range or a class escape. */
  private classItem(first: boolean): string {
    if (!this.ecma && this.peek() === "-") {
      if (!first && this.peek(1) !== "]") {
        throw this.invalid("- must come first or last in a character class, or be escaped");
      }
      this.at += 1;
      return re2Literal(0x2d);
    }
    const low = this.classAtom(false);
    if (!("point" in low)) {
      return low.items;
    }
    if (this.peek() !== "-" || this.peek(1) === "]") {
      return re2Literal(low.point);
    }
    this.at += 1;
    const high = this.classAtom(true);
    if (!("point" in high) || high.point < low.point) {
      throw this.invalid("character range out of order");
    }
    return `${re2Literal(low.point)}-${re2Literal(high.point)}`;
  }

  /** A class character, or a class escape unless `rangeEnd`; I-Regexp's `CCchar` excludes `- [ ]` and surrogates. */
  private classAtom(rangeEnd: boolean): EscapeItem {
    const char = this.next();
    if (char === "\\") {
      return this.escape(true, rangeEnd);
    }
    const point = char.codePointAt(0) ?? 0;
    if (!this.ecma && ("-[]".includes(char) || isSurrogate(point))) {
      throw this.invalid(`${JSON.stringify(char)} must be escaped in a character class`, 1);
    }
    return { point };
  }
}

// ───────────────────────────── \p{…} ─────────────────────────────

/** General categories, each short name (RE2's) followed by its long names (ECMAScript's aliases). */
const GENERAL_CATEGORIES = new Map<string, string>();
for (const group of [
  "C Other Cc Control cntrl Cf Format Cn Unassigned Co Private_Use Cs Surrogate",
  "L Letter LC Cased_Letter Ll Lowercase_Letter Lm Modifier_Letter Lo Other_Letter Lt Titlecase_Letter Lu Uppercase_Letter",
  "M Mark Combining_Mark Mc Spacing_Mark Me Enclosing_Mark Mn Nonspacing_Mark",
  "N Number Nd Decimal_Number digit Nl Letter_Number No Other_Number",
  "P Punctuation punct Pc Connector_Punctuation Pd Dash_Punctuation Pe Close_Punctuation Pf Final_Punctuation",
  "Pi Initial_Punctuation Po Other_Punctuation Ps Open_Punctuation",
  "S Symbol Sc Currency_Symbol Sk Modifier_Symbol Sm Math_Symbol So Other_Symbol",
  "Z Separator Zl Line_Separator Zp Paragraph_Separator Zs Space_Separator",
]) {
  let short = "";
  for (const name of group.split(" ")) {
    short = /^[A-Z][a-zC]?$/.test(name) ? name : short;
    GENERAL_CATEGORIES.set(name, short);
  }
}

/**
 * Class items for `\p{name}` (`\P` when `negated`): general categories by short or long
 * name, alone or as `General_Category=`/`gc=`; `Script=`/`sc=` with a script's long name
 * (`Greek`); `Any`, `ASCII`, `Assigned`. `unsupported` makes the refusal of the names RE2
 * has no table for: `Script_Extensions`/`scx`, four-letter script codes (`sc=Grek`) and
 * every other binary property (`Alphabetic`, `Emoji`…).
 */
function propertyItems(name: string, negated: boolean, unsupported: () => RegexRefused): string {
  const [key, value] = name.includes("=") ? name.split("=", 2) : [undefined, name];
  const sign = negated ? "P" : "p";
  const category =
    key === undefined || key === "General_Category" || key === "gc" ? GENERAL_CATEGORIES.get(value ?? "") : undefined;
  if (category !== undefined) {
    return `\\${sign}{${category}}`;
  }
  if (key === undefined && value === "Any") {
    return negated ? "" : ANY;
  }
  if (key === undefined && value === "ASCII") {
    return negated ? "\\x{80}-\\x{10ffff}" : "\\x{0}-\\x{7f}";
  }
  if (key === undefined && value === "Assigned") {
    return negated ? "\\p{Cn}" : "\\P{Cn}";
  }
  if ((key === "Script" || key === "sc") && value !== undefined && isRe2Script(value)) {
    return `\\${sign}{${value}}`;
  }
  throw unsupported();
}

/** Script names RE2 has a table for, as asked (a bounded cache: valid names are a few hundred). */
const re2Scripts = new Map<string, boolean>();

function isRe2Script(name: string): boolean {
  return (
    /^[A-Z][A-Za-z_]+$/.test(name) &&
    !GENERAL_CATEGORIES.has(name) &&
    compiles(re2Scripts, 1_024, () => RE2JS.compile(`\\p{${name}}`), name)
  );
}

/** Whether `compile` returns without throwing, remembered by `name` in `cache` (of at most `limit` names). */
function compiles(cache: Map<string, boolean>, limit: number, compile: () => unknown, name: string): boolean {
  let known = cache.get(name);
  if (known === undefined) {
    try {
      compile();
      known = true;
    } catch {
      known = false;
    }
    setBounded(cache, name, known, limit);
  }
  return known;
}

// ───────────────────────────── syntax, as V8 reads it ─────────────────────────────

/**
 * Why `source` is not an ECMAScript pattern with the `u` flag, or undefined when it is:
 * V8's parser decides, with one change. V8 builds the character set of each `\p{…}` as it
 * parses (about 50 µs for `\p{L}` in workerd, and a string checked against `format:
 * "regex"` may be a megabyte of them), so each `\p{name}` is parsed as `\d`, which may
 * stand exactly where it may (a class escape, never a range end), and each distinct name
 * is checked once, alone, and remembered.
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

/** Property names V8 accepted or refused (a bounded cache: the valid ones are a few thousand spellings). */
const propertyNames = new Map<string, boolean>();

function isPropertyName(name: string): boolean {
  return compiles(propertyNames, 4_096, () => new RegExp(`\\p{${name}}`, "u"), name);
}
