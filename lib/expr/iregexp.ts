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
import { EngineError } from "../errors.ts";

/** Longest accepted pattern, in code points. */
export const MAX_IREGEXP_SOURCE_CHARS = 4_096;

/** Largest compiled program, in instructions (counted repetition `{n,m}` is expanded). */
export const MAX_IREGEXP_PROGRAM_SIZE = 10_000;

/** Deepest nesting of groups `( … )`. */
export const MAX_IREGEXP_NESTING = 64;

/** VM steps (instruction visits) one budget allows unless its owner gives another limit. */
export const MAX_REGEX_STEPS = 10_000_000;

/** A compiled pattern, or why it is not one (`invalid`: not I-Regexp; `too_large`: over a limit above). */
export type IRegexpCompileResult =
  { ok: true; regex: IRegexp } | { ok: false; reason: "invalid" | "too_large"; message: string };

/** Counts VM steps against a limit; shared by every match of one evaluation. */
export class RegexBudget {
  readonly limit: number;
  /** The message of the error once the limit is passed. */
  readonly limitMessage: string;
  spent = 0;
  constructor(limit: number = MAX_REGEX_STEPS, limitMessage?: string) {
    this.limit = limit;
    this.limitMessage = limitMessage ?? `regular expression matching exceeded its budget of ${limit} steps`;
  }
  /** @throws EngineError `expr.budget_exceeded` once the limit is passed. */
  charge(steps: number): void {
    this.spent += steps;
    if (this.spent > this.limit) {
      throw new EngineError("expr.budget_exceeded", this.limitMessage);
    }
  }
}

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

class RegexSyntaxError extends Error {}
/** A pattern over one of the limits above; shared with the ECMAScript front end (`ecma-regexp.ts`). */
export class RegexTooLargeError extends Error {}

// ───────────────────────────── character sets ─────────────────────────────

/** The general categories RFC 9485 allows in `\p{…}` (`charProp`). */
const CATEGORIES = new Set([
  "L",
  "Ll",
  "Lm",
  "Lo",
  "Lt",
  "Lu",
  "M",
  "Mc",
  "Me",
  "Mn",
  "N",
  "Nd",
  "Nl",
  "No",
  "P",
  "Pc",
  "Pd",
  "Pe",
  "Pf",
  "Pi",
  "Po",
  "Ps",
  "Z",
  "Zl",
  "Zp",
  "Zs",
  "S",
  "Sc",
  "Sk",
  "Sm",
  "So",
  "C",
  "Cc",
  "Cf",
  "Cn",
  "Co",
]);

interface Category {
  readonly sticky: RegExp;
  readonly negated: boolean;
}

/** One character position's test: code point ranges and categories, possibly negated as a whole. */
export class CharSet {
  readonly ranges: number[] = [];
  readonly categories: Category[] = [];
  negated = false;

  addRange(low: number, high: number): void {
    this.ranges.push(low, high);
  }

  addCategory(name: string, negated: boolean): void {
    // A fixed one-character pattern from the whitelist above: nothing to backtrack over.
    this.categories.push({ sticky: new RegExp(`\\p{${name}}`, "uy"), negated });
  }

  test(text: string, unit: number, point: number): boolean {
    return this.contains(text, unit, point) !== this.negated;
  }

  private contains(text: string, unit: number, point: number): boolean {
    for (let i = 0; i < this.ranges.length; i += 2) {
      if (point >= (this.ranges[i] ?? 0) && point <= (this.ranges[i + 1] ?? -1)) {
        return true;
      }
    }
    for (const category of this.categories) {
      category.sticky.lastIndex = unit;
      if (category.sticky.test(text) !== category.negated) {
        return true;
      }
    }
    return false;
  }
}

function anyButNewline(): CharSet {
  const set = new CharSet();
  set.addRange(0x0a, 0x0a);
  set.addRange(0x0d, 0x0d);
  set.negated = true;
  return set;
}

function single(point: number): CharSet {
  const set = new CharSet();
  set.addRange(point, point);
  return set;
}

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

type Node = RegexNode;

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

class Parser {
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

// ───────────────────────────── program ─────────────────────────────

const CHAR = 0;
const SPLIT = 1;
const JUMP = 2;
const BEGIN = 3;
const END = 4;
const MATCH = 5;
const WORD_BOUNDARY = 6;
const NOT_WORD_BOUNDARY = 7;

/** Instructions as parallel arrays: `op`, and `x` / `y` (targets, or the set of a CHAR). */
export interface Program {
  readonly op: Uint8Array;
  readonly x: Int32Array;
  readonly y: Int32Array;
  readonly sets: readonly CharSet[];
}

class Emitter {
  readonly op: number[] = [];
  readonly x: number[] = [];
  readonly y: number[] = [];
  readonly sets: CharSet[] = [];

  emit(op: number, x = 0, y = 0): number {
    if (this.op.length >= MAX_IREGEXP_PROGRAM_SIZE) {
      throw new RegexTooLargeError(`regular expression compiles to more than ${MAX_IREGEXP_PROGRAM_SIZE} instructions`);
    }
    this.op.push(op);
    this.x.push(x);
    this.y.push(y);
    return this.op.length - 1;
  }

  get next(): number {
    return this.op.length;
  }

  node(node: Node): void {
    switch (node.kind) {
      case "set":
        this.sets.push(node.set);
        this.emit(CHAR, this.sets.length - 1);
        return;
      case "begin":
        this.emit(BEGIN);
        return;
      case "end":
        this.emit(END);
        return;
      case "word_boundary":
        this.emit(node.negated ? NOT_WORD_BOUNDARY : WORD_BOUNDARY);
        return;
      case "concat":
        for (const item of node.items) {
          this.node(item);
        }
        return;
      case "alternate":
        this.alternate(node.items);
        return;
      case "repeat":
        this.repeat(node.item, node.min, node.max);
        return;
    }
  }

  private alternate(items: readonly Node[]): void {
    const jumps: number[] = [];
    items.forEach((item, index) => {
      if (index === items.length - 1) {
        this.node(item);
        return;
      }
      const split = this.emit(SPLIT, this.next + 1);
      this.node(item);
      jumps.push(this.emit(JUMP));
      this.y[split] = this.next;
    });
    for (const jump of jumps) {
      this.x[jump] = this.next;
    }
  }

  private repeat(item: Node, min: number, max: number): void {
    for (let i = 0; i < min; i += 1) {
      this.node(item);
    }
    if (max === Infinity) {
      const split = this.emit(SPLIT, this.next + 1);
      this.node(item);
      this.emit(JUMP, split);
      this.y[split] = this.next;
      return;
    }
    const splits: number[] = [];
    for (let i = min; i < max; i += 1) {
      splits.push(this.emit(SPLIT, this.next + 1));
      this.node(item);
    }
    for (const split of splits) {
      this.y[split] = this.next;
    }
  }
}

/**
 * Compiles a parsed pattern to a VM program.
 *
 * @throws RegexTooLargeError past {@link MAX_IREGEXP_PROGRAM_SIZE} instructions.
 */
export function compileProgram(node: RegexNode): Program {
  const emitter = new Emitter();
  emitter.node(node);
  emitter.emit(MATCH);
  return {
    op: Uint8Array.from(emitter.op),
    x: Int32Array.from(emitter.x),
    y: Int32Array.from(emitter.y),
    sets: emitter.sets,
  };
}

// ───────────────────────────── Pike VM ─────────────────────────────

/** A set of instruction indexes with O(1) add, test and clear (a generation stamp per slot). */
class ThreadList {
  readonly dense: Int32Array;
  readonly stamps: Uint32Array;
  size = 0;
  generation = 1;
  constructor(capacity: number) {
    this.dense = new Int32Array(capacity);
    this.stamps = new Uint32Array(capacity);
  }
  clear(): void {
    this.size = 0;
    this.generation += 1;
  }
  /** Adds `pc`; false when it was there already. */
  add(pc: number): boolean {
    if (this.stamps[pc] === this.generation) {
      return false;
    }
    this.stamps[pc] = this.generation;
    this.dense[this.size] = pc;
    this.size += 1;
    return true;
  }
}

/**
 * Runs `program` over `text`: the whole text when `whole`, else any substring. Each
 * instruction enters a thread list at most once per position, so the work is at most
 * (code points + 1) × program size, and each visit is charged to `budget`.
 */
function runVm(program: Program, text: string, whole: boolean, budget: RegexBudget): boolean {
  const size = program.op.length;
  let current = new ThreadList(size);
  let next = new ThreadList(size);
  const stack: number[] = [];
  const length = text.length;
  addThread(program, current, stack, 0, 0, text, budget);
  for (let unit = 0; ;) {
    if (!whole && containsMatch(program, current)) {
      return true;
    }
    if (unit >= length) {
      return whole && containsMatch(program, current);
    }
    if (whole && current.size === 0) {
      return false;
    }
    const point = text.codePointAt(unit) ?? 0;
    const after = unit + (point > 0xffff ? 2 : 1);
    next.clear();
    budget.charge(current.size);
    for (let i = 0; i < current.size; i += 1) {
      const pc = current.dense[i] ?? 0;
      if (program.op[pc] !== CHAR) {
        continue;
      }
      const set = program.sets[program.x[pc] ?? 0] as CharSet;
      // Each `\p{…}` is a sticky RegExp test (about 10 ns in workerd): a step each, before it runs.
      // A class may hold hundreds: `[\p{Lu}\p{Lu}…]` in 4,096 characters was 6.8 µs a character.
      budget.charge(set.categories.length);
      if (set.test(text, unit, point)) {
        addThread(program, next, stack, pc + 1, after, text, budget);
      }
    }
    if (!whole) {
      addThread(program, next, stack, 0, after, text, budget);
    }
    [current, next] = [next, current];
    unit = after;
  }
}

function containsMatch(program: Program, list: ThreadList): boolean {
  for (let i = 0; i < list.size; i += 1) {
    if (program.op[list.dense[i] ?? 0] === MATCH) {
      return true;
    }
  }
  return false;
}

/** Adds `start` and everything reachable from it without reading a character. */
function addThread(
  program: Program,
  list: ThreadList,
  stack: number[],
  start: number,
  unit: number,
  text: string,
  budget: RegexBudget,
): void {
  stack.push(start);
  let visited = 0;
  for (let pc = stack.pop(); pc !== undefined; pc = stack.pop()) {
    if (!list.add(pc)) {
      continue;
    }
    visited += 1;
    switch (program.op[pc]) {
      case JUMP:
        stack.push(program.x[pc] ?? 0);
        break;
      case SPLIT:
        stack.push(program.y[pc] ?? 0, program.x[pc] ?? 0);
        break;
      case BEGIN:
        if (unit === 0) {
          stack.push(pc + 1);
        }
        break;
      case END:
        if (unit === text.length) {
          stack.push(pc + 1);
        }
        break;
      case WORD_BOUNDARY:
      case NOT_WORD_BOUNDARY:
        if ((isWordUnit(text, unit - 1) !== isWordUnit(text, unit)) === (program.op[pc] === WORD_BOUNDARY)) {
          stack.push(pc + 1);
        }
        break;
      default:
        break;
    }
  }
  budget.charge(visited);
}

/** Whether the code unit at `unit` is an ECMAScript word character `[A-Za-z0-9_]` (none outside the text). */
function isWordUnit(text: string, unit: number): boolean {
  const c = text.charCodeAt(unit);
  return (c >= 0x30 && c <= 0x39) || (c >= 0x41 && c <= 0x5a) || c === 0x5f || (c >= 0x61 && c <= 0x7a);
}
