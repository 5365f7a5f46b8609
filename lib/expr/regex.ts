/**
 * The one regular-expression engine: `@bufbuild/re2` (RE2JS, the RE2 port `@bufbuild/cel`
 * runs CEL `matches` on), for CEL `matches()`, JSONPath `match()`/`search()` (I-Regexp,
 * RFC 9485) and JSON Schema `pattern`/`patternProperties` (ECMAScript, `regex-ecma.ts`).
 * RE2 never backtracks: `(a|aa)+` costs the same as `a+`. Patterns may come from anyone
 * holding a token and run on strings from run input, so V8's backtracking `RegExp` is
 * never used to match.
 *
 * **Translation.** I-Regexp and ECMAScript patterns are read by a small translator each
 * (here and in `regex-ecma.ts`) that checks the dialect's syntax and writes RE2 syntax
 * with the dialect's meaning: every literal as `\x{…}`, `.` as a class without the line
 * terminators of the dialect, groups as `(?:…)`. I-Regexp follows RFC 9485 §5.3, with one
 * deviation from its grammar (where `^` and `$` are ordinary characters): unescaped
 * outside a class they anchor at the start and end of the input, as the JSONPath
 * Compliance Test Suite expects (`match(@, '^ab.*')` matches `"abc"`). RE2's `$` is the
 * end of the input, never before a final newline. RE2 reads a string as code points; a
 * lone surrogate is one character, as in both dialects.
 *
 * **Cost.** RE2JS cannot count its work or be stopped, so a match is charged up front
 * for its worst case, {@link matchWork}: (input length + 1) × program instructions. RE2JS
 * runs a lazy DFA, and when the DFA has built too many states it falls back to an NFA
 * simulation; RE2JS's own fallback walks the closure of each live instruction anew (its
 * visited set is per instruction, not per position), which is quadratic in the program
 * (`[ab]*a[ab]{20}(?:[ab]*[ab]*){100}c`, 426 instructions, against 20,000 characters:
 * 52 s). {@link compileRe2} replaces it on each compiled program with
 * {@link matchOnNfa}, which visits each instruction at most once per position, and
 * bounds the DFA's states by the program's size (each state holds its instruction list),
 * so a match is linear in input length × instructions in time and bounded in memory.
 * Compiling is charged too ({@link compileWorkBefore}, {@link compileWorkAfter}): RE2JS
 * compiles a long literal in time quadratic in its length. Each budget converts these
 * work units into its own unit at a rate measured on the worst cases (docs/definitions.md,
 * "Budgets").
 */
import { RE2JS, RE2JSException } from "@bufbuild/re2";
import { setBounded } from "../bounded-cache.ts";

/** Longest I-Regexp or ECMAScript pattern accepted, in code points. */
export const MAX_REGEX_SOURCE_CHARS = 4_096;

/** Largest program, in instructions with `{n,m}` expanded, estimated before compiling. */
export const MAX_REGEX_PROGRAM_SIZE = 10_000;

/** Deepest nesting of groups `( … )`. */
export const MAX_REGEX_NESTING = 64;

/** RE2's largest repeat count in `{n,m}`. */
export const MAX_REGEX_REPEAT = 1_000;

/** Why a pattern was refused: not the dialect (`invalid`), not regular (`unsupported`), over a limit above (`too_large`). */
export type RegexRefusal = "invalid" | "unsupported" | "too_large";

/** A pattern refused by a translator. */
export class RegexRefused extends Error {
  readonly reason: RegexRefusal;
  constructor(reason: RegexRefusal, message: string) {
    super(message);
    this.reason = reason;
  }
}

/** A compiled RE2 program and what it costs. */
export interface Regex {
  readonly regex: RE2JS;
  /** Program instructions: a match costs (input length + 1) × this ({@link matchWork}). */
  readonly instructions: number;
  /** Instructions plus the rune ranges of their classes ({@link compileWorkAfter}). */
  readonly programSize: number;
}

export type RegexCompileResult = { ok: true; regex: Regex } | { ok: false; reason: RegexRefusal; message: string };

/** Work units of the worst-case match of `regex` over `text`. */
export function matchWork(regex: Regex, text: string): number {
  return (text.length + 1) * regex.instructions;
}

/**
 * Work units to compile a pattern of about `size` instructions (a translator's estimate,
 * or the length of an RE2 source), charged before compiling it: RE2JS compiles in time
 * quadratic in the program (4,096 literal characters: 30–58 ms in Node 22).
 */
export function compileWorkBefore(size: number): number {
  return 64 * size + Math.ceil(size ** 2 / 16);
}

/**
 * Work units of what compiling built, charged after: about 3–4 µs an instruction of an
 * expanded repeat (`[a-z]{1000}` nine times: 28 ms), and the rune ranges of its classes
 * (`(?:\p{L}|\p{N}|\p{P}|\p{S}){1000}`, 1.6 million: 132 ms).
 */
export function compileWorkAfter(regex: Regex): number {
  return 64 * regex.instructions + 2 * regex.programSize;
}

const RE2_CACHE_LIMIT = 100;

/** DFA states × (program instructions + 100) a compiled program may hold before its DFA starts over. */
const DFA_STATE_INSTRUCTIONS = 20_000;

const re2Cache = new Map<string, Regex>();

/**
 * `re2Source` compiled by RE2JS (cached by source, up to {@link RE2_CACHE_LIMIT}), with
 * the linear NFA fallback and a bounded DFA.
 *
 * @throws RE2JSException what RE2JS refuses.
 */
export function compileRe2(re2Source: string): Regex {
  const hit = re2Cache.get(re2Source);
  if (hit !== undefined) {
    return hit;
  }
  const regex = RE2JS.compile(re2Source);
  const re2 = regex.re2();
  const program = re2.prog;
  let programSize = 0;
  for (const inst of program.inst) {
    programSize += 1 + inst.runes.length;
  }
  const instructions = program.numInst();
  re2._nfaFallback = (input, pos, anchor) => matchOnNfa(program, input, pos, anchor);
  // Building a DFA state walks its instructions, and RE2JS gives up on the DFA for good after
  // five times this many states (on the NFA then): cheap where few states do, bounded where they do not.
  re2.dfa.stateLimit = Math.min(10_000, Math.max(16, Math.floor(DFA_STATE_INSTRUCTIONS / (instructions + 100))));
  const compiled = { regex, instructions, programSize };
  setBounded(re2Cache, re2Source, compiled, RE2_CACHE_LIMIT);
  return compiled;
}

/** What a translator wrote: RE2 syntax, and the program size it estimated ({@link ProgramSize}). */
export interface Translation {
  readonly source: string;
  readonly size: number;
}

/**
 * Translates and compiles a pattern, charging `charge` (when given) the work of compiling
 * it: {@link compileWorkBefore} once translated, {@link compileWorkAfter} once compiled.
 * RE2's own refusals of a translation are its size limits (nested repeats over 1,000).
 */
export function compileTranslated(translate: () => Translation, charge?: (work: number) => void): RegexCompileResult {
  try {
    const translation = translate();
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

// ───────────────────────────── the NFA fallback ─────────────────────────────

type Re2 = ReturnType<RE2JS["re2"]>;
type Program = Re2["prog"];
type MachineInput = Parameters<Re2["_nfaFallback"]>[0];

// RE2JS's instruction opcodes (`Inst.js`) and empty-width flags (`Utils.js`), checked when this module loads.
const ALT = 1;
const ALT_MATCH = 2;
const CAPTURE = 3;
const EMPTY_WIDTH = 4;
const MATCH = 6;
const NOP = 7;
const RUNE_FIRST = 8;
const RUNE_LAST = 11;
const ANCHOR_BOTH = 2;
const UNANCHORED = 0;

const isWordRune = (r: number): boolean =>
  (r >= 0x61 && r <= 0x7a) || (r >= 0x41 && r <= 0x5a) || (r >= 0x30 && r <= 0x39) || r === 0x5f;

/** The empty-width assertions (RE2JS's EMPTY_* flags) that hold between runes `before` and `after` (-1: the text's edge). */
function emptyContext(before: number, after: number): number {
  const beginText = before < 0 ? 0x04 | 0x01 : 0;
  const beginLine = before === 0x0a ? 0x01 : 0;
  const endText = after < 0 ? 0x08 | 0x02 : 0;
  const endLine = after === 0x0a ? 0x02 : 0;
  return beginText | beginLine | endText | endLine | (isWordRune(before) === isWordRune(after) ? 0x20 : 0x10);
}

/** The threads of one position: each instruction enters at most once (a generation stamp per instruction). */
class ThreadSet {
  readonly program: Program;
  readonly seen: Uint32Array;
  generation = 0;
  readonly stack: number[] = [];

  constructor(program: Program) {
    this.program = program;
    this.seen = new Uint32Array(program.numInst());
  }

  /** Adds to `list` the rune and match instructions `pc`'s closure reaches under `context`. */
  add(list: number[], pc: number, context: number): void {
    this.stack.push(pc);
    for (let at = this.stack.pop(); at !== undefined; at = this.stack.pop()) {
      const inst = this.program.inst[at];
      if (this.seen[at] === this.generation || inst === undefined) {
        continue;
      }
      this.seen[at] = this.generation;
      if (inst.op === ALT || inst.op === ALT_MATCH) {
        this.stack.push(inst.arg, inst.out);
      } else if (inst.op === NOP || inst.op === CAPTURE || (inst.op === EMPTY_WIDTH && (inst.arg & ~context) === 0)) {
        this.stack.push(inst.out);
      } else if (inst.op !== EMPTY_WIDTH) {
        list.push(at);
      }
    }
  }
}

/**
 * Whether `program` matches `input` from `pos` (anywhere, or the whole rest when
 * `anchor` is ANCHOR_BOTH): at most (input length + 1) × instructions visits.
 */
function matchOnNfa(program: Program, input: MachineInput, pos: number, anchor: number): boolean {
  const threads = new ThreadSet(program);
  const end = input.endPos();
  const runeAt = (at: number) => (at >= 0 && at < end ? input.step(at) >> 3 : -1);
  let current: number[] = [];
  let next: number[] = [];
  threads.generation += 1;
  threads.add(current, program.start, emptyContext(runeAt(pos - 1), runeAt(pos)));
  for (let at = pos; ;) {
    if ((anchor !== ANCHOR_BOTH || at >= end) && current.some((pc) => program.inst[pc]?.op === MATCH)) {
      return true;
    }
    if (at >= end || (current.length === 0 && anchor !== UNANCHORED)) {
      return false;
    }
    const step = input.step(at);
    const rune = step >> 3;
    at += step & 7;
    const context = emptyContext(rune, runeAt(at));
    threads.generation += 1;
    next.length = 0;
    for (const pc of current) {
      const inst = program.inst[pc];
      if (inst !== undefined && inst.op >= RUNE_FIRST && inst.op <= RUNE_LAST && inst.matchRune(rune)) {
        threads.add(next, inst.out, context);
      }
    }
    if (anchor === UNANCHORED) {
      threads.add(next, program.start, context);
    }
    [current, next] = [next, current];
  }
}

/** Fails loudly when this module loads if RE2JS's program no longer has the shape {@link matchOnNfa} reads. */
function checkProgramShape(): void {
  const probe = RE2JS.compile("(?:a|b\\b)*$").re2();
  const ops = new Set(probe.prog.inst.map((inst) => inst.op));
  const expected = [ALT, EMPTY_WIDTH, MATCH, RUNE_FIRST + 1];
  const fallback = (text: string, anchor: number) =>
    matchOnNfa(
      probe.prog,
      { endPos: () => text.length, step: (at: number) => (text.charCodeAt(at) << 3) | 1 } as MachineInput,
      0,
      anchor,
    );
  if (!expected.every((op) => ops.has(op)) || !fallback("ab", ANCHOR_BOTH) || fallback("ab a", ANCHOR_BOTH)) {
    throw new Error("@bufbuild/re2 changed the program lib/expr/regex.ts simulates; matches cannot be bounded");
  }
}
checkProgramShape();

// ───────────────────────────── I-Regexp (RFC 9485) → RE2 ─────────────────────────────

/** The general categories RFC 9485 allows in `\p{…}`. */
const CATEGORIES = new Set(
  "L Ll Lm Lo Lt Lu M Mc Me Mn N Nd Nl No P Pc Pd Pe Pf Pi Po Ps Z Zl Zp Zs S Sc Sk Sm So C Cc Cf Cn Co".split(" "),
);

/** `SingleCharEsc` after `\`, and the character it stands for. */
const SINGLE_ESCAPES = new Map<string, number>([
  ...Array.from("()*+-.?[\\]^{|}", (c): [string, number] => [c, c.codePointAt(0) ?? 0]),
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
]);

/** `( ) * + . ? [ \ ] { | }`: not a `NormalChar`. */
const SPECIAL = new Set(Array.from("()*+.?[\\]{|}"));

/** A code point as an RE2 literal. */
export function re2Literal(point: number): string {
  return /^[A-Za-z0-9]$/.test(String.fromCodePoint(point)) ? String.fromCodePoint(point) : `\\x{${point.toString(16)}}`;
}

/**
 * Counts the estimated program size of a pattern as a translator reads it: a size per
 * open group, multiplied out by each quantifier, refused past {@link MAX_REGEX_PROGRAM_SIZE}.
 */
export class ProgramSize {
  private readonly groups: number[] = [0];
  private last = 0;
  /** The estimate so far. */
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

/** Checks a pattern's length and splits it into code points. */
export function codePoints(source: string): string[] {
  const points = Array.from(source);
  if (points.length > MAX_REGEX_SOURCE_CHARS) {
    throw new RegexRefused("too_large", `the pattern is longer than ${MAX_REGEX_SOURCE_CHARS} characters`);
  }
  return points;
}

/** An I-Regexp (RFC 9485) compiled to RE2: `match()` runs it anchored at both ends, `search()` anywhere. */
export function compileIRegexp(source: string, charge?: (work: number) => void): RegexCompileResult {
  return compileTranslated(() => new IRegexpTranslator(codePoints(source)).translate(), charge);
}

class IRegexpTranslator {
  private readonly points: readonly string[];
  private at = 0;
  private readonly size = new ProgramSize();

  constructor(points: readonly string[]) {
    this.points = points;
  }

  translate(): Translation {
    const source = this.alternation();
    if (this.at < this.points.length) {
      throw this.invalid(this.peek() === ")" ? "unbalanced )" : `unexpected ${JSON.stringify(this.peek())}`);
    }
    return { source, size: this.size.total };
  }

  private peek(): string | undefined {
    return this.points[this.at];
  }

  private next(): string {
    const char = this.points[this.at];
    if (char === undefined) {
      throw this.invalid("unexpected end of pattern");
    }
    this.at += 1;
    return char;
  }

  private invalid(message: string, back = 0): RegexRefused {
    return new RegexRefused(
      "invalid",
      `not a valid I-Regexp (RFC 9485): ${message} at character ${this.at + 1 - back}`,
    );
  }

  private alternation(): string {
    let out = "";
    for (let char = this.peek(); char !== undefined && char !== ")"; char = this.peek()) {
      if (char === "|") {
        this.at += 1;
        out += "|";
        continue;
      }
      out += this.atom();
      out += this.quantifier();
    }
    return out;
  }

  private quantifier(): string {
    const char = this.peek();
    if (char === "*" || char === "+" || char === "?") {
      this.at += 1;
      this.size.repeat(char === "+" ? 1 : 0, char === "?" ? 1 : Infinity);
      return char;
    }
    if (char !== "{") {
      return "";
    }
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

  private atom(): string {
    const char = this.next();
    if (char === "(") {
      this.size.open();
      const inner = this.alternation();
      if (this.next() !== ")") {
        throw this.invalid("expected )", 1);
      }
      this.size.close();
      return `(?:${inner})`;
    }
    this.size.atom();
    if (char === "^" || char === "$") {
      return char;
    }
    if (char === ".") {
      return "[^\\x{a}\\x{d}]";
    }
    if (char === "[") {
      return this.classExpression();
    }
    if (char === "\\") {
      return this.escape(false);
    }
    const point = char.codePointAt(0) ?? 0;
    if (SPECIAL.has(char) || isSurrogate(point)) {
      throw this.invalid(`unexpected ${JSON.stringify(char)}`, 1);
    }
    return re2Literal(point);
  }

  /** After `\`: a `SingleCharEsc` or `\p{…}` / `\P{…}`. */
  private escape(inClass: boolean): string {
    const char = this.next();
    if (char === "p" || char === "P") {
      if (this.next() !== "{") {
        throw this.invalid("expected { after \\p", 1);
      }
      let name = "";
      for (let c = this.next(); c !== "}"; c = this.next()) {
        name += c;
      }
      if (!CATEGORIES.has(name)) {
        throw this.invalid(`unknown character category ${JSON.stringify(name)}`);
      }
      return `\\${char}{${name}}`;
    }
    const point = SINGLE_ESCAPES.get(char);
    if (point === undefined) {
      throw this.invalid(`\\${char} is not an I-Regexp escape${inClass ? " in a character class" : ""}`, 1);
    }
    return re2Literal(point);
  }

  /** After `[`: `[^]? ( "-" / CCE1 ) *CCE1 [ "-" ] "]"`. */
  private classExpression(): string {
    let out = "[";
    if (this.peek() === "^") {
      this.at += 1;
      out += "^";
    }
    for (let first = true; ; first = false) {
      const char = this.next();
      if (char === "]" && !first) {
        return `${out}]`;
      }
      if (char === "-") {
        if (!first && this.peek() !== "]") {
          throw this.invalid("- must come first or last in a character class, or be escaped", 1);
        }
        out += re2Literal(0x2d);
      } else if (char === "\\" && (this.peek() === "p" || this.peek() === "P")) {
        out += this.escape(true);
      } else {
        out += this.classRange(char);
      }
    }
  }

  private classRange(char: string): string {
    const low = this.classChar(char);
    if (this.peek() !== "-" || this.points[this.at + 1] === "]") {
      return re2Literal(low);
    }
    this.at += 1;
    const high = this.classChar(this.next());
    if (high < low) {
      throw this.invalid("character range out of order");
    }
    return `${re2Literal(low)}-${re2Literal(high)}`;
  }

  /** A `CCchar`: anything but `- [ \ ]` and surrogates, or a `SingleCharEsc`. */
  private classChar(char: string): number {
    if (char === "\\") {
      const escaped = this.next();
      const point = SINGLE_ESCAPES.get(escaped);
      if (point === undefined) {
        throw this.invalid(`\\${escaped} is not an I-Regexp escape in a character class`, 1);
      }
      return point;
    }
    const point = char.codePointAt(0) ?? 0;
    if (char === "[" || char === "]" || char === "-" || isSurrogate(point)) {
      throw this.invalid(`${JSON.stringify(char)} must be escaped in a character class`, 1);
    }
    return point;
  }
}

function isSurrogate(point: number): boolean {
  return point >= 0xd800 && point <= 0xdfff;
}
