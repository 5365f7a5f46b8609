/**
 * CEL (Common Expression Language) for conditions and `{ "expr": ... }` mappings, on
 * `@bufbuild/cel`: a tree-walking interpreter that generates no code, so it runs in
 * production workerd where `eval`/`new Function` throw.
 *
 * Variables and results are JSON (and `run` is bound inside a run scope, `run-scope.ts`);
 * the conversion rules, the `strings` extension and the mixed int/double arithmetic are in
 * docs/definitions.md ("CEL"). Objects and arrays are wrapped, not copied (`cel-values.ts`):
 * a value is converted only when the expression reaches it, so a condition over a large
 * `state` costs what it reads. A result that is (part of) an input is returned as that
 * input value itself, not a copy: callers must not mutate it.
 *
 * Every evaluation is metered (`cel-budget.ts`) and, inside a work-budget scope
 * (`work-budget.ts`), may spend no more than the scope has left, which it is charged.
 */

import { viewOf } from "./blob-scope.ts";
import { setBounded } from "../bounded-cache.ts";
import { type CelError, type CelInput, type CelValue, isCelError, parse, plan } from "@bufbuild/cel";
import type { SourceInfo } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { EngineError } from "../errors.ts";
import { CelMeter, env, MAX_CEL_COST_UNITS, withCelMeter } from "./cel-budget.ts";
import { CompiledKind, compileInScope, evaluationAllowance } from "./work-budget.ts";
import { at, findStaticProblem, instrumentComprehensions, variablesRead } from "./cel-check.ts";
import { fromCelValue, toCelValue } from "./cel-values.ts";
import { currentRunVariables, RUN_VARIABLE } from "./run-scope.ts";

/** A parsed and planned expression: the unit the cache keeps, reusable across evaluations. */
export interface CelProgram {
  /** The variables it reads: registration checks them against its context's. */
  readonly variables: readonly string[];
  /** The fields it selects on `run` (`id` in `run.id`): registration checks them against what `run` holds there. */
  readonly runFields: readonly string[];
  /** Evaluates with JSON variables and returns JSON; throws `expr.eval_failed`. */
  evaluate(vars: Record<string, unknown>): unknown;
}

/** Outcome of a registration-time check: definitions with bad CEL are rejected, not run. */
export type CelCompileResult = { ok: true; program: CelProgram } | { ok: false; message: string };

const CACHE_LIMIT = 500;

const cache = new Map<string, CelCompileResult>();

/** Programs a work-budget scope compiled (`work-budget.ts`): each source is charged once per scope. */
const CEL_PROGRAMS = new CompiledKind<CelCompileResult>("cel");

/**
 * Parses and plans `source`. Used when a definition is registered, so that CEL that
 * does not parse, calls a function that does not exist (including misused macros such
 * as `has(1)`), or has an out-of-range integer literal is rejected before any run.
 */
export function compileCel(source: string): CelCompileResult {
  const result = cache.get(source) ?? compileUncached(source);
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
  return compiled.program.evaluate(viewOf(vars) as Record<string, unknown>);
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
  const { variables, fields: runFields } = variablesRead(parsed.expr, RUN_VARIABLE);
  const nodes = instrumentComprehensions(parsed.expr);
  let run: ReturnType<typeof plan>;
  try {
    run = plan(env, parsed);
  } catch (thrown) {
    return { ok: false, message: `invalid CEL ${quote(source)}: ${errorText(thrown)}` };
  }
  const readsRun = variables.includes(RUN_VARIABLE);
  const evaluate = (vars: Record<string, unknown>): unknown => {
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
      return evaluateMetered(meter, () => run(bindings), nodes, source, parsed.sourceInfo);
    } finally {
      allowance.settle(meter.spent);
    }
  };
  return { ok: true, program: { variables, runFields, evaluate } };
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
    const message = result.message === "unresolved attribute" ? UNDECLARED : result.message;
    const where = at(result.exprId, sourceInfo);
    throw new EngineError("expr.eval_failed", `CEL evaluation failed${where}: ${message} (in ${quote(source)})`, {
      cause: result,
    });
  }
  return resultToJson(result, meter, source);
}

const UNDECLARED =
  "undeclared variable (bound variables are the context's: input, state, output, and item/index in a foreach; run)";

function syntaxMessage(source: string, thrown: unknown): string {
  type Located = { rawMessage?: unknown; location?: { start?: { line?: unknown; column?: unknown } } };
  const located = (thrown instanceof Error ? thrown : {}) as Located;
  const { line, column } = located.location?.start ?? {};
  const where = typeof line === "number" && typeof column === "number" ? ` at line ${line}, column ${column}` : "";
  const raw = typeof located.rawMessage === "string" ? located.rawMessage : errorText(thrown);
  return `CEL syntax error${where}: ${raw} (in ${quote(source)})`;
}

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

function describeJson(value: unknown): string {
  if (value === null || typeof value !== "object") {
    return value === null ? "null" : `${typeof value} ${JSON.stringify(value)}`;
  }
  return Array.isArray(value) ? "a list" : "a map";
}

/** The EngineError of an evaluation stopped by its meter (`reason`: the meter's `exceeded`). */
function budgetError(reason: string, source: string): EngineError {
  return new EngineError("expr.budget_exceeded", `CEL evaluation ${reason} (in ${quote(source)})`);
}

function errorText(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}

function quote(source: string): string {
  return JSON.stringify(source.length > 200 ? `${source.slice(0, 200)}…` : source);
}
