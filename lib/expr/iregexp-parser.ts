import { MAX_IREGEXP_NESTING, MAX_IREGEXP_PROGRAM_SIZE, RegexTooLargeError } from "./iregexp-limits.ts";
import { anyButNewline, CATEGORIES, CharSet, single } from "./iregexp-charset.ts";

export class RegexSyntaxError extends Error {}

// ───────────────────────────── parser (RFC 9485 §3, ABNF) ─────────────────────────────

/**
 * A parsed pattern. `word_boundary` (`\b`, `\B` when `negated`) is never produced by the
 * I-Regexp parser; the ECMAScript front end (`ecma-regexp.ts`) compiles to the same VM.
 */
export type RegexNode =
  | { readonly kind: "set"; readonly set: CharSet }
  | { readonly kind: "concat"; readonly items: readonly RegexNode[] }
  | { readonly kind: "alternate"; readonly items: readonly RegexNode[] }
  | { readonly kind: "repeat"; readonly item: RegexNode; readonly min: number; readonly max: number }
  | { readonly kind: "begin" }
  | { readonly kind: "end" }
  | { readonly kind: "word_boundary"; readonly negated: boolean };

export type Node = RegexNode;

const code = (char: string): number => char.codePointAt(0) ?? -1;

/** Characters that are not `NormalChar`: `( ) * + . ? [ \ ] { | }`. */
const SPECIAL = new Set(["(", ")", "*", "+", ".", "?", "[", "\\", "]", "{", "|", "}"]);

/** What may follow `\` as a `SingleCharEsc`, and the character it stands for. */
const SINGLE_ESCAPES = new Map<string, number>([
  ...["(", ")", "*", "+", "-", ".", "?", "[", "\\", "]", "^", "{", "|", "}"].map((c): [string, number] => [c, code(c)]),
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
]);

export class Parser {
  private readonly points: readonly string[];
  private at = 0;
  private depth = 0;

  constructor(points: readonly string[]) {
    this.points = points;
  }

  parseAll(): Node {
    const node = this.alternation();
    if (this.at < this.points.length) {
      throw this.error(this.peek() === ")" ? "unbalanced )" : `unexpected ${JSON.stringify(this.peek())}`);
    }
    return node;
  }

  private peek(): string | undefined {
    return this.points[this.at];
  }

  private next(): string {
    const char = this.points[this.at];
    if (char === undefined) {
      throw this.error("unexpected end of pattern");
    }
    this.at += 1;
    return char;
  }

  private error(message: string): RegexSyntaxError {
    return new RegexSyntaxError(`${message} at character ${this.at + 1}`);
  }

  private alternation(): Node {
    const branches = [this.branch()];
    while (this.peek() === "|") {
      this.at += 1;
      branches.push(this.branch());
    }
    return branches.length === 1 ? (branches[0] as Node) : { kind: "alternate", items: branches };
  }

  private branch(): Node {
    const items: Node[] = [];
    for (let char = this.peek(); char !== undefined && char !== "|" && char !== ")"; char = this.peek()) {
      items.push(this.piece());
    }
    return items.length === 1 ? (items[0] as Node) : { kind: "concat", items };
  }

  private piece(): Node {
    const atom = this.atom();
    const char = this.peek();
    if (char === "*" || char === "+" || char === "?") {
      this.at += 1;
      return { kind: "repeat", item: atom, min: char === "+" ? 1 : 0, max: char === "?" ? 1 : Infinity };
    }
    if (char === "{") {
      const [min, max] = this.rangeQuantifier();
      return { kind: "repeat", item: atom, min, max };
    }
    return atom;
  }

  private rangeQuantifier(): [number, number] {
    this.at += 1; // "{"
    const min = this.quantExact();
    let max = min;
    if (this.peek() === ",") {
      this.at += 1;
      max = this.peek() === "}" ? Infinity : this.quantExact();
    }
    if (this.next() !== "}") {
      throw this.error("expected } to close a {n,m} quantifier");
    }
    if (max < min) {
      throw this.error(`quantifier {${min},${max}} has its maximum below its minimum`);
    }
    return [min, max];
  }

  private quantExact(): number {
    let digits = "";
    for (let char = this.peek(); char !== undefined && char >= "0" && char <= "9"; char = this.peek()) {
      digits += char;
      this.at += 1;
    }
    if (digits === "") {
      throw this.error("expected a number in a {n,m} quantifier");
    }
    const value = Number(digits);
    if (value > MAX_IREGEXP_PROGRAM_SIZE) {
      throw new RegexTooLargeError(`quantifier count ${digits} is over ${MAX_IREGEXP_PROGRAM_SIZE}`);
    }
    return value;
  }

  private atom(): Node {
    const char = this.next();
    switch (char) {
      case "(":
        return this.group();
      case ".":
        return { kind: "set", set: anyButNewline() };
      case "[":
        return { kind: "set", set: this.classExpression() };
      case "\\":
        return { kind: "set", set: this.escape(false) };
      case "^":
        return { kind: "begin" };
      case "$":
        return { kind: "end" };
      default:
        if (SPECIAL.has(char) || isSurrogate(code(char))) {
          this.at -= 1;
          throw this.error(`unexpected ${JSON.stringify(char)}`);
        }
        return { kind: "set", set: single(code(char)) };
    }
  }

  private group(): Node {
    this.depth += 1;
    if (this.depth > MAX_IREGEXP_NESTING) {
      throw new RegexTooLargeError(`groups nest deeper than ${MAX_IREGEXP_NESTING}`);
    }
    const inner = this.alternation();
    if (this.next() !== ")") {
      throw this.error("expected )");
    }
    this.depth -= 1;
    return inner;
  }

  /** After `\`: a `SingleCharEsc`, or `\p{…}` / `\P{…}`; `inClass` only changes nothing but the message. */
  private escape(inClass: boolean): CharSet {
    const char = this.next();
    if (char === "p" || char === "P") {
      const set = new CharSet();
      set.addCategory(this.categoryName(), char === "P");
      return set;
    }
    const point = SINGLE_ESCAPES.get(char);
    if (point === undefined) {
      this.at -= 1;
      throw this.error(`\\${char} is not an I-Regexp escape${inClass ? " in a character class" : ""}`);
    }
    return single(point);
  }

  private categoryName(): string {
    if (this.next() !== "{") {
      throw this.error("expected { after \\p");
    }
    let name = "";
    for (let char = this.next(); char !== "}"; char = this.next()) {
      name += char;
    }
    if (!CATEGORIES.has(name)) {
      throw this.error(`unknown character category ${JSON.stringify(name)}`);
    }
    return name;
  }

  /** After `[`: `[^]? ( "-" / CCE1 ) *CCE1 [ "-" ] "]"`. */
  private classExpression(): CharSet {
    const set = new CharSet();
    if (this.peek() === "^") {
      this.at += 1;
      set.negated = true;
    }
    let first = true;
    for (;;) {
      const char = this.next();
      if (char === "]" && !first) {
        return set;
      }
      if (char === "-") {
        if (first || this.peek() === "]") {
          set.addRange(0x2d, 0x2d);
          first = false;
          continue;
        }
        this.at -= 1;
        throw this.error("- must come first or last in a character class, or be escaped");
      }
      first = false;
      this.classItem(char, set);
    }
  }

  private classItem(char: string, set: CharSet): void {
    if (char === "\\" && (this.peek() === "p" || this.peek() === "P")) {
      const escaped = this.escape(true);
      for (const category of escaped.categories) {
        set.categories.push(category);
      }
      return;
    }
    const low = this.classChar(char);
    if (this.peek() === "-" && this.points[this.at + 1] !== "]") {
      this.at += 1;
      const high = this.classChar(this.next());
      if (high < low) {
        throw this.error("character range out of order");
      }
      set.addRange(low, high);
      return;
    }
    set.addRange(low, low);
  }

  /** A `CCchar`: anything but `- [ \ ]` and surrogates, or a `SingleCharEsc`. */
  private classChar(char: string): number {
    if (char === "\\") {
      const escaped = this.next();
      const point = SINGLE_ESCAPES.get(escaped);
      if (point === undefined) {
        this.at -= 1;
        throw this.error(`\\${escaped} is not an I-Regexp escape in a character class`);
      }
      return point;
    }
    if (char === "[" || char === "]" || char === "-" || isSurrogate(code(char))) {
      this.at -= 1;
      throw this.error(`${JSON.stringify(char)} must be escaped in a character class`);
    }
    return code(char);
  }
}

function isSurrogate(point: number): boolean {
  return point >= 0xd800 && point <= 0xdfff;
}
