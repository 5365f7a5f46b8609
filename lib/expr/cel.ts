/**
 * CEL (Common Expression Language) for conditions and `{ "expr": ... }` mappings, on
 * `@bufbuild/cel`: a tree-walking interpreter (PEG parser, planner, evaluator) that
 * generates no code, so it runs in production workerd where `eval`/`new Function` throw.
 *
 * ## JSON → CEL (the variables: `input`, `state`, `output`, `item`, `index`, ...)
 *
 * Contexts are JSON, and JSON has one number type while CEL has `int`, `uint` and
 * `double` with no implicit conversion between them. The rules:
 *
 * - a whole number in the int64 range (`2`, `-7`, `2.0` — JSON cannot tell those
 *   apart) is a CEL `int`, so `input.count + 1 > 2`, `input.n * 2`, `list[input.i]`
 *   work; every other number (`1.5`, `1e300`) is a CEL `double`;
 * - strings, booleans and `null` are themselves; arrays are lists; objects are
 *   `map(string, dyn)`; a `bigint` is an `int` and a `Uint8Array` is `bytes` (for
 *   callers that have them; JSON does not);
 * - an object key whose value is `undefined` is absent, as in `JSON.stringify`; other
 *   non-JSON values (functions, dates, class instances) fail the evaluation.
 *
 * Objects and arrays are wrapped, not copied: a value is converted only when the
 * expression reaches it, so a condition over a large `state` costs what it reads.
 * The wrappers also give `has(m.k)` and `'k' in m` CEL's meaning (key present) when
 * the value is `null`; the library's own maps answer `false` there.
 *
 * ## Extension: mixed int/double arithmetic
 *
 * Standard CEL rejects `2 * 1.5` ("no matching overload"). Because a JSON `2.0`
 * arrives as an int, `input.price * 1.1` would work or fail depending on whether the
 * price happens to be whole. So `+ - * /` also accept one `int` and one `double`
 * and compute in double. Comparisons across numeric types are standard CEL already.
 * The `strings` extension (`lowerAscii`, `split`, `join`, `format`, ...) is enabled, with
 * positions counted in code points and a linear `replace` (`cel-functions.ts`).
 *
 * ## Budget
 *
 * Every evaluation is metered (`cel-budget.ts`): functions, comprehension iterations and
 * the conversion of the result are charged against `MAX_CEL_COST_UNITS`, and strings and
 * lists built by functions are capped; past either, `expr.budget_exceeded` (not retryable).
 * Inside a work-budget scope (a coordinator event, a task: `work-budget.ts`) an evaluation
 * may spend no more than the scope has left, and what it spends is charged to the scope.
 *
 * ## CEL → JSON (the result)
 *
 * `int`/`uint` → number when it is a safe integer, else its decimal string (as the
 * protobuf JSON mapping does for int64); `double` → number, with NaN and ±Infinity
 * as `"NaN"`, `"Infinity"`, `"-Infinity"`; lists → arrays; maps → plain objects
 * (int/uint/bool keys become strings); `bytes` → base64 string; `null` → `null`;
 * `timestamp`/`duration` → their protobuf JSON strings (`"2024-01-01T00:00:00Z"`,
 * `"1.500s"`, `"90s"`); a type value → its name (`"int"`). A result that is (part of)
 * an input is returned as that input value itself, not a copy: callers must not
 * mutate it.
 */
import { setBounded } from "../bounded-cache.ts";
import {
  CelScalar,
  celEnv,
  celFunc,
  celList,
  celMap,
  isCelError,
  isCelList,
  isCelMap,
  isCelType,
  isCelUint,
  parse,
  plan,
  type CelEnv,
  type CelError,
  type CelFunc,
  type CelInput,
  type CelList,
  type CelMap,
  type CelUint,
  type CelValue,
} from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { toJson } from "@bufbuild/protobuf";
import { isReflectMessage } from "@bufbuild/protobuf/reflect";
import type { Expr, SourceInfo } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { EngineError } from "../errors.ts";
import {
  CEL_ITERATION_FUNCTION,
  CEL_STRING_CHARS_PER_COST_UNIT,
  CelMeter,
  MAX_CEL_COST_UNITS,
  ITERATION_FUNCTION,
  METERED_RE2,
  budgetError,
  instrumentComprehensions,
  meterFunctions,
  withCelMeter,
} from "./cel-budget.ts";
import { CODE_POINT_STRING_FUNCTIONS, LIST_FUNCTIONS } from "./cel-functions.ts";
import { CompiledKind, compileInScope, evaluationAllowance } from "./work-budget.ts";

/** A parsed and planned expression: the unit the cache keeps, reusable across evaluations. */
export interface CelProgram {
  readonly source: string;
  /** Evaluates with JSON variables and returns JSON; throws `expr.eval_failed`. */
  evaluate(vars: Record<string, unknown>): unknown;
}

/** Outcome of a registration-time check: definitions with bad CEL are rejected, not run. */
export type CelCompileResult = { ok: true; program: CelProgram } | { ok: false; message: string };

const INT64_MIN = -(2 ** 63);
const INT64_LIMIT = 2 ** 63;
const INT64_MIN_BIG = -(2n ** 63n);
const INT64_MAX_BIG = 2n ** 63n - 1n;
const UINT64_MAX_BIG = 2n ** 64n - 1n;
const CACHE_LIMIT = 500;

const { INT, DOUBLE } = CelScalar;

/** `int op double` and `double op int` overloads, computed in double (see the header). */
const mixedArithmetic = [
  celFunc("_+_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) + r),
  celFunc("_+_", [DOUBLE, INT], DOUBLE, (l, r) => l + Number(r)),
  celFunc("_-_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) - r),
  celFunc("_-_", [DOUBLE, INT], DOUBLE, (l, r) => l - Number(r)),
  celFunc("_*_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) * r),
  celFunc("_*_", [DOUBLE, INT], DOUBLE, (l, r) => l * Number(r)),
  celFunc("_/_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) / r),
  celFunc("_/_", [DOUBLE, INT], DOUBLE, (l, r) => l / Number(r)),
];

/**
 * The engine's CEL functions, unmetered: the library's `strings` extension with the
 * replacements of `cel-functions.ts` (code-point positions, linear `replace`, flat list
 * `+`) and the mixed arithmetic above. Exported for the conformance tests.
 */
export const CEL_FUNCTIONS: readonly CelFunc[] = [
  ...strings,
  ...mixedArithmetic,
  ...CODE_POINT_STRING_FUNCTIONS,
  ...LIST_FUNCTIONS,
];

/** The same functions and the standard library, each charged to the evaluation's meter (`cel-budget.ts`). */
const env: CelEnv = celEnv({
  funcs: [...meterFunctions(celEnv({ funcs: [...CEL_FUNCTIONS] }).funcs), ITERATION_FUNCTION],
  re2: METERED_RE2,
});

/** Calls the planner evaluates itself; they never appear in the function resolver. */
const PLANNER_CALLS = new Set([
  "_[_]",
  "_[?_]",
  "_?._",
  "_?_:_",
  "_&&_",
  "_||_",
  "@not_strictly_false",
  "__not_strictly_false__",
]);

// ---------------------------------------------------------------------------
// Compilation and the per-isolate cache

const cache = new Map<string, CelCompileResult>();

/** Programs a work-budget scope compiled (`work-budget.ts`): each source is charged once per scope. */
const CEL_PROGRAMS = new CompiledKind<CelCompileResult>("cel");

/**
 * Parses and plans `source`. Used when a definition is registered, so that CEL that
 * does not parse, calls a function that does not exist (including misused macros such
 * as `has(1)`), or has an out-of-range integer literal is rejected before any run.
 */
export function compileCel(source: string): CelCompileResult {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source);
    cache.set(source, hit);
    return hit;
  }
  const result = compileUncached(source);
  setBounded(cache, source, result, CACHE_LIMIT);
  return result;
}

/**
 * Evaluates `source` against JSON variables and returns JSON (conversion rules at the
 * top of this file). The compiled program is cached per isolate.
 *
 * @throws EngineError `expr.invalid` when the source does not compile,
 *   `expr.eval_failed` when evaluation fails (no such key, overflow, bad overload...),
 *   `expr.budget_exceeded` when it spends its cost budget or builds an oversized value.
 */
export function evalCel(source: string, vars: Record<string, unknown>): unknown {
  const compiled = compileInScope(CEL_PROGRAMS, source, compileCel);
  if (!compiled.ok) {
    throw new EngineError("expr.invalid", compiled.message);
  }
  return compiled.program.evaluate(vars);
}

/**
 * Evaluates a condition. A condition that yields anything but a bool is an error,
 * never truthiness: `state.items` being non-empty is `size(state.items) > 0`.
 *
 * @throws EngineError `expr.not_boolean`, plus those of {@link evalCel}.
 */
export function evalCelBool(source: string, vars: Record<string, unknown>): boolean {
  const result = evalCel(source, vars);
  if (typeof result !== "boolean") {
    throw new EngineError(
      "expr.not_boolean",
      `CEL condition must evaluate to a bool, got ${describeJson(result)}: ${quote(source)}`,
    );
  }
  return result;
}

function compileUncached(source: string): CelCompileResult {
  let parsed: ReturnType<typeof parse>;
  try {
    parsed = parse(source);
  } catch (thrown) {
    return { ok: false, message: syntaxMessage(source, thrown) };
  }
  const problem = findStaticProblem(parsed.expr, parsed.sourceInfo);
  if (problem !== undefined) {
    return { ok: false, message: `invalid CEL ${quote(source)}: ${problem}` };
  }
  const nodes = parsed.expr === undefined ? 1 : instrumentComprehensions(parsed.expr);
  let run: ReturnType<typeof plan>;
  try {
    run = plan(env, parsed);
  } catch (thrown) {
    return { ok: false, message: `invalid CEL ${quote(source)}: ${errorText(thrown)}` };
  }
  const sourceInfo = parsed.sourceInfo;
  const program: CelProgram = {
    source,
    evaluate(vars) {
      const bindings: Record<string, CelInput> = Object.create(null) as Record<string, CelInput>;
      for (const [name, value] of Object.entries(vars)) {
        if (value !== undefined) {
          bindings[name] = toCelValue(value);
        }
      }
      const allowance = evaluationAllowance(MAX_CEL_COST_UNITS, 1, (reason) => budgetError(reason, source));
      const meter = new CelMeter(allowance.limit, allowance.scopeReason);
      try {
        return evaluateMetered(meter, () => run(bindings), nodes, source, sourceInfo);
      } finally {
        allowance.settle(meter.spent);
      }
    },
  };
  return { ok: true, program };
}

/** Runs a planned expression under `meter` and converts its result; `nodes` is its node count. */
function evaluateMetered(
  meter: CelMeter,
  run: () => CelValue | CelError,
  nodes: number,
  source: string,
  sourceInfo: SourceInfo | undefined,
): unknown {
  let result: CelValue | CelError;
  try {
    result = withCelMeter(meter, () => {
      meter.charge(nodes);
      return run();
    });
  } catch (thrown) {
    throw meter.exceeded === undefined
      ? new EngineError("expr.eval_failed", `CEL evaluation failed: ${errorText(thrown)} in ${quote(source)}`, {
          cause: thrown,
        })
      : budgetError(meter.exceeded, source);
  }
  // A spent budget is reported as such even when `||`, `&&` or `?:` absorbed the error.
  if (meter.exceeded !== undefined) {
    throw budgetError(meter.exceeded, source);
  }
  if (isCelError(result)) {
    throw new EngineError("expr.eval_failed", evalMessage(source, result, sourceInfo), { cause: result });
  }
  return resultToJson(result, meter, source);
}

function syntaxMessage(source: string, thrown: unknown): string {
  if (thrown instanceof Error) {
    const located = thrown as Error & {
      rawMessage?: unknown;
      location?: { start?: { line?: unknown; column?: unknown } };
    };
    const line = located.location?.start?.line;
    const column = located.location?.start?.column;
    const raw = typeof located.rawMessage === "string" ? located.rawMessage : thrown.message;
    if (typeof line === "number" && typeof column === "number") {
      return `CEL syntax error at line ${line}, column ${column}: ${raw} (in ${quote(source)})`;
    }
    return `CEL syntax error: ${raw} (in ${quote(source)})`;
  }
  return `CEL syntax error: ${String(thrown)} (in ${quote(source)})`;
}

function evalMessage(source: string, error: CelError, sourceInfo: SourceInfo | undefined): string {
  let where = "";
  if (error.exprId !== undefined && sourceInfo !== undefined) {
    const offset = sourceInfo.positions[Number(error.exprId)];
    if (offset !== undefined) {
      where = ` at character ${offset + 1}`;
    }
  }
  let message = error.message;
  if (message === "unresolved attribute") {
    message =
      "undeclared variable (bound variables are the context's: input, state, output, and item/index in a foreach)";
  }
  return `CEL evaluation failed${where}: ${message} (in ${quote(source)})`;
}

/** What the lenient parser accepts but CEL does not; returns a description or undefined. */
function findStaticProblem(root: Expr, sourceInfo: SourceInfo | undefined): string | undefined {
  const stack: Expr[] = [root];
  for (let expr = stack.pop(); expr !== undefined; expr = stack.pop()) {
    const kind = expr.exprKind;
    switch (kind.case) {
      case "constExpr": {
        const constant = kind.value.constantKind;
        if (constant.case === "int64Value" && (constant.value < INT64_MIN_BIG || constant.value > INT64_MAX_BIG)) {
          return `integer literal out of range${at(expr, sourceInfo)}`;
        }
        if (constant.case === "uint64Value" && constant.value > UINT64_MAX_BIG) {
          return `unsigned integer literal out of range${at(expr, sourceInfo)}`;
        }
        break;
      }
      case "selectExpr":
        if (kind.value.operand !== undefined) {
          stack.push(kind.value.operand);
        }
        break;
      case "callExpr": {
        const call = kind.value;
        if (!isKnownFunction(call.function, call.target)) {
          const shown = call.target === undefined ? `${call.function}()` : `.${call.function}()`;
          return `unknown function ${shown} or wrong use of a macro${at(expr, sourceInfo)}`;
        }
        if (call.target !== undefined) {
          stack.push(call.target);
        }
        stack.push(...call.args);
        break;
      }
      case "listExpr":
        stack.push(...kind.value.elements);
        break;
      case "structExpr":
        for (const entry of kind.value.entries) {
          if (entry.keyKind.case === "mapKey") {
            stack.push(entry.keyKind.value);
          }
          if (entry.value !== undefined) {
            stack.push(entry.value);
          }
        }
        break;
      case "comprehensionExpr": {
        const c = kind.value;
        for (const part of [c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]) {
          if (part !== undefined) {
            stack.push(part);
          }
        }
        break;
      }
      default:
        break;
    }
  }
  return undefined;
}

function isKnownFunction(name: string, target: Expr | undefined): boolean {
  if (name === CEL_ITERATION_FUNCTION) {
    return false;
  }
  if (PLANNER_CALLS.has(name) || env.funcs.find(name) !== undefined) {
    return true;
  }
  // `strings.quote(x)` parses as method `quote` on the identifier `strings`.
  const qualifier = target === undefined ? undefined : qualifiedName(target);
  return qualifier !== undefined && env.funcs.find(`${qualifier}.${name}`) !== undefined;
}

function qualifiedName(expr: Expr): string | undefined {
  const kind = expr.exprKind;
  if (kind.case === "identExpr") {
    return kind.value.name;
  }
  if (kind.case === "selectExpr" && kind.value.operand !== undefined) {
    const operand = qualifiedName(kind.value.operand);
    return operand === undefined ? undefined : `${operand}.${kind.value.field}`;
  }
  return undefined;
}

function at(expr: Expr, sourceInfo: SourceInfo | undefined): string {
  const offset = sourceInfo?.positions[Number(expr.id)];
  return offset === undefined ? "" : ` at character ${offset + 1}`;
}

// ---------------------------------------------------------------------------
// JSON → CEL

/**
 * `@bufbuild/cel` recognises its maps and lists by these registered symbols
 * (`Symbol.for`), which is what lets the lazy JSON views below take part in
 * evaluation (equality, `size`, comprehensions, `type()`). The views are checked at
 * load: should a later version change the marker, conversion falls back to eager
 * copies through the library's own `celMap`/`celList` (correct except `has()` on a
 * null value), and the tests of that behaviour fail loudly.
 */
const CEL_MAP_MARK = Symbol.for("@bufbuild/cel/map");
const CEL_LIST_MARK = Symbol.for("@bufbuild/cel/list");

type MapKey = string | bigint | boolean | CelUint | number;

/** A JSON object seen as a CEL `map(string, dyn)`, converting values on access. */
class JsonMap {
  readonly [CEL_MAP_MARK] = {};
  readonly raw: Readonly<Record<string, unknown>>;
  constructor(raw: Readonly<Record<string, unknown>>) {
    this.raw = raw;
  }
  /** Counted once: a JSON value is not mutated while an expression reads it, and `size(m)` in a loop must stay O(1). */
  private counted: number | undefined;
  get size(): number {
    if (this.counted === undefined) {
      let n = 0;
      for (const key of Object.keys(this.raw)) {
        if (this.raw[key] !== undefined) {
          n++;
        }
      }
      this.counted = n;
    }
    return this.counted;
  }
  get(key: MapKey): CelValue | undefined {
    if (typeof key !== "string" || !Object.hasOwn(this.raw, key)) {
      return undefined;
    }
    const value = this.raw[key];
    return value === undefined ? undefined : toCelValue(value);
  }
  has(key: MapKey): boolean {
    return typeof key === "string" && Object.hasOwn(this.raw, key) && this.raw[key] !== undefined;
  }
  *keys(): Generator<string, void, undefined> {
    for (const key of Object.keys(this.raw)) {
      if (this.raw[key] !== undefined) {
        yield key;
      }
    }
  }
  *values(): Generator<CelValue, void, undefined> {
    for (const [, value] of this.entries()) {
      yield value;
    }
  }
  *entries(): Generator<[string, CelValue], void, undefined> {
    for (const key of Object.keys(this.raw)) {
      const value = this.raw[key];
      if (value !== undefined) {
        yield [key, toCelValue(value)];
      }
    }
  }
  forEach(callback: (value: CelValue, key: string, map: CelMap) => void, thisArg?: unknown): void {
    for (const [key, value] of this.entries()) {
      callback.call(thisArg, value, key, asCelMap(this));
    }
  }
  [Symbol.iterator](): Generator<[string, CelValue], void, undefined> {
    return this.entries();
  }
}

/** A JSON array seen as a CEL `list(dyn)`, converting elements on access. */
class JsonList {
  readonly [CEL_LIST_MARK] = {};
  readonly raw: readonly unknown[];
  constructor(raw: readonly unknown[]) {
    this.raw = raw;
  }
  get size(): number {
    return this.raw.length;
  }
  get(index: number): CelValue | undefined {
    if (!Number.isInteger(index) || index < 0 || index >= this.raw.length) {
      return undefined;
    }
    return toCelValue(this.raw[index] ?? null);
  }
  *values(): Generator<CelValue, void, undefined> {
    for (let i = 0; i < this.raw.length; i++) {
      yield toCelValue(this.raw[i] ?? null);
    }
  }
  [Symbol.iterator](): Generator<CelValue, void, undefined> {
    return this.values();
  }
}

// The views implement the library's interfaces except the unexported brand, whose
// runtime form is the registered symbol above; these casts are the one place that knows.
function asCelMap(view: JsonMap): CelMap {
  return view as unknown as CelMap;
}
function asCelList(view: JsonList): CelList {
  return view as unknown as CelList;
}

const lazyViewsWork = isCelMap(new JsonMap({})) && isCelList(new JsonList([]));

function toCelValue(value: unknown): CelValue {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isInteger(value) && value >= INT64_MIN && value < INT64_LIMIT ? BigInt(value) : value;
    case "bigint":
      return value;
    case "object":
      if (value === null || value instanceof Uint8Array) {
        return value;
      }
      if (Array.isArray(value)) {
        return lazyViewsWork ? asCelList(new JsonList(value)) : eagerList(value);
      }
      if (isPlainObject(value)) {
        return lazyViewsWork ? asCelMap(new JsonMap(value)) : eagerMap(value);
      }
      throw new TypeError(`value is not JSON (${Object.prototype.toString.call(value)})`);
    default:
      throw new TypeError(`value is not JSON (${typeof value})`);
  }
}

function eagerList(value: readonly unknown[]): CelValue {
  return celList(value.map((element) => toCelValue(element ?? null)));
}

function eagerMap(value: Readonly<Record<string, unknown>>): CelValue {
  const map = new Map<string, CelValue>();
  for (const [key, element] of Object.entries(value)) {
    if (element !== undefined) {
      map.set(key, toCelValue(element));
    }
  }
  return celMap(map);
}

function isPlainObject(value: object): value is Record<string, unknown> {
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

// ---------------------------------------------------------------------------
// CEL → JSON

/** The result as JSON; the conversion is charged (a unit per item) so shared structure cannot expand unbounded. */
function resultToJson(result: CelValue, meter: CelMeter, source: string): unknown {
  try {
    return fromCelValue(result, meter);
  } catch (thrown) {
    if (meter.exceeded !== undefined) {
      throw budgetError(meter.exceeded, source);
    }
    if (thrown instanceof EngineError) {
      throw thrown;
    }
    const reason = thrown instanceof RangeError ? "the result is nested too deeply" : errorText(thrown);
    throw new EngineError(
      "expr.eval_failed",
      `CEL result cannot be represented as JSON: ${reason} (in ${quote(source)})`,
      { cause: thrown },
    );
  }
}

function fromCelValue(value: CelValue, meter: CelMeter): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "bigint":
      return intToJson(value);
    case "number":
      if (Number.isFinite(value)) {
        return value;
      }
      return Number.isNaN(value) ? "NaN" : value > 0 ? "Infinity" : "-Infinity";
    default:
      break;
  }
  if (value === null) {
    return null;
  }
  if (value instanceof JsonMap || value instanceof JsonList) {
    chargeRawJson(value.raw, meter);
    return value.raw;
  }
  if (value instanceof Uint8Array) {
    return bytesToBase64(value);
  }
  if (isCelUint(value)) {
    return intToJson(value.value);
  }
  if (isCelList(value)) {
    meter.charge(value.size);
    return Array.from(value, (element) => fromCelValue(element, meter));
  }
  if (isCelMap(value)) {
    meter.charge(value.size);
    return Object.fromEntries(
      Array.from(value.entries(), ([key, element]) => [mapKeyToJson(key), fromCelValue(element, meter)]),
    );
  }
  if (isCelType(value)) {
    return value.name;
  }
  if (isReflectMessage(value)) {
    return toJson(value.desc, value.message);
  }
  throw new EngineError("expr.eval_failed", "CEL result cannot be represented as JSON");
}

/**
 * An input value returned as is costs what serialising it will: a unit per item or entry
 * and per {@link CEL_STRING_CHARS_PER_COST_UNIT} characters (so `l.map(x, input.big)`
 * cannot hand back thousands of references to one large value). The walk stops at the budget.
 */
function chargeRawJson(raw: unknown, meter: CelMeter): void {
  let units = 0;
  const stack: unknown[] = [raw];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    if (typeof item === "string") {
      units += Math.ceil(item.length / CEL_STRING_CHARS_PER_COST_UNIT);
    } else if (typeof item === "object" && item !== null) {
      const children = Array.isArray(item) ? item : Object.values(item);
      units += children.length;
      stack.push(...children);
    }
    if (units > meter.remaining) {
      break;
    }
  }
  meter.charge(units);
}

function intToJson(value: bigint): number | string {
  const asNumber = Number(value);
  return Number.isSafeInteger(asNumber) ? asNumber : value.toString();
}

function mapKeyToJson(key: string | bigint | boolean | CelUint): string {
  if (typeof key === "string") {
    return key;
  }
  if (typeof key === "bigint" || typeof key === "boolean") {
    return String(key);
  }
  return key.value.toString();
}

function bytesToBase64(bytes: Uint8Array): string {
  let binary = "";
  const chunk = 0x8000;
  for (let i = 0; i < bytes.length; i += chunk) {
    binary += String.fromCharCode(...bytes.subarray(i, i + chunk));
  }
  return btoa(binary);
}

// ---------------------------------------------------------------------------

function describeJson(value: unknown): string {
  if (value === null) {
    return "null";
  }
  if (Array.isArray(value)) {
    return "a list";
  }
  if (typeof value === "object") {
    return "a map";
  }
  return `${typeof value} ${JSON.stringify(value)}`;
}

function errorText(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}

function quote(source: string): string {
  return JSON.stringify(source.length > 200 ? `${source.slice(0, 200)}…` : source);
}
