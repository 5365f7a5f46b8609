import { MAX_IREGEXP_PROGRAM_SIZE, RegexTooLargeError } from "./iregexp-limits.ts";
import type { CharSet } from "./iregexp-charset.ts";
import type { Node, RegexNode } from "./iregexp-parser.ts";

// ───────────────────────────── program ─────────────────────────────

export const CHAR = 0;

export const SPLIT = 1;

export const JUMP = 2;

export const BEGIN = 3;

export const END = 4;

export const MATCH = 5;

export const WORD_BOUNDARY = 6;

export const NOT_WORD_BOUNDARY = 7;

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
