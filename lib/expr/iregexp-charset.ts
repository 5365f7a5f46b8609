// ───────────────────────────── character sets ─────────────────────────────

/** The general categories RFC 9485 allows in `\p{…}` (`charProp`). */
export const CATEGORIES = new Set([
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

export function anyButNewline(): CharSet {
  const set = new CharSet();
  set.addRange(0x0a, 0x0a);
  set.addRange(0x0d, 0x0d);
  set.negated = true;
  return set;
}

export function single(point: number): CharSet {
  const set = new CharSet();
  set.addRange(point, point);
  return set;
}
