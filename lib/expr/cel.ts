/**
 * CEL (Common Expression Language) for conditions and `{ "expr": ... }` mappings, on
 * `@bufbuild/cel`: a tree-walking interpreter (PEG parser, planner, evaluator) that
 * generates no code, so it runs in production workerd where `eval`/`new Function` throw.
 *
 * ## JSON → CEL (the variables: `input`, `state`, `output`, `item`, `index`, ...)
 *
 * Besides the variables an evaluation is given, `run` is bound inside a run scope
 * (`run-scope.ts`): the run, node, item and step the expression is evaluated for.
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
import { type CelError, type CelInput, type CelValue, isCelError, parse, plan } from "@bufbuild/cel";
import type { SourceInfo } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { EngineError } from "../errors.ts";
import { budgetError, CelMeter, MAX_CEL_COST_UNITS, withCelMeter } from "./cel-budget.ts";
import { instrumentComprehensions } from "./cel-instrument.ts";
import { CompiledKind, compileInScope, evaluationAllowance } from "./work-budget.ts";
import { env } from "./cel-env.ts";
import { fieldsSelected, findStaticProblem, freeVariables } from "./cel-check.ts";
import { fromCelValue, toCelValue } from "./cel-values.ts";
import { currentRunVariables, RUN_VARIABLE } from "./run-scope.ts";

export { CEL_FUNCTIONS } from "./cel-env.ts";

/** A parsed and planned expression: the unit the cache keeps, reusable across evaluations. */
export interface CelProgram {
  readonly source: string;
  /** The variables it reads (`freeVariables`): registration checks them against its context's. */
  readonly variables: readonly string[];
  /** The fields it selects on `run` (`id` in `run.id`): registration checks them against what `run` holds there. */
  readonly runFields: readonly string[];
  /** Evaluates with JSON variables and returns JSON; throws `expr.eval_failed`. */
  evaluate(vars: Record<string, unknown>): unknown;
}

/** Outcome of a registration-time check: definitions with bad CEL are rejected, not run. */
export type CelCompileResult = { ok: true; program: CelProgram } | { ok: false; message: string };

const CACHE_LIMIT = 500;

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
  // Read before instrumenting: the budget's rewrite adds calls, never variables, but reads the tree as written.
  const variables = parsed.expr === undefined ? [] : freeVariables(parsed.expr);
  const runFields = parsed.expr === undefined ? [] : fieldsSelected(parsed.expr, RUN_VARIABLE);
  const nodes = parsed.expr === undefined ? 1 : instrumentComprehensions(parsed.expr);
  let run: ReturnType<typeof plan>;
  try {
    run = plan(env, parsed);
  } catch (thrown) {
    return { ok: false, message: `invalid CEL ${quote(source)}: ${errorText(thrown)}` };
  }
  const sourceInfo = parsed.sourceInfo;
  const readsRun = variables.includes(RUN_VARIABLE);
  const program: CelProgram = {
    source,
    variables,
    runFields,
    evaluate(vars) {
      const bindings: Record<string, CelInput> = Object.create(null) as Record<string, CelInput>;
      for (const [name, value] of Object.entries(vars)) {
        if (value !== undefined) {
          bindings[name] = toCelValue(value);
        }
      }
      // `run` is reserved: the scope's, never a document's (run-scope.ts).
      const runVariables = readsRun ? currentRunVariables() : undefined;
      if (runVariables !== undefined) {
        bindings[RUN_VARIABLE] = toCelValue(runVariables);
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
      "undeclared variable (bound variables are the context's: input, state, output, and item/index in a foreach; run)";
  }
  return `CEL evaluation failed${where}: ${message} (in ${quote(source)})`;
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
