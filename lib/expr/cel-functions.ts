/**
 * CEL functions the engine defines itself, replacing those of `@bufbuild/cel` (same
 * names and overloads, so they take their place in the environment):
 *
 * - **Positions count code points**, as CEL specifies (a CEL string is a sequence of
 *   Unicode code points), not UTF-16 units: `charAt`, `indexOf`, `lastIndexOf`,
 *   `substring`, and `split('')` (which splits into code points). `"😀 smile".substring(0, 1)`
 *   is `"😀"`, never half of it: a lone surrogate cannot be signed into the journal.
 *   `size()` already counts code points in the library.
 * - **`replace` runs in linear time.** The library rebuilt the whole string once per
 *   occurrence (120 KB of input took 7.7 s); this one builds the result once. An empty
 *   search string inserts the replacement before every code point and at the end (Go's
 *   `strings.Replace`, which cel-go uses), at most `n` times when `n` is given.
 * - **List `+` appends in place when it can.** The library's lazy concatenation made
 *   `list.map(x, …)` a chain of n nested lists: reading it back cost O(n²) and overflowed
 *   the stack from about 5,000 items. {@link AppendList} shares one backing array between
 *   a list and the longer lists made from it (a list sees only its own prefix), so the
 *   accumulator of a macro grows in amortised O(1) per item.
 *
 * Index errors keep the library's rules (an index outside `[0, size]`, a start outside
 * `[0, size)`), counted in code points.
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

const { STRING, INT, DYN } = CelScalar;
const LIST = listType(DYN);

// ───────────────────────────── code points ─────────────────────────────

/** The number of code points in `text` (a lone surrogate counts as one). */
export function countCodePoints(text: string): number {
  let count = 0;
  for (let unit = 0; unit < text.length; unit += 1) {
    const code = text.charCodeAt(unit);
    if (code >= 0xd800 && code <= 0xdbff && unit + 1 < text.length) {
      const next = text.charCodeAt(unit + 1);
      if (next >= 0xdc00 && next <= 0xdfff) {
        unit += 1;
      }
    }
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

function isPairAt(text: string, unit: number): boolean {
  const code = text.charCodeAt(unit);
  if (code < 0xd800 || code > 0xdbff || unit + 1 >= text.length) {
    return false;
  }
  const next = text.charCodeAt(unit + 1);
  return next >= 0xdc00 && next <= 0xdfff;
}

function outOfBounds(index: number, size: number): Error {
  return new Error(`index ${index} out of bounds [0, ${size})`);
}

function charAt(this: string, index: bigint): string {
  const i = Number(index);
  const size = countCodePoints(this);
  if (i < 0 || i > size) {
    throw outOfBounds(i, size);
  }
  const start = unitOffset(this, i);
  return start >= this.length ? "" : this.slice(start, start + (isPairAt(this, start) ? 2 : 1));
}

function indexOf(this: string, search: string, start?: bigint): bigint {
  let from = 0;
  if (start !== undefined) {
    const i = Number(start);
    const size = countCodePoints(this);
    if (i < 0 || i >= size) {
      throw outOfBounds(i, size);
    }
    from = unitOffset(this, i);
  }
  const found = this.indexOf(search, from);
  return BigInt(found < 0 ? -1 : countCodePoints(this.slice(0, found)));
}

function lastIndexOf(this: string, search: string, start?: bigint): bigint {
  let found: number;
  if (start === undefined) {
    found = this.lastIndexOf(search);
  } else {
    const i = Number(start);
    const size = countCodePoints(this);
    if (i < 0 || i >= size) {
      throw outOfBounds(i, size);
    }
    found = this.lastIndexOf(search, unitOffset(this, i));
  }
  return BigInt(found < 0 ? -1 : countCodePoints(this.slice(0, found)));
}

function substring(this: string, start: bigint, end?: bigint): string {
  const size = countCodePoints(this);
  const i = Number(start);
  if (i < 0 || i > size) {
    throw outOfBounds(i, size);
  }
  if (end === undefined) {
    return this.slice(unitOffset(this, i));
  }
  const j = Number(end);
  if (j < 0 || j > size) {
    throw outOfBounds(j, size);
  }
  if (i > j) {
    throw new Error("invalid argument to function substring: start > end");
  }
  const from = unitOffset(this, i);
  return this.slice(from, from + unitOffset(this.slice(from), j - i));
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
  const count = limit === undefined ? undefined : Number(limit);
  if (count === 0) {
    return celList([]);
  }
  if (count === 1) {
    return celList([this]);
  }
  if (separator !== "") {
    if (count === undefined || count < 0) {
      return celList(this.split(separator));
    }
    const parts = this.split(separator);
    return celList([...parts.slice(0, count - 1), parts.slice(count - 1).join(separator)]);
  }
  const points = Array.from(this);
  if (count === undefined || count < 0 || count >= points.length) {
    return celList(points);
  }
  return celList([...points.slice(0, count - 1), points.slice(count - 1).join("")]);
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
 * appending to any other list copies.
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
export function concatLists(left: CelList, right: CelList): CelList {
  if (left.size + right.size > MAX_CEL_LIST_ITEMS) {
    throw new CelSizeLimitError(`list + would build a list of more than ${MAX_CEL_LIST_ITEMS} items`);
  }
  const items = left instanceof AppendList && left.extendable ? left.items : Array.from(left);
  for (const item of right) {
    items.push(item);
  }
  return asCelList(new AppendList(items, items.length));
}

// The list implements the library's interface except its unexported brand, whose runtime
// form is the registered symbol above (as for the JSON views in cel.ts).
function asCelList(list: AppendList): CelList {
  return list as unknown as CelList;
}

/** List concatenation without nesting (replaces the library's `_+_(list, list)`). */
export const LIST_FUNCTIONS: readonly CelFunc[] = [celFunc("_+_", [LIST, LIST], LIST, concatLists)];
