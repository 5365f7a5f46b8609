/**
 * ECMAScript regular expressions with the `u` flag (what JSON Schema's `pattern`,
 * `patternProperties` and `format: "regex"` are written in), translated to RE2 syntax
 * for the engine of `regex.ts`. V8's `RegExp` backtracks (`^(a|aa)+$` against 42
 * characters ran for seconds), so V8 only decides whether a pattern is valid
 * ({@link checkEcmaPatternSyntax}); the translator then writes the same pattern in RE2
 * syntax with ECMAScript's meaning:
 * - characters and escapes (`\n`, `\xHH`, `\uHHHH`, a `\uHHHH\uHHHH` pair, `\u{H…}`,
 *   `\cX`, `\0`, escaped syntax characters) as `\x{…}`;
 * - `.` as any character but `\n`, `\r`, U+2028 and U+2029; `\s`/`\S` as ECMAScript's
 *   white space and line terminators (RE2's `\s` is ASCII), in classes too; `[^]` as
 *   any character, `[]` as none, `[\b]` as a backspace; `\d \w \b` are ASCII in both;
 * - `\p{…}`/`\P{…}`: general categories by short or long name, alone or as
 *   `General_Category=`/`gc=`; `Script=`/`sc=` with a script's long name (`Greek`);
 *   `Any`, `ASCII`, `Assigned`. Refused as `unsupported`: `Script_Extensions`/`scx`,
 *   four-letter script codes (`sc=Grek`) and every other binary property (`Alphabetic`,
 *   `Emoji`…), which RE2 has no table for;
 * - groups, named or not, as `(?:…)`; alternation; quantifiers greedy or lazy (the same
 *   strings match), with counts up to RE2's 1,000 (`too_large` past it).
 * Refused as `unsupported`: lookaround, backreferences and inline modifiers, which no
 * linear-time engine offers. Characters are code points (a lone surrogate is one); `^`
 * and `$` anchor at the start and end of the text; a pattern matches when it matches
 * somewhere (`RegExp.prototype.test`).
 */
import { RE2JS } from "@bufbuild/re2";
import { setBounded } from "../bounded-cache.ts";
import {
  codePoints,
  compileTranslated,
  ProgramSize,
  re2Literal,
  RegexRefused,
  type RegexCompileResult,
  type Translation,
} from "./regex.ts";

/** Compiles an ECMAScript pattern (with the `u` flag), charging `charge` (when given) the work of compiling it. */
export function compileEcmaPattern(source: string, charge?: (work: number) => void): RegexCompileResult {
  return compileTranslated(() => {
    const points = codePoints(source);
    const syntax = checkEcmaPatternSyntax(source);
    if (syntax !== undefined) {
      throw new RegexRefused("invalid", syntax);
    }
    return new EcmaTranslator(points).translate();
  }, charge);
}

const ANY = "\\x{0}-\\x{10ffff}";
const NEVER = `[^${ANY}]`;
const DOT = "[^\\x{a}\\x{d}\\x{2028}\\x{2029}]";
const SPACE =
  "\\x{9}-\\x{d}\\x{20}\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}";
const NOT_SPACE =
  "\\x{0}-\\x{8}\\x{e}-\\x{1f}\\x{21}-\\x{9f}\\x{a1}-\\x{167f}\\x{1681}-\\x{1fff}\\x{200b}-\\x{2027}\\x{202a}-\\x{202e}\\x{2030}-\\x{205e}\\x{2060}-\\x{2fff}\\x{3001}-\\x{fefe}\\x{ff00}-\\x{10ffff}";

const CONTROL_ESCAPES = new Map([
  ["f", 0x0c],
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
  ["v", 0x0b],
]);

/** `SyntaxCharacter` and `/`: what `\` may escape as itself with the `u` flag. */
const IDENTITY_ESCAPES = new Set(Array.from("^$\\.*+?()[]{}|/"));

/** An escape: one character (which may bound a range), or class items (`\d`, `\p{L}`…). */
type EscapeItem = { readonly point: number } | { readonly items: string };

const isHex = (char: string | undefined): boolean => char !== undefined && /^[0-9A-Fa-f]$/.test(char);

class EcmaTranslator {
  private readonly points: readonly string[];
  private at = 0;
  private readonly size = new ProgramSize();

  constructor(points: readonly string[]) {
    this.points = points;
  }

  translate(): Translation {
    const source = this.disjunction();
    if (this.at < this.points.length) {
      throw this.invalid(`unexpected ${JSON.stringify(this.peek())}`);
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

  private lookingAt(text: string): boolean {
    return Array.from(text).every((char, i) => this.peek(i) === char);
  }

  /** What V8 should have refused already: kept so the translator never guesses. */
  private invalid(message: string): RegexRefused {
    return new RegexRefused("invalid", `not a valid ECMAScript regular expression: ${message} at character ${this.at}`);
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
        out += this.term();
      }
    }
    return out;
  }

  private term(): string {
    const char = this.next();
    if (char === "^" || char === "$" || (char === "\\" && (this.peek() === "b" || this.peek() === "B"))) {
      this.size.atom();
      return char === "\\" ? `\\${this.next()}` : char;
    }
    let atom: string;
    if (char === "(") {
      atom = this.group();
    } else {
      this.size.atom();
      atom = char === "." ? DOT : char === "[" ? this.characterClass() : char === "\\" ? this.atomEscape() : "";
      atom ||= re2Literal(char.codePointAt(0) ?? 0);
    }
    return atom + this.quantifier();
  }

  private quantifier(): string {
    const char = this.peek();
    let out: string;
    if (char === "*" || char === "+" || char === "?") {
      this.at += 1;
      this.size.repeat(char === "+" ? 1 : 0, char === "?" ? 1 : Infinity);
      out = char;
    } else if (char === "{") {
      const close = this.points.indexOf("}", this.at);
      out = this.points.slice(this.at, close + 1).join("");
      const counts = /^\{(\d+)(,(\d*))?\}$/.exec(out);
      if (close < 0 || counts === null) {
        throw this.invalid("incomplete quantifier");
      }
      this.at = close + 1;
      const min = Number(counts[1]);
      this.size.repeat(min, counts[2] === undefined ? min : counts[3] === "" ? Infinity : Number(counts[3]));
    } else {
      return "";
    }
    if (this.peek() === "?") {
      this.at += 1;
      out += "?";
    }
    return out;
  }

  private group(): string {
    if (this.peek() === "?") {
      if (["?=", "?!", "?<=", "?<!"].some((start) => this.lookingAt(start))) {
        throw this.unsupported("lookaround");
      }
      if (this.lookingAt("?:")) {
        this.at += 2;
      } else if (this.lookingAt("?<")) {
        // A group name changes nothing that matches (V8 has checked it).
        while (this.next() !== ">") {}
      } else {
        throw this.unsupported("an inline modifier group");
      }
    }
    this.size.open();
    const inner = this.disjunction();
    if (this.next() !== ")") {
      throw this.invalid("unterminated group");
    }
    this.size.close();
    return `(?:${inner})`;
  }

  /** After `\` outside a class. */
  private atomEscape(): string {
    const char = this.peek() ?? "";
    if (char >= "1" && char <= "9") {
      throw this.unsupported("a backreference");
    }
    if (char === "k") {
      throw this.unsupported("a named backreference");
    }
    const item = this.escape(false);
    return "point" in item ? re2Literal(item.point) : item.items === "" ? NEVER : `[${item.items}]`;
  }

  /** After `\`: a class escape or a character escape; `inClass` allows `\b` (backspace) and `\-`. */
  private escape(inClass: boolean): EscapeItem {
    const char = this.next();
    if ("dDwW".includes(char)) {
      return { items: `\\${char}` };
    }
    if (char === "s" || char === "S") {
      return { items: char === "s" ? SPACE : NOT_SPACE };
    }
    if (char === "p" || char === "P") {
      const close = this.points.indexOf("}", this.at);
      const name = this.points.slice(this.at + 1, close).join("");
      this.at = close + 1;
      return { items: propertyItems(name, char === "P", () => this.unsupported(`\\${char}{${name}}`)) };
    }
    if (inClass && (char === "b" || char === "-")) {
      return { point: char === "b" ? 0x08 : 0x2d };
    }
    return { point: this.characterEscape(char) };
  }

  /** The character a `CharacterEscape` stands for (`char`, after `\`, consumed). */
  private characterEscape(char: string): number {
    const control = CONTROL_ESCAPES.get(char);
    if (control !== undefined) {
      return control;
    }
    if (IDENTITY_ESCAPES.has(char)) {
      return char.codePointAt(0) ?? 0;
    }
    if (char === "0") {
      return 0;
    }
    if (char === "c") {
      return (this.next().codePointAt(0) ?? 0) % 32;
    }
    if (char === "x") {
      return this.hex(2);
    }
    if (char !== "u") {
      throw this.invalid(`invalid escape \\${char}`);
    }
    if (this.peek() === "{") {
      const close = this.points.indexOf("}", this.at);
      const point = Number.parseInt(this.points.slice(this.at + 1, close).join(""), 16);
      this.at = close + 1;
      return point;
    }
    const lead = this.hex(4);
    const pair = this.peek() === "\\" && this.peek(1) === "u" && [2, 3, 4, 5].every((i) => isHex(this.peek(i)));
    const trail = pair ? Number.parseInt(this.points.slice(this.at + 2, this.at + 6).join(""), 16) : 0;
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

  /** After `[`: `[^]? ClassContents ]`, without the `v` flag's set operations. */
  private characterClass(): string {
    const negated = this.peek() === "^";
    this.at += negated ? 1 : 0;
    let items = "";
    while (this.peek() !== "]") {
      const low = this.classAtom();
      if (this.peek() === "-" && this.peek(1) !== "]" && this.peek(1) !== undefined) {
        this.at += 1;
        const high = this.classAtom();
        if (!("point" in low) || !("point" in high)) {
          throw this.invalid("invalid character class");
        }
        items += `${re2Literal(low.point)}-${re2Literal(high.point)}`;
      } else {
        items += "point" in low ? re2Literal(low.point) : low.items;
      }
    }
    this.at += 1; // "]"
    if (items === "") {
      return negated ? `[${ANY}]` : NEVER;
    }
    return `[${negated ? "^" : ""}${items}]`;
  }

  private classAtom(): EscapeItem {
    const char = this.next();
    return char === "\\" ? this.escape(true) : { point: char.codePointAt(0) ?? 0 };
  }
}

// ───────────────────────────── \p{…} ─────────────────────────────

/** General categories: each long name (ECMAScript's aliases) and the short name RE2 knows. */
const GENERAL_CATEGORIES = new Map<string, string>(
  Object.entries({
    Other: "C",
    Control: "Cc",
    cntrl: "Cc",
    Format: "Cf",
    Unassigned: "Cn",
    Private_Use: "Co",
    Surrogate: "Cs",
    Letter: "L",
    Cased_Letter: "LC",
    Lowercase_Letter: "Ll",
    Modifier_Letter: "Lm",
    Other_Letter: "Lo",
    Titlecase_Letter: "Lt",
    Uppercase_Letter: "Lu",
    Mark: "M",
    Combining_Mark: "M",
    Spacing_Mark: "Mc",
    Enclosing_Mark: "Me",
    Nonspacing_Mark: "Mn",
    Number: "N",
    Decimal_Number: "Nd",
    digit: "Nd",
    Letter_Number: "Nl",
    Other_Number: "No",
    Punctuation: "P",
    punct: "P",
    Connector_Punctuation: "Pc",
    Dash_Punctuation: "Pd",
    Close_Punctuation: "Pe",
    Final_Punctuation: "Pf",
    Initial_Punctuation: "Pi",
    Other_Punctuation: "Po",
    Open_Punctuation: "Ps",
    Symbol: "S",
    Currency_Symbol: "Sc",
    Modifier_Symbol: "Sk",
    Math_Symbol: "Sm",
    Other_Symbol: "So",
    Separator: "Z",
    Line_Separator: "Zl",
    Paragraph_Separator: "Zp",
    Space_Separator: "Zs",
  }),
);
for (const short of new Set(GENERAL_CATEGORIES.values())) {
  GENERAL_CATEGORIES.set(short, short);
}

/** Class items for `\p{name}` (`\P` when `negated`); `unsupported` makes the refusal of a name RE2 has no table for. */
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
  let known = re2Scripts.get(name);
  if (known === undefined) {
    known = /^[A-Z][A-Za-z_]+$/.test(name) && !GENERAL_CATEGORIES.has(name);
    try {
      known &&= RE2JS.compile(`\\p{${name}}`) !== undefined;
    } catch {
      known = false;
    }
    setBounded(re2Scripts, name, known, 1_024);
  }
  return known;
}

// ───────────────────────────── syntax, as V8 reads it ─────────────────────────────

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
