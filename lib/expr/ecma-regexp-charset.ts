import { CharSet } from "./iregexp.ts";

// ───────────────────────────── character sets ─────────────────────────────

export const MAX_CODE_POINT = 0x10ffff;

/** `\d`, `\w`, `\s` as inclusive code point ranges (`\s`: WhiteSpace and LineTerminator, ECMA-262 §12.2–12.3). */
const DIGIT_RANGES: readonly number[] = [0x30, 0x39];

const WORD_RANGES: readonly number[] = [0x30, 0x39, 0x41, 0x5a, 0x5f, 0x5f, 0x61, 0x7a];

const SPACE_RANGES: readonly number[] = [
  0x09, 0x0d, 0x20, 0x20, 0xa0, 0xa0, 0x1680, 0x1680, 0x2000, 0x200a, 0x2028, 0x2029, 0x202f, 0x202f, 0x205f, 0x205f,
  0x3000, 0x3000, 0xfeff, 0xfeff,
];

export const LINE_TERMINATORS: readonly number[] = [0x0a, 0x0a, 0x0d, 0x0d, 0x2028, 0x2029];

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

export const CLASS_ESCAPES = new Map<string, readonly number[]>([
  ["d", DIGIT_RANGES],
  ["D", complement(DIGIT_RANGES)],
  ["w", WORD_RANGES],
  ["W", complement(WORD_RANGES)],
  ["s", SPACE_RANGES],
  ["S", complement(SPACE_RANGES)],
]);

export function rangesSet(ranges: readonly number[], negated = false): CharSet {
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

/** A class atom: one character, or a set (`\d`, `\p{L}`…) that cannot bound a range. */
export type ClassAtom = { readonly point: number } | { readonly set: CharSet };

/** Adds a class atom to a class: a character, or the characters of a set (a negated set as its complement or a negated category). */
export function addClassAtom(set: CharSet, atom: ClassAtom): void {
  // Class escapes come as ranges already complemented (`\D`) or as categories that carry their own negation (`\P{L}`).
  if ("point" in atom) {
    set.addRange(atom.point, atom.point);
    return;
  }
  addRanges(set, atom.set.ranges);
  set.categories.push(...atom.set.categories);
}

/** `SyntaxCharacter` and `/`: what `\` may escape as itself with the `u` flag. */
export const IDENTITY_ESCAPES = new Set(["^", "$", "\\", ".", "*", "+", "?", "(", ")", "[", "]", "{", "}", "|", "/"]);

export const CONTROL_ESCAPES = new Map<string, number>([
  ["f", 0x0c],
  ["n", 0x0a],
  ["r", 0x0d],
  ["t", 0x09],
  ["v", 0x0b],
]);
