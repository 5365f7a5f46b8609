/**
 * CEL functions the engine defines itself, replacing those of `@bufbuild/cel` (same
 * names and overloads, so they take their place in the environment):
 *
 * - **Positions count code points**, as CEL specifies, not UTF-16 units: `charAt`,
 *   `indexOf`, `lastIndexOf`, `substring` and `split('')`, so no function cuts a surrogate
 *   pair in half (a lone surrogate cannot be signed into the journal). Index errors keep
 *   the library's rules, counted in code points.
 * - **`replace` runs in linear time** (the library rebuilt the string once per occurrence).
 *   An empty search string inserts the replacement before every code point and at the end
 *   (Go's `strings.Replace`, which cel-go uses), at most `n` times when `n` is given.
 * - **List `+` appends in place when it can** ({@link AppendList}): the library's lazy
 *   concatenation made the accumulator of `list.map(x, …)` a chain of n nested lists,
 *   quadratic to read and deep enough to overflow the stack.
 */
import {
  CelScalar,
  celFunc,
  celList,
  celMethod,
  listType,
  type CelFunc,
  type CelList,
  type CelValue,
} from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";

/** Longest string (UTF-16 units) or bytes value a CEL function may return. */
export const MAX_CEL_STRING_CHARS = 1_048_576;

/** Most items a list, or entries a map, returned by a CEL function may have. */
export const MAX_CEL_LIST_ITEMS = 100_000;

/**
 * Thrown by a function that would build a value over {@link MAX_CEL_STRING_CHARS} or
 * {@link MAX_CEL_LIST_ITEMS} before building it; the metering in `cel-budget.ts` turns it
 * into `expr.budget_exceeded`.
 */
export class CelSizeLimitError extends Error {}

const { STRING, INT, DOUBLE, DYN } = CelScalar;
const LIST = listType(DYN);

// ───────────────────────────── code points ─────────────────────────────

/** Whether a surrogate pair starts at UTF-16 offset `unit` (a lone surrogate is a code point of its own). */
function isPairAt(text: string, unit: number): boolean {
  const code = text.charCodeAt(unit);
  if (code < 0xd800 || code > 0xdbff || unit + 1 >= text.length) {
    return false;
  }
  const next = text.charCodeAt(unit + 1);
  return next >= 0xdc00 && next <= 0xdfff;
}

/** The number of code points in `text`. */
function countCodePoints(text: string): number {
  let count = 0;
  for (let unit = 0; unit < text.length; unit += isPairAt(text, unit) ? 2 : 1) {
    count += 1;
  }
  return count;
}

/** The UTF-16 offset of code point `index` (`text.length` when `index` is the count). */
function unitOffset(text: string, index: number): number {
  let unit = 0;
  for (let point = 0; point < index && unit < text.length; point += 1) {
    unit += isPairAt(text, unit) ? 2 : 1;
  }
  return unit;
}

/** The UTF-16 offset of code point `index`, which must lie in `[0, size]`, or `[0, size)` unless `orEnd`. */
function checkedOffset(text: string, index: bigint, orEnd: boolean): number {
  const i = Number(index);
  const size = countCodePoints(text);
  if (i < 0 || i > size || (i === size && !orEnd)) {
    throw new Error(`index ${i} out of bounds [0, ${size})`);
  }
  return unitOffset(text, i);
}

/** The code-point index of UTF-16 offset `found`, or -1 when nothing was found. */
function pointIndex(text: string, found: number): bigint {
  return BigInt(found < 0 ? -1 : countCodePoints(text.slice(0, found)));
}

function charAt(this: string, index: bigint): string {
  const start = checkedOffset(this, index, true);
  return this.slice(start, start + (isPairAt(this, start) ? 2 : 1));
}

function indexOf(this: string, search: string, start?: bigint): bigint {
  return pointIndex(this, this.indexOf(search, start === undefined ? 0 : checkedOffset(this, start, false)));
}

function lastIndexOf(this: string, search: string, start?: bigint): bigint {
  const from = start === undefined ? Infinity : checkedOffset(this, start, false);
  return pointIndex(this, this.lastIndexOf(search, from));
}

function substring(this: string, start: bigint, end?: bigint): string {
  const from = checkedOffset(this, start, true);
  if (end === undefined) {
    return this.slice(from);
  }
  const to = checkedOffset(this, end, true);
  if (start > end) {
    throw new Error("invalid argument to function substring: start > end");
  }
  return this.slice(from, to);
}

/** Linear-time replace of the first `limit` occurrences (all when `limit` is absent or negative). */
function replace(this: string, search: string, replacement: string, limit?: bigint): string {
  const max = limit === undefined || limit < 0n ? Infinity : Number(limit);
  if (search === "") {
    return insertBetweenCodePoints(this, replacement, max);
  }
  const parts: string[] = [];
  let from = 0;
  let done = 0;
  let length = this.length;
  for (let found = this.indexOf(search); found >= 0 && done < max; found = this.indexOf(search, from)) {
    length += replacement.length - search.length;
    checkLength(length, "replace");
    parts.push(this.slice(from, found), replacement);
    from = found + search.length;
    done += 1;
  }
  parts.push(this.slice(from));
  return parts.join("");
}

function checkLength(length: number, name: string): void {
  if (length > MAX_CEL_STRING_CHARS) {
    throw new CelSizeLimitError(`${name} would build a string longer than ${MAX_CEL_STRING_CHARS}`);
  }
}

function insertBetweenCodePoints(text: string, insert: string, max: number): string {
  const parts: string[] = [];
  let done = 0;
  let unit = 0;
  while (unit < text.length && done < max) {
    checkLength(text.length + (done + 1) * insert.length, "replace");
    const width = isPairAt(text, unit) ? 2 : 1;
    parts.push(insert, text.slice(unit, unit + width));
    unit += width;
    done += 1;
  }
  if (unit >= text.length && done < max) {
    parts.push(insert);
  }
  parts.push(text.slice(unit));
  return parts.join("");
}

/** `split` as in the library, except that an empty separator splits into code points, not UTF-16 units. */
function split(this: string, separator: string, limit?: bigint): CelList {
  const count = limit === undefined ? -1 : Number(limit);
  if (count === 0 || count === 1) {
    return celList(count === 0 ? [] : [this]);
  }
  const parts = separator === "" ? Array.from(this) : this.split(separator);
  if (count < 0 || (separator === "" && count >= parts.length)) {
    return celList(parts);
  }
  return celList([...parts.slice(0, count - 1), parts.slice(count - 1).join(separator)]);
}

/** String functions whose positions count code points, and a linear `replace`. */
export const CODE_POINT_STRING_FUNCTIONS: readonly CelFunc[] = [
  celMethod("charAt", STRING, [INT], STRING, charAt),
  celMethod("indexOf", STRING, [STRING], INT, indexOf),
  celMethod("indexOf", STRING, [STRING, INT], INT, indexOf),
  celMethod("lastIndexOf", STRING, [STRING], INT, lastIndexOf),
  celMethod("lastIndexOf", STRING, [STRING, INT], INT, lastIndexOf),
  celMethod("substring", STRING, [INT], STRING, substring),
  celMethod("substring", STRING, [INT, INT], STRING, substring),
  celMethod("replace", STRING, [STRING, STRING], STRING, replace),
  celMethod("replace", STRING, [STRING, STRING, INT], STRING, replace),
  celMethod("split", STRING, [STRING], LIST, split),
  celMethod("split", STRING, [STRING, INT], LIST, split),
];

// ───────────────────────────── lists ─────────────────────────────

const CEL_LIST_MARK = Symbol.for("@bufbuild/cel/list");

/**
 * A list that sees the first `size` items of a backing array it may share with the lists
 * made from it by `+`. Appending to a list whose view ends where the array ends extends
 * the array in place (no other list can see past its own `size`, so none is affected);
 * appending to any other list copies. It implements the library's `CelList` but for the
 * unexported brand, whose runtime form is the registered symbol above (as the JSON views
 * of `cel-values.ts` do).
 */
export class AppendList {
  readonly [CEL_LIST_MARK] = {};
  readonly items: CelValue[];
  readonly size: number;
  constructor(items: CelValue[], size: number) {
    this.items = items;
    this.size = size;
  }
  /** Whether `+` can append to this list without copying it. */
  get extendable(): boolean {
    return this.items.length === this.size;
  }
  get(index: number): CelValue | undefined {
    return Number.isInteger(index) && index >= 0 && index < this.size ? this.items[index] : undefined;
  }
  *values(): Generator<CelValue, void, undefined> {
    for (let i = 0; i < this.size; i += 1) {
      yield this.items[i] as CelValue;
    }
  }
  [Symbol.iterator](): Generator<CelValue, void, undefined> {
    return this.values();
  }
}

/** `a + b` on lists: O(|b|) when `a` is extendable, else O(|a| + |b|). */
function concatLists(left: CelList, right: CelList): CelList {
  if (left.size + right.size > MAX_CEL_LIST_ITEMS) {
    throw new CelSizeLimitError(`list + would build a list of more than ${MAX_CEL_LIST_ITEMS} items`);
  }
  const items = left instanceof AppendList && left.extendable ? left.items : Array.from(left);
  for (const item of right) {
    items.push(item);
  }
  return new AppendList(items, items.length) as unknown as CelList;
}

/** List concatenation without nesting (replaces the library's `_+_(list, list)`). */
export const LIST_FUNCTIONS: readonly CelFunc[] = [celFunc("_+_", [LIST, LIST], LIST, concatLists)];

/** `int op double` and `double op int` in double: `input.price * 1.1` works whether the price is whole or not. */
const MIXED_ARITHMETIC: readonly CelFunc[] = Object.entries({
  "_+_": (l: number, r: number) => l + r,
  "_-_": (l: number, r: number) => l - r,
  "_*_": (l: number, r: number) => l * r,
  "_/_": (l: number, r: number) => l / r,
}).flatMap(([name, op]) => [
  celFunc(name, [INT, DOUBLE], DOUBLE, (l, r) => op(Number(l), r)),
  celFunc(name, [DOUBLE, INT], DOUBLE, (l, r) => op(l, Number(r))),
]);

/** The engine's CEL functions, unmetered: the library's `strings` extension, replaced and extended as above. */
export const ENGINE_FUNCTIONS: readonly CelFunc[] = [
  ...strings,
  ...MIXED_ARITHMETIC,
  ...CODE_POINT_STRING_FUNCTIONS,
  ...LIST_FUNCTIONS,
];
