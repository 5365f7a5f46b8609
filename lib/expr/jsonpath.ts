/**
 * JSONPath (RFC 9535) for mapping sources, on `json-p3`: it passes the JSONPath Compliance
 * Test Suite and generates no code. What a query yields (a singular query its node's value or
 * absent, any other the array of its matches), the I-Regexp `match()`/`search()` and the step
 * budget: docs/definitions.md ("Mappings", "Budgets"). Selected values are the document's own,
 * not copies: callers must not mutate them.
 */
import { arrayViewOf, viewOf } from "./blob-scope.ts";
import { setBounded } from "../bounded-cache.ts";
import { jsonpath, type JSONValue } from "json-p3";
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

const { FunctionExpressionType, JSONPathEnvironment, JSONPathError, JSONPathTypeError } = jsonpath;
const { FilterSelector } = jsonpath.selectors;
const { FilterExpression, StringLiteral } = jsonpath.expressions;
type FilterExpression = InstanceType<typeof FilterExpression>;
type JSONPathNode = jsonpath.JSONPathNode;
type JSONPathQuery = jsonpath.JSONPathQuery;

const CACHE_LIMIT = 500;

/** A selection: `found: false` only for a singular query whose node does not exist. */
export type JsonPathSelection = { found: true; value: unknown } | { found: false };

type Compiled = { ok: true; query: JSONPathQuery; singular: boolean } | { ok: false; message: string };

/** Steps one {@link selectJsonPath} call may take: regex matches and compiles, and visited nodes. */
export const MAX_JSONPATH_STEPS = 10_000_000;

/** Steps a node costs when a selector returns it, a filter tests it or `..` visits it (json-p3 allocates each). */
export const JSONPATH_STEPS_PER_NODE = 10;

/** Steps per unit of regex work (`regex.ts`), matching or compiling. */
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

/**
 * RFC 9535 `match()` (whole string) or `search()` (any substring), I-Regexp on RE2 (`regex.ts`):
 * a pattern from data that is not I-Regexp makes it false; one over the size limits throws.
 */
function regexFunction(name: "match" | "search"): jsonpath.FilterFunction {
  return {
    argTypes: [FunctionExpressionType.ValueType, FunctionExpressionType.ValueType],
    returnType: FunctionExpressionType.LogicalType,
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
          throw new EngineError("expr.budget_exceeded", `JSONPath ${name}(): ${compiled.message}`);
        }
        return false;
      }
      meter.charge(matchWork(compiled.regex, value) * JSONPATH_STEPS_PER_REGEX_WORK);
      return name === "match" ? compiled.regex.regex.testExact(value) : compiled.regex.regex.test(value);
    },
  };
}

/**
 * Strict RFC 9535 (json-p3's extensions `~`, `#` stay off); `..` may descend as deep as a
 * journaled value may nest (128, `MAX_CANONICAL_DEPTH`: json-p3's 50 is less than run input
 * may have); `match()`/`search()` are the functions above, their literal patterns checked
 * when a path compiles.
 */
class EngineJsonPathEnvironment extends JSONPathEnvironment {
  constructor() {
    super({ strict: true, maxRecursionDepth: 128 });
  }

  protected override setupFilterFunctions(): void {
    super.setupFilterFunctions();
    this.functionRegister.set("match", regexFunction("match"));
    this.functionRegister.set("search", regexFunction("search"));
  }

  override checkWellTypedness(token: jsonpath.Token, args: FilterExpression[]): FilterExpression[] {
    const checked = super.checkWellTypedness(token, args);
    const pattern = args[1];
    if ((token.value === "match" || token.value === "search") && pattern instanceof StringLiteral) {
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
export function createJsonPathEnvironment(): jsonpath.JSONPathEnvironment {
  return new EngineJsonPathEnvironment();
}

const environment = createJsonPathEnvironment();

const cache = new Map<string, Compiled>();

/** Paths a work-budget scope compiled (`work-budget.ts`): each is charged once per scope. */
const JSONPATH_PROGRAMS = new CompiledKind<Compiled>("jsonpath");

/** Parses `path` once, for definition registration; reuses the per-isolate cache. */
export function compileJsonPath(path: string): { ok: true } | { ok: false; message: string } {
  const compiled = compile(path);
  return compiled.ok ? { ok: true } : { ok: false, message: compiled.message };
}

/**
 * Applies `path` to `doc`: a singular query's value (or `found: false`), any other's array.
 *
 * @throws EngineError `expr.invalid` for a path that does not parse,
 *   `expr.eval_failed` when evaluation fails (e.g. the descendant-depth limit),
 *   `expr.budget_exceeded` when it takes more than {@link MAX_JSONPATH_STEPS} steps, or
 *   more than its work-budget scope has left (`work-budget.ts`).
 */
export function selectJsonPath(path: string, given: unknown): JsonPathSelection {
  const doc = viewOf(given);
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
  probeBlobArrays(compiled.query, given, allowance.limit);
  try {
    values = queryMetered(compiled.query, doc, meter);
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
    allowance.settle(meter.spent);
  }
  const [first] = values;
  return !compiled.singular
    ? { found: true, value: values }
    : first === undefined
      ? { found: false }
      : { found: true, value: first };
}

/** Tries the path over the view whose unread blobs stand as arrays (blob-scope.ts `arrayViewOf`); drops the result. */
function probeBlobArrays(query: JSONPathQuery, given: unknown, limit: number): void {
  const arrays = arrayViewOf(given);
  if (arrays === undefined) {
    return;
  }
  try {
    queryMetered(query, arrays, new SelectionMeter(limit, "a probe for the blobs a path reads"));
  } catch {
    // A blob it reached is recorded as needed; any other failure is the real evaluation's to report.
  }
}

function queryMetered(query: JSONPathQuery, doc: unknown, meter: SelectionMeter): JSONValue[] {
  const outer = activeMeter;
  activeMeter = meter;
  try {
    return query.query(doc as JSONValue).values();
  } finally {
    activeMeter = outer;
  }
}

function compile(path: string): Compiled {
  let compiled = cache.get(path);
  if (compiled === undefined) {
    try {
      const query = environment.compile(path);
      meterQuery(query);
      compiled = { ok: true, query, singular: query.singularQuery() };
    } catch (thrown) {
      compiled = { ok: false, message: invalidMessage(path, thrown) };
    }
  }
  setBounded(cache, path, compiled, CACHE_LIMIT); // also marks a hit as the newest
  return compiled;
}

/** A descendant segment (`..`): json-p3 walks the subtree by a generator method that calls itself through `this`. */
interface VisitingSegment {
  visit: (node: JSONPathNode, depth?: number) => Generator<JSONPathNode>;
}

/**
 * json-p3 has no hook for counting nodes, so each compiled query's selectors (in nested
 * queries too) are wrapped to charge the active meter for the nodes they return (a filter
 * also for the candidates it tests, before testing them), and each `..` segment's `visit`
 * for each node it walks.
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
      meterSegment(value as Partial<VisitingSegment>);
      stack.push(...value.selectors);
    } else if (value instanceof jsonpath.JSONPathSelector) {
      meterSelector(value);
      stack.push(...(value instanceof FilterSelector ? [value.expression] : []));
    } else if (value instanceof FilterExpression) {
      // Operands, arguments and nested queries: every field but the token.
      for (const [key, child] of Object.entries(value)) {
        stack.push(...(key === "token" ? [] : Array.isArray(child) ? (child as unknown[]) : [child]));
      }
    }
  }
}

function meterSelector(selector: InstanceType<typeof jsonpath.JSONPathSelector>): void {
  const resolve = selector.resolve.bind(selector);
  const filter = selector instanceof FilterSelector;
  selector.resolve = (node: JSONPathNode): JSONPathNode[] => {
    const meter = activeMeter;
    if (meter !== undefined && filter) {
      const { value } = node;
      const candidates = Array.isArray(value)
        ? value.length
        : value !== null && typeof value === "object"
          ? Object.keys(value).length
          : 0;
      meter.charge(candidates * JSONPATH_STEPS_PER_NODE);
    }
    const nodes = resolve(node);
    meter?.charge((1 + nodes.length) * JSONPATH_STEPS_PER_NODE);
    return nodes;
  };
}

function meterSegment(segment: Partial<VisitingSegment>): void {
  const visit = segment.visit;
  if (typeof visit === "function") {
    segment.visit = function* meteredVisit(this: VisitingSegment, node: JSONPathNode, depth?: number) {
      activeMeter?.charge(JSONPATH_STEPS_PER_NODE);
      yield* visit.call(this, node, depth);
    };
  }
}

/**
 * Fails when this module loads if a json-p3 release renamed what the metering above wraps: the
 * query below touches 17 nodes, 6 of them only through `visit` and 5 only in the nested query.
 */
function checkMetering(): void {
  const compiled = compile("$..a[?count(@..*) > 0]");
  const meter = new SelectionMeter(MAX_JSONPATH_STEPS, "the metering check");
  if (compiled.ok) {
    queryMetered(compiled.query, { a: [{ b: 1 }] }, meter);
  }
  if (meter.spent < 17 * JSONPATH_STEPS_PER_NODE) {
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
