/**
 * The one regular-expression engine: `@bufbuild/re2` (RE2JS, the RE2 port `@bufbuild/cel`
 * uses), for CEL `matches()`, and for JSONPath I-Regexp and JSON Schema ECMAScript patterns
 * once `regex-syntax.ts` has translated them. RE2 never backtracks (`(a|aa)+` costs what
 * `a+` does): patterns may come from anyone holding a token, so V8's `RegExp` never matches.
 *
 * **Cost.** RE2JS cannot count its work or be stopped, so a match is charged up front for
 * its worst case, {@link matchWork}, and compiling by its program ({@link compileWorkBefore},
 * {@link compileWorkAfter}); each budget converts these work units into its own unit
 * (docs/definitions.md, "Budgets"). That worst case holds because {@link compileRe2} bounds
 * the lazy DFA's states by the program's size and replaces RE2JS's NFA fallback, quadratic
 * in the program (it walks each live instruction's closure anew), with {@link matchOnNfa},
 * which visits each instruction at most once per position.
 */
import { RE2JS } from "@bufbuild/re2";
import { setBounded } from "../bounded-cache.ts";

/** A compiled RE2 program and what it costs. */
export interface Regex {
  readonly regex: RE2JS;
  /** Program instructions: a match costs (input length + 1) × this ({@link matchWork}). */
  readonly instructions: number;
  /** Instructions plus the rune ranges of their classes ({@link compileWorkAfter}). */
  readonly programSize: number;
}

/** Work units of the worst-case match of `regex` over `text`. */
export function matchWork(regex: Regex, text: string): number {
  return (text.length + 1) * regex.instructions;
}

/**
 * Work units to compile a pattern of about `size` instructions (a translator's estimate,
 * or the length of an RE2 source), charged before compiling: RE2JS compiles a literal in
 * time quadratic in its length.
 */
export function compileWorkBefore(size: number): number {
  return 64 * size + Math.ceil(size ** 2 / 16);
}

/** Work units of what compiling built, charged after: its instructions and the rune ranges of its classes. */
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

// ───────────────────────────── the NFA fallback ─────────────────────────────

type Re2 = ReturnType<RE2JS["re2"]>;
type Program = Re2["prog"];
type MachineInput = Parameters<Re2["_nfaFallback"]>[0];

// RE2JS's instruction opcodes (`Inst.js`) and anchors (`RE2JS.js`), checked when this module loads.
const [ALT, ALT_MATCH, CAPTURE, EMPTY_WIDTH, MATCH, NOP, RUNE_FIRST, RUNE_LAST] = [1, 2, 3, 4, 6, 7, 8, 11];
const [UNANCHORED, ANCHOR_BOTH] = [0, 2];

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

/**
 * Whether `program` matches `input` from `pos` (anywhere, or the whole rest when
 * `anchor` is ANCHOR_BOTH): at most (input length + 1) × instructions visits.
 */
function matchOnNfa(program: Program, input: MachineInput, pos: number, anchor: number): boolean {
  const seen = new Uint32Array(program.numInst());
  let generation = 1;
  const stack: number[] = [];
  /** Adds to `list` the rune and match instructions `pc`'s closure reaches under `context`, each once a position. */
  const add = (list: number[], pc: number, context: number) => {
    for (let at: number | undefined = pc; at !== undefined; at = stack.pop()) {
      const inst = program.inst[at];
      if (seen[at] === generation || inst === undefined) {
        continue;
      }
      seen[at] = generation;
      if (inst.op === ALT || inst.op === ALT_MATCH) {
        stack.push(inst.arg, inst.out);
      } else if (inst.op === NOP || inst.op === CAPTURE || (inst.op === EMPTY_WIDTH && (inst.arg & ~context) === 0)) {
        stack.push(inst.out);
      } else if (inst.op !== EMPTY_WIDTH) {
        list.push(at);
      }
    }
  };
  const end = input.endPos();
  const runeAt = (at: number) => (at >= 0 && at < end ? input.step(at) >> 3 : -1);
  let current: number[] = [];
  let next: number[] = [];
  add(current, program.start, emptyContext(runeAt(pos - 1), runeAt(pos)));
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
    generation += 1;
    next.length = 0;
    for (const pc of current) {
      const inst = program.inst[pc];
      if (inst !== undefined && inst.op >= RUNE_FIRST && inst.op <= RUNE_LAST && inst.matchRune(rune)) {
        add(next, inst.out, context);
      }
    }
    if (anchor === UNANCHORED) {
      add(next, program.start, context);
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
