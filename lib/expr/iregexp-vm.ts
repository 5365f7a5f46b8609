import type { RegexBudget } from "./iregexp-limits.ts";
import type { CharSet } from "./iregexp-charset.ts";
import {
  BEGIN,
  CHAR,
  END,
  JUMP,
  MATCH,
  NOT_WORD_BOUNDARY,
  type Program,
  SPLIT,
  WORD_BOUNDARY,
} from "./iregexp-program.ts";

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
export function runVm(program: Program, text: string, whole: boolean, budget: RegexBudget): boolean {
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
