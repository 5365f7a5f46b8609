/**
 * JSONPath (RFC 9535) for mapping sources (`"$.input.user.name"`), on `json-p3`: a
 * hand-written lexer/parser and interpreter that passes the whole JSONPath Compliance
 * Test Suite and generates no code (filters are evaluated as trees; `match()` and
 * `search()` use `RegExp`, which workerd allows).
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
import { JSONPathEnvironment, JSONPathError, type JSONPathQuery, type JSONValue } from "json-p3";
import { EngineError } from "../errors.ts";

/** Outcome of a registration-time check: definitions with bad paths are rejected, not run. */
export type JsonPathCompileResult = { ok: true } | { ok: false; message: string };

/** A selection: `found: false` only for a singular query whose node does not exist. */
export type JsonPathSelection = { found: true; value: unknown } | { found: false };

type Compiled = { ok: true; query: JSONPathQuery; singular: boolean } | { ok: false; message: string };

const CACHE_LIMIT = 500;

/**
 * Strict RFC 9535: json-p3's non-standard extensions (keys selector `~`, `#`) stay off.
 * `..` may descend as deep as a journaled value may nest (128, `MAX_CANONICAL_DEPTH`;
 * json-p3's default of 50 failed on run input within the API's 64-level body limit).
 */
const environment = new JSONPathEnvironment({ strict: true, maxRecursionDepth: 128 });

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
 *   `expr.eval_failed` when evaluation fails (e.g. the descendant-depth limit).
 */
export function selectJsonPath(path: string, doc: unknown): JsonPathSelection {
  const compiled = compile(path);
  if (!compiled.ok) {
    throw new EngineError("expr.invalid", compiled.message);
  }
  let values: JSONValue[];
  try {
    values = compiled.query.query(doc as JSONValue).values();
  } catch (thrown) {
    throw new EngineError(
      "expr.eval_failed",
      `JSONPath evaluation failed for ${quote(path)}: ${thrown instanceof Error ? thrown.message : String(thrown)}`,
      { cause: thrown },
    );
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
