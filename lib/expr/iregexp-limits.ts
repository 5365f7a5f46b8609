import { EngineError } from "../errors.ts";

// The limits of the I-Regexp engine and the budget its VM charges, shared by every module of it.

/** Longest accepted pattern, in code points. */
export const MAX_IREGEXP_SOURCE_CHARS = 4_096;

/** Largest compiled program, in instructions (counted repetition `{n,m}` is expanded). */
export const MAX_IREGEXP_PROGRAM_SIZE = 10_000;

/** Deepest nesting of groups `( … )`. */
export const MAX_IREGEXP_NESTING = 64;

/** VM steps (instruction visits) one budget allows unless its owner gives another limit. */
export const MAX_REGEX_STEPS = 10_000_000;

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

/** A pattern over one of the limits above; shared with the ECMAScript front end (`ecma-regexp.ts`). */
export class RegexTooLargeError extends Error {}
