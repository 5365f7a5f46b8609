/**
 * JSONPath (RFC 9535) for mapping sources (`"$.input.user.name"`), on `json-p3`: a
 * hand-written lexer/parser and interpreter that passes the whole JSONPath Compliance
 * Test Suite and generates no code (filters are evaluated as trees).
 *
 * `match()` and `search()` are replaced: json-p3's run the backtracking `RegExp`, where
 * `(a|aa)+` against 41 characters takes seconds and the pattern may come from run input.
 * Ours run I-Regexp on RE2, which never backtracks (`regex.ts`). A pattern written as a string
 * literal in the path is checked when the path is compiled, so a definition with a
 * literal that is not valid I-Regexp (or is over the size limits) is refused at
 * registration; a pattern that comes from data and is not I-Regexp makes the function
 * false, as RFC 9535 says, and one over the size limits fails the evaluation with
 * `expr.budget_exceeded`.
 *
 * ## Budget
 *
 * One {@link selectJsonPath} call may take {@link MAX_JSONPATH_STEPS} steps
 * (`expr.budget_exceeded` past it): a regex match or compile costs
 * {@link JSONPATH_STEPS_PER_REGEX_WORK} per work unit of `regex.ts` (input characters ×
 * program instructions; compiles once per pattern in a call), and every node a selector returns or a filter tests, and every
 * node `..` visits, is {@link JSONPATH_STEPS_PER_NODE}. Nodes are counted because a query
 * nested in a filter runs once per candidate: `$.a[?count($..*) > 0]` over 10,000 numbers
 * visits 10^8 nodes (37 s in workerd). json-p3 offers no hook for it, so each compiled
 * query's selectors and descendant segments are wrapped where they are created
 * ({@link meterQuery}), checked when this module loads.
 *
 * The engine's rule on top of RFC 9535 node lists: a *singular query* — one that can
 * select at most one node because it has only name and index segments (`$.a`,
 * `$['a'][0]`, `$`) — yields that node's value or is absent; any other query
 * (wildcards, slices, filters, unions, descendants) yields the array of every match,
 * possibly empty, so its shape does not depend on how many nodes happened to match.
 *
 * Selected values are the document's own values, not copies: callers must not mutate
 * them.
 */
import { setBounded } from "../bounded-cache.ts";
import {
  FunctionExpressionType,
  JSONPathEnvironment,
  JSONPathError,
  JSONPathTypeError,
  jsonpath,
  type FilterFunction,
  type JSONPathNode,
  type JSONPathQuery,
  type JSONValue,
  type Token,
} from "json-p3";
import { EngineError } from "../errors.ts";
import { matchWork } from "./regex.ts";
import { compileIRegexp, type RegexCompileResult } from "./regex-syntax.ts";
import {
  CompiledKind,
  compileInScope,
  evaluationAllowance,
  JSONPATH_STEPS_PER_WORK_UNIT,
  StepMeter,
} from "./work-budget.ts";

/** Outcome of a registration-time check: definitions with bad paths are rejected, not run. */
export type JsonPathCompileResult = { ok: true } | { ok: false; message: string };

/** A selection: `found: false` only for a singular query whose node does not exist. */
export type JsonPathSelection = { found: true; value: unknown } | { found: false };

type Compiled = { ok: true; query: JSONPathQuery; singular: boolean } | { ok: false; message: string };

const CACHE_LIMIT = 500;

/** Steps one {@link selectJsonPath} call may take: regex matches and compiles, and visited nodes (see the top). */
export const MAX_JSONPATH_STEPS = 10_000_000;

/**
 * Steps a node costs when a selector returns it, a filter tests it or `..` visits it:
 * json-p3 allocates a node and copies its location for each (0.2–0.6 µs in workerd, ten
 * to twenty steps' worth).
 */
export const JSONPATH_STEPS_PER_NODE = 10;

/**
 * Steps per regex work unit (`regex.ts`: a match is charged input characters × program
 * instructions up front, compiling by its program): RE2 measured up to 80 ns a unit at
 * worst in Node 22, seven steps at the 12 ns a step the budget assumes.
 */
export const JSONPATH_STEPS_PER_REGEX_WORK = 7;

/** The steps of one {@link selectJsonPath} call, and the patterns it has compiled (each charged once). */
class SelectionMeter extends StepMeter {
  readonly #regexes = new Map<string, RegexCompileResult>();

  /** `pattern`, compiled and charged the first time this selection meets it, cached or not. */
  regex(pattern: string): RegexCompileResult {
    let compiled = this.#regexes.get(pattern);
    if (compiled === undefined) {
      compiled = compileIRegexp(pattern, (work) => this.charge(work * JSONPATH_STEPS_PER_REGEX_WORK));
      this.#regexes.set(pattern, compiled);
    }
    return compiled;
  }
}

/** The meter of the {@link selectJsonPath} call running now (evaluation is synchronous: set and restored around it). */
let activeMeter: SelectionMeter | undefined;

/** RFC 9535 `match()` (whole string) and `search()` (any substring), I-Regexp on RE2 (`regex.ts`). */
class RegexFunction implements FilterFunction {
  readonly argTypes = [FunctionExpressionType.ValueType, FunctionExpressionType.ValueType];
  readonly returnType = FunctionExpressionType.LogicalType;
  readonly whole: boolean;

  constructor(whole: boolean) {
    this.whole = whole;
  }

  call(value: unknown, pattern: unknown): boolean {
    if (typeof value !== "string" || typeof pattern !== "string") {
      return false;
    }
    const meter =
      activeMeter ??
      new SelectionMeter(MAX_JSONPATH_STEPS, `JSONPath selection exceeded its budget of ${MAX_JSONPATH_STEPS} steps`);
    const compiled = meter.regex(pattern);
    if (!compiled.ok) {
      if (compiled.reason === "too_large") {
        throw new EngineError(
          "expr.budget_exceeded",
          `JSONPath ${this.whole ? "match" : "search"}(): ${compiled.message}`,
        );
      }
      return false;
    }
    const { regex } = compiled;
    meter.charge(matchWork(regex, value) * JSONPATH_STEPS_PER_REGEX_WORK);
    return this.whole ? regex.regex.testExact(value) : regex.regex.test(value);
  }
}

/**
 * Strict RFC 9535: json-p3's non-standard extensions (keys selector `~`, `#`) stay off.
 * `..` may descend as deep as a journaled value may nest (128, `MAX_CANONICAL_DEPTH`;
 * json-p3's default of 50 failed on run input within the API's 64-level body limit).
 * `match()`/`search()` are the I-Regexp functions above, and their literal patterns are
 * checked when a path compiles.
 */
class EngineJsonPathEnvironment extends JSONPathEnvironment {
  constructor() {
    super({ strict: true, maxRecursionDepth: 128 });
  }

  protected override setupFilterFunctions(): void {
    super.setupFilterFunctions();
    this.functionRegister.set("match", new RegexFunction(true));
    this.functionRegister.set("search", new RegexFunction(false));
  }

  override checkWellTypedness(
    token: Token,
    args: Parameters<JSONPathEnvironment["checkWellTypedness"]>[1],
  ): ReturnType<JSONPathEnvironment["checkWellTypedness"]> {
    const checked = super.checkWellTypedness(token, args);
    const pattern = args[1];
    if (
      (token.value === "match" || token.value === "search") &&
      pattern instanceof jsonpath.expressions.StringLiteral
    ) {
      const compiled = compileIRegexp(pattern.value);
      if (!compiled.ok) {
        throw new JSONPathTypeError(
          `${token.value}() pattern ${JSON.stringify(pattern.value)}: ${compiled.message}`,
          token,
        );
      }
    }
    return checked;
  }
}

/** A new environment with the engine's rules (above); exported for the compliance tests. */
export function createJsonPathEnvironment(): JSONPathEnvironment {
  return new EngineJsonPathEnvironment();
}

const environment = createJsonPathEnvironment();

const cache = new Map<string, Compiled>();

/** Paths a work-budget scope compiled (`work-budget.ts`): each is charged once per scope. */
const JSONPATH_PROGRAMS = new CompiledKind<Compiled>("jsonpath");

/** Parses `path` once, for definition registration; reuses the per-isolate cache. */
export function compileJsonPath(path: string): JsonPathCompileResult {
  const compiled = compile(path);
  return compiled.ok ? { ok: true } : { ok: false, message: compiled.message };
}

/**
 * Applies `path` to `doc` with the engine's singular/non-singular rule (see the top of
 * this file).
 *
 * @throws EngineError `expr.invalid` for a path that does not parse,
 *   `expr.eval_failed` when evaluation fails (e.g. the descendant-depth limit),
 *   `expr.budget_exceeded` when it takes more than {@link MAX_JSONPATH_STEPS} steps, or
 *   more than its work-budget scope has left (`work-budget.ts`).
 */
export function selectJsonPath(path: string, doc: unknown): JsonPathSelection {
  const compiled = compileInScope(JSONPATH_PROGRAMS, path, compile);
  if (!compiled.ok) {
    throw new EngineError("expr.invalid", compiled.message);
  }
  const exceeded = (reason: string) => `JSONPath selection ${reason} (in ${quote(path)})`;
  const allowance = evaluationAllowance(
    MAX_JSONPATH_STEPS,
    JSONPATH_STEPS_PER_WORK_UNIT,
    (reason) => new EngineError("expr.budget_exceeded", exceeded(reason)),
  );
  const meter = new SelectionMeter(
    allowance.limit,
    exceeded(
      allowance.scopeReason ??
        `exceeded its budget of ${MAX_JSONPATH_STEPS} steps (regular expression matches and compiles, visited nodes)`,
    ),
  );
  let values: JSONValue[];
  const outer = activeMeter;
  activeMeter = meter;
  try {
    values = compiled.query.query(doc as JSONValue).values();
  } catch (thrown) {
    if (thrown instanceof EngineError) {
      throw thrown;
    }
    throw new EngineError(
      "expr.eval_failed",
      `JSONPath evaluation failed for ${quote(path)}: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
      { cause: thrown },
    );
  } finally {
    activeMeter = outer;
    allowance.settle(meter.spent);
  }
  if (!compiled.singular) {
    return { found: true, value: values };
  }
  const [first] = values;
  return values.length === 0 || first === undefined ? { found: false } : { found: true, value: first };
}

function compile(path: string): Compiled {
  const hit = cache.get(path);
  if (hit !== undefined) {
    cache.delete(path);
    cache.set(path, hit);
    return hit;
  }
  let compiled: Compiled;
  try {
    const query = environment.compile(path);
    meterQuery(query);
    compiled = { ok: true, query, singular: query.singularQuery() };
  } catch (thrown) {
    compiled = { ok: false, message: invalidMessage(path, thrown) };
  }
  setBounded(cache, path, compiled, CACHE_LIMIT);
  return compiled;
}

// ───────────────────────────── node metering ─────────────────────────────

const { FilterSelector } = jsonpath.selectors;
const { FilterExpression } = jsonpath.expressions;
type JSONPathSegment = InstanceType<typeof jsonpath.JSONPathSegment>;
type JSONPathSelector = InstanceType<typeof jsonpath.JSONPathSelector>;

/** A descendant segment (`..`): json-p3 walks the subtree by a generator method that calls itself through `this`. */
interface VisitingSegment {
  visit: (node: JSONPathNode, depth?: number) => Generator<JSONPathNode>;
}

function isVisiting(segment: object): segment is VisitingSegment {
  return typeof (segment as Partial<VisitingSegment>).visit === "function";
}

/**
 * Charges the active meter for every node `query` touches: each selector is wrapped to
 * charge the nodes it returns (a filter also the candidates it tests, before testing
 * them), and each descendant segment's `visit` to charge each node it walks. Queries
 * nested in filters are wrapped too. A compiled query is wrapped once, when compiled.
 */
function meterQuery(query: JSONPathQuery): void {
  const seen = new Set<object>();
  const stack: unknown[] = [query];
  for (let value = stack.pop(); value !== undefined; value = stack.pop()) {
    if (typeof value !== "object" || value === null || seen.has(value)) {
      continue;
    }
    seen.add(value);
    if (value instanceof jsonpath.JSONPathQuery) {
      stack.push(...value.segments);
    } else if (value instanceof jsonpath.JSONPathSegment) {
      meterSegment(value);
      stack.push(...value.selectors);
    } else if (value instanceof jsonpath.JSONPathSelector) {
      meterSelector(value);
      if (value instanceof FilterSelector) {
        stack.push(value.expression);
      }
    } else if (value instanceof FilterExpression) {
      // Operands, arguments and nested queries: every field but the token.
      for (const [key, child] of Object.entries(value)) {
        if (key !== "token") {
          stack.push(...(Array.isArray(child) ? (child as unknown[]) : [child]));
        }
      }
    }
  }
}

function meterSelector(selector: JSONPathSelector): void {
  const resolve = selector.resolve.bind(selector);
  const filter = selector instanceof FilterSelector;
  selector.resolve = (node: JSONPathNode): JSONPathNode[] => {
    const meter = activeMeter;
    if (meter !== undefined && filter) {
      meter.charge(childCount(node.value) * JSONPATH_STEPS_PER_NODE);
    }
    const nodes = resolve(node);
    meter?.charge((1 + nodes.length) * JSONPATH_STEPS_PER_NODE);
    return nodes;
  };
}

function meterSegment(segment: JSONPathSegment): void {
  if (!isVisiting(segment)) {
    return;
  }
  const visit = segment.visit;
  segment.visit = function* meteredVisit(
    this: VisitingSegment,
    node: JSONPathNode,
    depth?: number,
  ): Generator<JSONPathNode> {
    activeMeter?.charge(JSONPATH_STEPS_PER_NODE);
    yield* visit.call(this, node, depth);
  };
}

function childCount(value: unknown): number {
  if (Array.isArray(value)) {
    return value.length;
  }
  return typeof value === "object" && value !== null ? Object.keys(value).length : 0;
}

/**
 * Fails loudly when this module loads if the metering above no longer reaches json-p3's
 * selectors, descendant visits and nested queries (a release that renamed them).
 */
function checkMetering(): void {
  const compiled = compile("$..a[?count(@..*) > 0]");
  const meter = new SelectionMeter(MAX_JSONPATH_STEPS, "the metering check");
  activeMeter = meter;
  try {
    if (compiled.ok) {
      compiled.query.query({ a: [{ b: 1 }] });
    }
  } finally {
    activeMeter = undefined;
  }
  const nested = compiled.ok && compiled.query.segments.some(isVisiting);
  if (!nested || meter.spent < 8 * JSONPATH_STEPS_PER_NODE) {
    throw new Error(
      "json-p3 no longer has the selectors and descendant visits lib/expr/jsonpath.ts meters; JSONPath work cannot be bounded",
    );
  }
}

checkMetering();

function invalidMessage(path: string, thrown: unknown): string {
  if (thrown instanceof JSONPathError) {
    // json-p3 appends "('<excerpt>':<index>)"; the position is reported on its own.
    const message = thrown.message.replace(/\s*\('[\s\S]*':\d+\)$/, "");
    return `invalid JSONPath ${quote(path)} at position ${thrown.token.index + 1}: ${message}`;
  }
  return `invalid JSONPath ${quote(path)}: ${thrown instanceof Error ? thrown.message : String(thrown)}`;
}

function quote(text: string): string {
  return JSON.stringify(text.length > 200 ? `${text.slice(0, 200)}…` : text);
}
