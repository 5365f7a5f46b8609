/**
 * The cost budget of one CEL evaluation. Definitions and run inputs are untrusted, and CEL
 * without a limit is not cheap: nested `map`s multiply, `s + s` doubles, equality of shared
 * structures walks them whole. Every evaluation gets a {@link CelMeter}; past its limit, or
 * past a size cap of `cel-functions.ts`, the evaluation stops at once with
 * `expr.budget_exceeded` (not retryable: the same input costs the same again). A counter,
 * not a deadline: workerd does not advance its clocks while code runs without I/O. What
 * each construct costs is in docs/definitions.md ("Budgets").
 *
 * Functions reach the meter of the evaluation running now through {@link withCelMeter},
 * the one piece of module state here: an evaluation is synchronous from start to end, so
 * it is set and restored around it and no request ever sees another's meter.
 */

import {
  celEnv,
  type CelEnv,
  type CelFunc,
  celFunc,
  CelScalar,
  type CelValue,
  isCelError,
  isCelList,
  isCelMap,
} from "@bufbuild/cel";
import { compileRe2, compileWorkAfter, compileWorkBefore, matchWork, type Regex } from "./regex.ts";
import {
  AppendList,
  CelSizeLimitError,
  ENGINE_FUNCTIONS,
  MAX_CEL_LIST_ITEMS,
  MAX_CEL_STRING_CHARS,
} from "./cel-functions.ts";

/** Cost units one CEL evaluation may spend (about one evaluated AST node each). */
export const MAX_CEL_COST_UNITS = 1_000_000;

/** Characters of a string (or bytes of a bytes value) a function reads per cost unit. */
export const CEL_STRING_CHARS_PER_COST_UNIT = 10;

/** Regex work units (`regex.ts`) per cost unit, for `matches`: up to 80 ns each, so a unit stays under 0.2 µs. */
export const CEL_REGEX_WORK_PER_COST_UNIT = 2;

/** Longest pattern `matches` compiles: `@bufbuild/re2` compiles a long literal in time quadratic in its length. */
export const MAX_CEL_REGEX_CHARS = 1_024;

/** What one comprehension iteration costs besides the nodes of its condition and step: the library's loop machinery. */
export const CEL_ITERATION_BASE_COST_UNITS = 5;

/** The function `instrumentComprehensions` (`cel-check.ts`) inserts; it cannot be called from source. */
export const CEL_ITERATION_FUNCTION = "@trellis_iteration";

/** Thrown inside an evaluation when the budget is spent; {@link CelMeter.exceeded} keeps the reason. */
class BudgetExceeded extends Error {}

/** The cost of one evaluation so far, against its budget. */
export class CelMeter {
  spent = 0;
  /** Why the evaluation was stopped, once it was. */
  exceeded: string | undefined;
  /** The arguments last charged: the library tries each overload with the same array. */
  lastArgs: unknown;
  /** Patterns `matches` compiled in this evaluation: each is charged its compile once. */
  readonly regexes = new Map<string, Regex>();

  /** `limitReason`: why it stops at `limit`, given when that is a scope's remainder (`work-budget.ts`). */
  readonly limit: number;
  readonly limitReason: string;

  constructor(limit: number, limitReason = `exceeded its cost budget of ${limit} units`) {
    this.limit = limit;
    this.limitReason = limitReason;
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

// ───────────────────────────── metered functions ─────────────────────────────

/**
 * `inner`, charged to the evaluation's meter before it runs and checked after. It inherits
 * `inner`'s name, types and the library's brand (a registered symbol on the object). A
 * throw from `call` (unlike one from a `celFunc` implementation, which becomes a CEL error)
 * ends the whole evaluation: a spent budget is not an error that `||` could absorb.
 */
function metered(inner: CelFunc): CelFunc {
  const call: CelFunc["call"] = (id, target, args) => {
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
  };
  return Object.create(inner, { call: { value: call } }) as CelFunc;
}

/** `@trellis_iteration(condition, weight)` returns `condition`; its metering charges `weight`. */
const ITERATION_FUNCTION = celFunc(CEL_ITERATION_FUNCTION, [CelScalar.DYN, CelScalar.INT], CelScalar.DYN, (c) => c);

function callCost(meter: CelMeter, name: string, target: CelValue | undefined, args: readonly CelValue[]): number {
  switch (name) {
    case CEL_ITERATION_FUNCTION:
      return Number(args[1]);
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
        1 + shallowUnits(target) + deepUnits(target, meter.remaining + 1) + deepUnits(args[0], meter.remaining + 1)
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
    default:
      return args.reduce<number>((units, arg) => units + shallowUnits(arg), 1 + shallowUnits(target));
  }
}

function chargeResult(meter: CelMeter, name: string, result: CelValue): void {
  if (typeof result === "string" || result instanceof Uint8Array) {
    if (result.length > MAX_CEL_STRING_CHARS) {
      const kind = typeof result === "string" ? "string" : "bytes value";
      meter.stop(`built a ${kind} longer than ${MAX_CEL_STRING_CHARS} (in ${name})`);
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
function shallowUnits(value: CelValue | undefined): number {
  if (typeof value === "string" || value instanceof Uint8Array) {
    return Math.ceil(value.length / CEL_STRING_CHARS_PER_COST_UNIT);
  }
  return 0;
}

/** Units to walk `value` whole (an item or entry is a unit), counting no further than `cap`. */
function deepUnits(value: CelValue | undefined, cap: number): number {
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

// ───────────────────────────── regex (CEL `matches`) ─────────────────────────────

const toUnits = (work: number) => Math.ceil(work / CEL_REGEX_WORK_PER_COST_UNIT);

/**
 * The engine's RE2 (`regex.ts`) for `matches`, charged by input length × program size.
 * Compiling is charged too, once per pattern in an evaluation ({@link CelMeter.regexes}),
 * hit or miss in the isolate's cache, so the charge does not depend on what the isolate
 * ran before and a pattern list longer than the cache cannot recompile for free.
 */
const METERED_RE2: NonNullable<NonNullable<Parameters<typeof celEnv>[0]>["re2"]> = {
  compile(pattern) {
    const meter = activeMeter;
    if (pattern.length > MAX_CEL_REGEX_CHARS) {
      const reason = `matches() pattern is longer than ${MAX_CEL_REGEX_CHARS} characters`;
      meter?.stop(reason);
      throw new Error(reason);
    }
    let regex = meter?.regexes.get(pattern);
    if (regex === undefined) {
      // The source length is known before compiling: a quadratic literal is refused before it runs.
      meter?.charge(1 + shallowUnits(pattern) + toUnits(compileWorkBefore(pattern.length)));
      regex = compileRe2(pattern);
      meter?.charge(toUnits(compileWorkAfter(regex)));
      meter?.regexes.set(pattern, regex);
    }
    const compiled = regex;
    return {
      test(text) {
        activeMeter?.charge(toUnits(matchWork(compiled, text)));
        return compiled.regex.test(text);
      },
    };
  },
};

/** The CEL environment every expression is planned in: the engine's functions and the standard library, metered. */
export const env: CelEnv = celEnv({
  funcs: Array.from(celEnv({ funcs: [...ENGINE_FUNCTIONS, ITERATION_FUNCTION] }).funcs, metered),
  re2: METERED_RE2,
});
