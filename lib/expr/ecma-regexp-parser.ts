import { CharSet, MAX_IREGEXP_PROGRAM_SIZE, type RegexNode, RegexTooLargeError } from "./iregexp.ts";
import {
  addClassAtom,
  CLASS_ESCAPES,
  type ClassAtom,
  LINE_TERMINATORS,
  MAX_CODE_POINT,
  rangesSet,
  CONTROL_ESCAPES,
  IDENTITY_ESCAPES,
} from "./ecma-regexp-charset.ts";

// ───────────────────────────── parser (ECMA-262 §22.2.1, [+UnicodeMode]) ─────────────────────────────

/** Deepest nesting of groups `( … )`. */
export const MAX_ECMA_PATTERN_NESTING = 64;

/** What V8 accepts but the VM cannot run. */
export class UnsupportedPattern extends Error {}

/** What V8 should have refused already; kept so the parser never guesses. */
export class PatternSyntaxError extends Error {}

const QUANTIFIER_STARTS = new Set(["*", "+", "?", "{"]);

const code = (char: string): number => char.codePointAt(0) ?? -1;

const isHex = (char: string | undefined): boolean => char !== undefined && /^[0-9A-Fa-f]$/.test(char);

export class EcmaParser {
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
