/**
 * JSONPath (RFC 9535) for mapping sources (`"$.input.user.name"`), on `json-p3`: a
 * hand-written lexer/parser and interpreter that passes the whole JSONPath Compliance
 * Test Suite and generates no code (filters are evaluated as trees).
 *
 * `match()` and `search()` are replaced: json-p3's run the backtracking `RegExp`, where
 * `(a|aa)+` against 41 characters takes seconds and the pattern may come from run input.
 * Ours run I-Regexp on the linear-time VM of `iregexp.ts`, and every regex step of one
 * {@link selectJsonPath} call is charged to one budget of {@link MAX_JSONPATH_REGEX_STEPS}
 * (`expr.budget_exceeded` past it). A pattern written as a string literal in the path is
 * checked when the path is compiled, so a definition with a literal that is not valid
 * I-Regexp (or is over the size limits) is refused at registration; a pattern that comes
 * from data and is not I-Regexp makes the function false, as RFC 9535 says, and one over
 * the size limits fails the evaluation with `expr.budget_exceeded`.
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
import {
  FunctionExpressionType,
  JSONPathEnvironment,
  JSONPathError,
  JSONPathTypeError,
  jsonpath,
  type FilterFunction,
  type JSONPathQuery,
  type JSONValue,
  type Token,
} from "json-p3";
import { EngineError } from "../errors.ts";
import { RegexBudget, compileIRegexp, type IRegexpCompileResult } from "./iregexp.ts";

/** Outcome of a registration-time check: definitions with bad paths are rejected, not run. */
export type JsonPathCompileResult = { ok: true } | { ok: false; message: string };

/** A selection: `found: false` only for a singular query whose node does not exist. */
export type JsonPathSelection = { found: true; value: unknown } | { found: false };

type Compiled = { ok: true; query: JSONPathQuery; singular: boolean } | { ok: false; message: string };

const CACHE_LIMIT = 500;

/** Regex steps (instruction visits of the I-Regexp VM) one {@link selectJsonPath} call may spend. */
export const MAX_JSONPATH_REGEX_STEPS = 10_000_000;

/** How many compiled regular expressions an isolate keeps. */
const REGEX_CACHE_LIMIT = 200;

/** The budget of the {@link selectJsonPath} call running now (evaluation is synchronous: set and restored around it). */
let activeBudget: RegexBudget | undefined;

const regexCache = new Map<string, IRegexpCompileResult>();

function compileRegex(pattern: string): IRegexpCompileResult {
  const hit = regexCache.get(pattern);
  if (hit !== undefined) {
    return hit;
  }
  const compiled = compileIRegexp(pattern);
  if (regexCache.size >= REGEX_CACHE_LIMIT) {
    const oldest = regexCache.keys().next();
    if (oldest.done !== true) {
      regexCache.delete(oldest.value);
    }
  }
  regexCache.set(pattern, compiled);
  return compiled;
}

/** RFC 9535 `match()` (whole string) and `search()` (any substring) on the linear-time I-Regexp VM. */
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
    const compiled = compileRegex(pattern);
    if (!compiled.ok) {
      if (compiled.reason === "too_large") {
        throw new EngineError("expr.budget_exceeded", `JSONPath ${this.whole ? "match" : "search"}(): ${compiled.message}`);
      }
      return false;
    }
    const budget = activeBudget ?? new RegexBudget(MAX_JSONPATH_REGEX_STEPS);
    return this.whole ? compiled.regex.matches(value, budget) : compiled.regex.search(value, budget);
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
    if ((token.value === "match" || token.value === "search") && pattern instanceof jsonpath.expressions.StringLiteral) {
      const compiled = compileRegex(pattern.value);
      if (!compiled.ok) {
        throw new JSONPathTypeError(`${token.value}() pattern ${JSON.stringify(pattern.value)}: ${compiled.message}`, token);
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
 *   `expr.budget_exceeded` when its regular expressions spend more than
 *   {@link MAX_JSONPATH_REGEX_STEPS}.
 */
export function selectJsonPath(path: string, doc: unknown): JsonPathSelection {
  const compiled = compile(path);
  if (!compiled.ok) {
    throw new EngineError("expr.invalid", compiled.message);
  }
  let values: JSONValue[];
  const outer = activeBudget;
  activeBudget = new RegexBudget(MAX_JSONPATH_REGEX_STEPS);
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
    activeBudget = outer;
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
    compiled = { ok: true, query, singular: query.singularQuery() };
  } catch (thrown) {
    compiled = { ok: false, message: invalidMessage(path, thrown) };
  }
  if (cache.size >= CACHE_LIMIT) {
    const oldest = cache.keys().next();
    if (oldest.done !== true) {
      cache.delete(oldest.value);
    }
  }
  cache.set(path, compiled);
  return compiled;
}

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
