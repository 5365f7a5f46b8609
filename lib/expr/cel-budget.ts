/**
 * The cost budget of one CEL evaluation. Definitions and run inputs are untrusted, and
 * CEL without a limit is not cheap: nested `map`s multiply, `s + s` doubles, equality
 * of shared structures walks them whole. Every evaluation gets a {@link CelMeter} of
 * {@link MAX_CEL_COST_UNITS}; exceeding it stops the evaluation at once with
 * `expr.budget_exceeded` (not retryable: the same input costs the same again).
 *
 * Why a counter and not a deadline: workerd does not advance `Date.now()` or
 * `performance.now()` while code runs without I/O (a Spectre mitigation), so a
 * deadline checked inside a synchronous evaluation would never fire. Costs are
 * counted instead, in units of roughly one evaluated AST node:
 *
 * - each evaluation costs the node count of its expression;
 * - each iteration of a comprehension (`all`, `exists`, `exists_one`, `map`, `filter`)
 *   costs the node count of its loop condition and step plus
 *   {@link CEL_ITERATION_BASE_COST_UNITS}: {@link instrumentComprehensions} wraps each
 *   loop condition in a call of {@link CEL_ITERATION_FUNCTION} that charges it;
 * - each function call costs 1, plus the strings and bytes it reads
 *   ({@link CEL_STRING_CHARS_PER_COST_UNIT} characters a unit), plus, for the calls that
 *   walk lists and maps (`==`, `!=`, `in` on a list, `join`, `format`, list `+`), the
 *   items they walk (measured by a walk that stops at the budget; a unit per item, three
 *   for equality and two for `in`, which walk and compare);
 * - `matches` costs the input length times the regex program size
 *   ({@link CEL_REGEX_WORK_PER_COST_UNIT} work units of `regex.ts` a unit): RE2 is linear
 *   in the input but not free; its pattern may be at most {@link MAX_CEL_REGEX_CHARS}
 *   long, and compiling it is charged once per pattern in an evaluation, by its length
 *   squared and its program's instructions and class ranges ({@link METERED_RE2});
 * - converting the result to JSON costs a unit per list item or map entry, so a result
 *   that shares one list many times over cannot expand unbounded.
 *
 * And two size caps, checked on every function result: a string or bytes longer than
 * {@link MAX_CEL_STRING_CHARS}, or a list or map larger than {@link MAX_CEL_LIST_ITEMS},
 * fails the evaluation the same way.
 *
 * Each unit is well under a microsecond of work on the measured worst cases (see
 * docs/definitions.md, "Budgets"), so a budget-exceeded evaluation ends within a
 * fraction of a second. Inside a work-budget scope (`work-budget.ts`) the limit is what
 * the scope has left when that is less, and the meter stops with the scope's reason.
 *
 * Functions reach the meter of the evaluation running now through {@link withCelMeter},
 * the one piece of module state here: an evaluation is synchronous from start to end,
 * so it is set and restored around it and no request ever sees another's meter.
 */

import { type CelFunc, type CelResult, CelScalar, type CelValue, isCelError, isCelList, isCelMap } from "@bufbuild/cel";
import type { Regex } from "./regex.ts";
import { EngineError } from "../errors.ts";
import { AppendList, CelSizeLimitError, MAX_CEL_LIST_ITEMS, MAX_CEL_STRING_CHARS } from "./cel-functions.ts";

/** Cost units one CEL evaluation may spend (about one evaluated AST node each). */
export const MAX_CEL_COST_UNITS = 1_000_000;

/** Characters of a string (or bytes of a bytes value) a function reads per cost unit. */
export const CEL_STRING_CHARS_PER_COST_UNIT = 10;

/**
 * Regex work units (`regex.ts`: input characters × program instructions) per cost unit,
 * for `matches`: up to 80 ns each in Node 22, so a unit stays under 0.2 µs.
 */
export const CEL_REGEX_WORK_PER_COST_UNIT = 2;

/**
 * Longest pattern `matches` compiles. `@bufbuild/re2` compiles a long literal in time
 * quadratic in its length (16,000 characters: 0.26 s; 100,000: 35 s), and a pattern can
 * come from run input; at 1,024 characters the slowest compile measured was about 0.1 s.
 */
export const MAX_CEL_REGEX_CHARS = 1_024;

/**
 * What one iteration of a comprehension costs on top of the nodes of its loop condition
 * and step: the library's loop machinery (a variable scope, the overload search of the
 * accumulator's `+`) measures as about five nodes' worth.
 */
export const CEL_ITERATION_BASE_COST_UNITS = 5;

/** The function {@link instrumentComprehensions} inserts; it cannot be called from source. */
export const CEL_ITERATION_FUNCTION = "@trellis_iteration";

/** Thrown inside an evaluation when the budget is spent; {@link CelMeter.exceeded} keeps the reason. */
class BudgetExceeded extends Error {}

/** The cost of one evaluation so far, against its budget. */
export class CelMeter {
  readonly limit: number;
  spent = 0;
  /** Why the evaluation was stopped, once it was. */
  exceeded: string | undefined;
  /** The arguments last charged: the library tries each overload with the same array. */
  lastArgs: unknown;

  /** Why the evaluation stops when it passes {@link limit}. */
  readonly limitReason: string;
  /** Patterns `matches` compiled in this evaluation: each is charged its compile once. */
  readonly regexes = new Map<string, Regex>();

  /** `limitReason` when the limit is not the evaluation's own (a scope's remainder, `work-budget.ts`). */
  constructor(limit: number = MAX_CEL_COST_UNITS, limitReason?: string) {
    this.limit = limit;
    this.limitReason = limitReason ?? `exceeded its cost budget of ${limit} units`;
  }

  /** What is left, in units. */
  get remaining(): number {
    return Math.max(0, this.limit - this.spent);
  }

  /** @throws BudgetExceeded once more than the budget is spent. */
  charge(units: number): void {
    this.spent += units;
    if (this.spent > this.limit) {
      this.stop(this.limitReason);
    }
  }

  /** Ends the evaluation: this call and every later charge throw. */
  stop(reason: string): never {
    this.exceeded ??= reason;
    this.spent = Math.max(this.spent, this.limit + 1);
    throw new BudgetExceeded(reason);
  }
}

let activeMeter: CelMeter | undefined;

/** Runs `evaluate` with `meter` charged by the engine's CEL functions. */
export function withCelMeter<T>(meter: CelMeter, evaluate: () => T): T {
  const outer = activeMeter;
  activeMeter = meter;
  try {
    return evaluate();
  } finally {
    activeMeter = outer;
  }
}

/** The meter of the evaluation running now, if any: what the engine's CEL functions charge. */
export function activeCelMeter(): CelMeter | undefined {
  return activeMeter;
}

/** The EngineError of an evaluation stopped by its meter (`reason`: the meter's `exceeded`). */
export function budgetError(reason: string | undefined, source: string): EngineError {
  return new EngineError(
    "expr.budget_exceeded",
    `CEL evaluation ${reason ?? "exceeded its budget"} (in ${quote(source)})`,
  );
}

// ───────────────────────────── metered functions ─────────────────────────────

const CEL_FUNC_MARK = Symbol.for("@bufbuild/cel/func");

interface FuncShape {
  readonly id: string;
  readonly name: string;
  readonly target: CelFunc["target"];
  readonly arguments: CelFunc["arguments"];
  readonly result: CelFunc["result"];
  call(id: number, target: CelValue | undefined, args: CelValue[]): CelResult | undefined;
}

// A CelFunc is the library's interface plus an unexported brand, whose runtime form is
// the registered symbol above; nothing checks it, but the object carries it all the same.
// A call() that throws (unlike a celFunc implementation, whose throws become CEL errors)
// ends the whole evaluation: a spent budget is not an error that `||` could absorb.
function asCelFunc(shape: FuncShape): CelFunc {
  return Object.assign(shape, { [CEL_FUNC_MARK]: {} }) as unknown as CelFunc;
}

/** `inner`, charged to the evaluation's meter before it runs and checked after. */
function metered(inner: CelFunc): CelFunc {
  return asCelFunc({
    get id() {
      return inner.id;
    },
    name: inner.name,
    target: inner.target,
    arguments: inner.arguments,
    result: inner.result,
    call(id, target, args) {
      const meter = activeMeter;
      if (meter === undefined) {
        return inner.call(id, target, args);
      }
      if (meter.lastArgs !== args) {
        meter.lastArgs = args;
        meter.charge(callCost(meter, inner.name, target, args));
      }
      const result = inner.call(id, target, args);
      if (result !== undefined && isCelError(result) && result.cause instanceof CelSizeLimitError) {
        meter.stop(result.message);
      }
      if (result !== undefined && !isCelError(result)) {
        chargeResult(meter, inner.name, result);
      }
      return result;
    },
  });
}

/** Every function of `funcs`, metered (see the top of this file). */
export function meterFunctions(funcs: Iterable<CelFunc>): CelFunc[] {
  return Array.from(funcs, metered);
}

/** Charges an iteration of a comprehension: `@trellis_iteration(condition, weight)` returns `condition`. */
export const ITERATION_FUNCTION: CelFunc = asCelFunc({
  id: `${CEL_ITERATION_FUNCTION}(dyn,int)`,
  name: CEL_ITERATION_FUNCTION,
  target: undefined,
  arguments: [CelScalar.DYN, CelScalar.INT],
  result: CelScalar.DYN,
  call(_id, target, args) {
    const [condition, weight] = args;
    if (target !== undefined || condition === undefined || typeof weight !== "bigint") {
      return undefined;
    }
    activeMeter?.charge(Number(weight));
    return condition;
  },
});

function callCost(meter: CelMeter, name: string, target: CelValue | undefined, args: readonly CelValue[]): number {
  switch (name) {
    case "_==_":
    case "_!=_":
      // Walking both sides to size them, then comparing: about three visits per item.
      return 1 + 3 * pairUnits(meter, args[0], args[1]);
    case "@in": {
      const [, container] = args;
      return 1 + shallowUnits(args[0]) + (isCelList(container) ? 2 * deepUnits(container, meter.remaining + 1) : 0);
    }
    case "join":
    case "format":
      return (
        1 +
        shallowUnits(target) +
        deepUnits(target, meter.remaining + 1) +
        (args[0] === undefined ? 0 : deepUnits(args[0], meter.remaining + 1))
      );
    case "size": {
      // A JSON object counts its keys on first use (the library's maps know their size).
      const sized = target ?? args[0];
      return 1 + shallowUnits(sized) + (isCelMap(sized) ? Math.ceil(sized.size / CEL_STRING_CHARS_PER_COST_UNIT) : 0);
    }
    case "_+_": {
      const [left, right] = args;
      if (isCelList(left) && isCelList(right)) {
        return 1 + right.size + (left instanceof AppendList && left.extendable ? 0 : left.size);
      }
      return 1 + shallowUnits(left) + shallowUnits(right);
    }
    default: {
      let units = 1 + shallowUnits(target);
      for (const arg of args) {
        units += shallowUnits(arg);
      }
      return units;
    }
  }
}

function chargeResult(meter: CelMeter, name: string, result: CelValue): void {
  if (typeof result === "string" || result instanceof Uint8Array) {
    if (result.length > MAX_CEL_STRING_CHARS) {
      meter.stop(
        `built a ${typeof result === "string" ? "string" : "bytes value"} longer than ${MAX_CEL_STRING_CHARS} (in ${name})`,
      );
    }
    meter.charge(shallowUnits(result));
  } else if (isCelList(result) || isCelMap(result)) {
    if (result.size > MAX_CEL_LIST_ITEMS) {
      meter.stop(`built a ${isCelList(result) ? "list" : "map"} of more than ${MAX_CEL_LIST_ITEMS} items (in ${name})`);
    }
    if (name === "split") {
      meter.charge(result.size);
    }
  }
}

/** What reading a value costs when its contents are not walked: strings and bytes by length. */
export function shallowUnits(value: CelValue | undefined): number {
  if (typeof value === "string" || value instanceof Uint8Array) {
    return Math.ceil(value.length / CEL_STRING_CHARS_PER_COST_UNIT);
  }
  return 0;
}

/** Units to walk `value` whole (an item or entry is a unit), counting no further than `cap`. */
export function deepUnits(value: CelValue | undefined, cap: number): number {
  let units = 0;
  const stack: CelValue[] = value === undefined ? [] : [value];
  for (let item = stack.pop(); item !== undefined && units <= cap; item = stack.pop()) {
    units += 1 + shallowUnits(item);
    if (isCelList(item)) {
      for (const element of item) {
        stack.push(element);
        if (units + stack.length > cap) {
          break;
        }
      }
    } else if (isCelMap(item)) {
      for (const [key, element] of item.entries()) {
        stack.push(key, element);
        if (units + stack.length > cap) {
          break;
        }
      }
    }
  }
  return units + stack.length;
}

/** Equality walks the smaller side at most: walk both in growing steps until one ends. */
function pairUnits(meter: CelMeter, left: CelValue | undefined, right: CelValue | undefined): number {
  const containers = (isCelList(left) || isCelMap(left)) && (isCelList(right) || isCelMap(right));
  if (!containers) {
    return Math.min(shallowUnits(left), shallowUnits(right));
  }
  for (let cap = 64; ; cap *= 4) {
    const smaller = Math.min(deepUnits(left, cap), deepUnits(right, cap));
    if (smaller <= cap || cap > meter.remaining) {
      return smaller;
    }
  }
}

function quote(source: string): string {
  return JSON.stringify(source.length > 200 ? `${source.slice(0, 200)}…` : source);
}
