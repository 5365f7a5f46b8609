/**
 * The engine's one Handlebars renderer: http `url_template` / `headers` / `body_template`,
 * prompt messages, shell `command_template` / `working_dir` / `env`, human gate prompts,
 * vector `query_template` / `text_template` and `{ "template": … }` mapping sources all
 * render through here. No caller supplies partials, so the language has none.
 *
 * Why not `handlebars` itself: its `compile` generates JavaScript (`new Function`), which
 * production workerd forbids. This is an interpreter over the official parser's AST
 * (`@handlebars/parser`), so nothing here generates code. Because every feature is
 * implemented here, the language is a deliberate subset, checked when a template is
 * compiled (at definition registration) rather than discovered at run time.
 *
 * Security (templates come from definitions, data from run inputs, so neither is trusted):
 * - a path segment resolves only an **own data property** of a plain object or an array
 *   (`Object.getOwnPropertyDescriptor`, never a getter), so `constructor`, `__proto__`,
 *   `prototype`, `__defineGetter__`, `toString`… resolve to `undefined`; the segment
 *   `__proto__` is refused even when it is an own key (as `JSON.parse` makes it);
 * - `lookup`, `#each` and `#with` obey the same rule; functions found in data resolve to
 *   `undefined` and are never called (nor is `toJSON`: JSON output is built from a copy);
 * - helpers live in a `Map` (`HELPERS` in `template-render.ts`): data cannot add, replace
 *   or reach them, and a call with arguments must name a known helper, so
 *   `{{constructor.constructor "…"}}` or `{{this.push …}}` is rejected when the template
 *   is compiled;
 * - templates never write anything: nothing can pollute a prototype.
 *
 * Supported: mustaches with paths (`a.b`, `a/b`, `this`, `.`, `../x`, `[weird key]`,
 * `@root`, `@index`, `@key`, `@first`, `@last`, `@../index`, and `run.…`: the reserved
 * `run` variable of `run-scope.ts` at any depth, unless a block param is named `run`),
 * `{{{raw}}}` / `{{&raw}}`, sub-expressions, hash arguments of helpers,
 * string/number/boolean/null/undefined literals, blocks `#if` / `#unless` (hash
 * `includeZero=true`), `#each` (arrays and objects, `else` when empty), `#with` (with
 * `else`), block params (`as |item i|` on `#each`, `as |x|` on `#with`), `else if` /
 * `else each` … chains, `{{^inverted}}` sections, Mustache-style sections
 * `{{#path}}…{{/path}}` (Handlebars' `blockHelperMissing`), comparison helpers as blocks
 * (`{{#eq a b}}…{{else}}…{{/eq}}`), whitespace control `{{~ ~}}`, standalone-line
 * stripping, comments, raw blocks `{{{{raw}}}}…{{{{/raw}}}}` (content emitted verbatim,
 * whatever the block's name), and (unlike Handlebars) a mustache followed by `}`:
 * `{"a": {{json a}}}` is `{{json a}}` and the text `}` (`standInForBraces`).
 *
 * Rejected at compile time (`template.invalid`, "… not supported"): partials in every
 * form (`{{> name}}`, `{{> (expr)}}`, `{{#> name}}…{{/name}}`, `@partial-block`: no
 * definition field can supply one), decorators (`{{*name}}`, `{{#*name}}`, inline partials
 * `{{#*inline "name"}}` among them), hash literals `{{key=value}}`; unknown helpers, calls
 * whose callee is not a helper, wrong helper arity or unknown hash keys, block params on
 * anything but `#each` / `#with`.
 *
 * Helpers (a helper is called only when it has arguments, or in a sub-expression or block;
 * a bare `{{name}}` always reads data, so a field called `length` or `json` is safe — a
 * deliberate difference from Handlebars, where helpers shadow data):
 *
 * | helper | arguments | result |
 * |---|---|---|
 * | `if` / `unless` | block, 1 value, hash `includeZero` | Handlebars truthiness: `false`, `null`, `undefined`, `""`, `0`, `[]` are falsy |
 * | `each` | block, 1 array or object | body per item (`this`, `@index`, `@key`, `@first`, `@last`); `else` when empty |
 * | `with` | block, 1 value | body with `this` = value; `else` when empty |
 * | `lookup` | object, key | own property of the object (same rule as paths) |
 * | `log` | anything | nothing (a no-op kept for compatibility) |
 * | `json` | value, indent? | `JSON.stringify` of a safe copy; `undefined` → `null` |
 * | `eq` / `ne` | a, b | strict `===` / `!==` |
 * | `lt` / `gt` / `lte` / `gte` | a, b | comparison when both are numbers or both strings, else `false` |
 * | `and` / `or` | 1+ values | boolean: all / any truthy |
 * | `not` | value | boolean: not truthy |
 * | `default` | value, fallback… | first argument that is not `null`, `undefined` or `""` |
 * | `concat` | values… | the rendered values joined with nothing |
 * | `lowercase` / `uppercase` / `trim` | value | the rendered value transformed |
 * | `join` | array, separator? | rendered items joined by the separator (default `", "`) |
 * | `length` | value | array or string length, object key count, else `0` |
 * | `urlencode` | value | `encodeURIComponent` of the rendered value (not encoded again in `url` mode) |
 *
 * Strict renderings ({@link RenderOptions.strict}) refuse a path that selects nothing, both
 * as `{{path}}` and as an argument of a helper that renders it (`{{json path}}`); helpers
 * that test a value (`default`, predicates, blocks) take an absent one (`requirePresent`).
 *
 * Value rendering: strings as-is; numbers, booleans, bigints via `String`; `null`,
 * `undefined`, functions and symbols as nothing; arrays comma-joined as Handlebars does
 * (items rendered by these rules); objects as their JSON (a deliberate difference:
 * Handlebars prints `[object Object]`, which helps nobody). Paths do not read properties of
 * strings: `{{name.length}}` is empty, use `{{length name}}`.
 *
 * Escaping ({@link RenderOptions.escape}): `none` (default) leaves `{{x}}` and `{{{x}}}`
 * raw; `url` applies `encodeURIComponent` to `{{x}}`, for URL templates. `{{{x}}}` is
 * always raw.
 */

import { setBounded } from "../bounded-cache.ts";
import { type AST, parse } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { CompiledKind, compileInScope } from "./work-budget.ts";
import { describeParseError, measureNesting, restoreBraces, standInForBraces } from "./template-parse.ts";
import { compileProgram, type RenderOptions, type RenderProgram, TemplateProblem } from "./template-render.ts";

export type { RenderOptions } from "./template-render.ts";
export { MAX_TEMPLATE_OUTPUT, MAX_TEMPLATE_RENDER_STEPS, TEMPLATE_CHARS_PER_RENDER_STEP } from "./template-render.ts";

/** A parsed and checked template; rendering it never re-parses. */
export interface Template {
  readonly source: string;
  /**
   * @throws EngineError `template.render_failed`, `template.unresolved` (strict),
   *   `template.budget_exceeded` past {@link MAX_TEMPLATE_RENDER_STEPS},
   *   `expr.budget_exceeded` past what its work-budget scope has left (`work-budget.ts`).
   */
  render(data: unknown, options?: RenderOptions): string;
}

/**
 * Outcome of {@link compileTemplate}: registration rejects a definition with `message`;
 * `code` is what rendering the template fails with (`template.too_deep` past
 * {@link MAX_TEMPLATE_NESTING_DEPTH}, else `template.invalid`).
 */
export type TemplateCompileResult =
  { ok: true; template: Template } | { ok: false; message: string; code: "template.invalid" | "template.too_deep" };

/** How many compiled templates an isolate keeps (least recently used are dropped). */
export const TEMPLATE_CACHE_LIMIT = 500;

/** Longest accepted template source, in UTF-16 code units. */
export const MAX_TEMPLATE_SOURCE = 1_000_000;

/**
 * Deepest nesting a template may have, counting open blocks (`{{#…}}`, `{{^…}}`), each
 * chained `{{else if …}}` inside them, and sub-expression parentheses inside one mustache.
 * Checked by a linear scan before parsing: `@handlebars/parser` takes time superlinear in
 * nesting (4,000 nested `{{#if}}` in 64 KB: 3–6 s, then a stack overflow).
 */
export const MAX_TEMPLATE_NESTING_DEPTH = 64;

/**
 * Parses and checks `source` once (cached), for registration-time validation: a template
 * that does not parse, calls an unknown helper or uses an unsupported feature is rejected
 * with a message that names the line.
 */
export function compileTemplate(source: string): TemplateCompileResult {
  if (typeof source !== "string") {
    return { ok: false, message: "a template must be a string", code: "template.invalid" };
  }
  const cached = cache.get(source);
  if (cached !== undefined) {
    cache.delete(source); // re-inserted: most recently used
    cache.set(source, cached);
    return cached;
  }
  const result = compileUncached(source);
  setBounded(cache, source, result, TEMPLATE_CACHE_LIMIT);
  return result;
}

/** Compiled templates by source, least recently used first; failures are cached too, so a costly refusal is paid once. */
const cache = new Map<string, TemplateCompileResult>();

function compileUncached(source: string): TemplateCompileResult {
  if (source.length > MAX_TEMPLATE_SOURCE) {
    return {
      ok: false,
      message: `template is too large (${source.length} characters, at most ${MAX_TEMPLATE_SOURCE})`,
      code: "template.invalid",
    };
  }
  const text = standInForBraces(source);
  const depth = measureNesting(text, MAX_TEMPLATE_NESTING_DEPTH);
  if (depth > MAX_TEMPLATE_NESTING_DEPTH) {
    return {
      ok: false,
      message: `template nests deeper than ${MAX_TEMPLATE_NESTING_DEPTH} (open blocks, chained else sections and sub-expressions count)`,
      code: "template.too_deep",
    };
  }
  let program: AST.Program;
  try {
    program = parse(text);
  } catch (thrown) {
    return { ok: false, message: describeParseError(thrown), code: "template.invalid" };
  }
  if (text !== source) {
    restoreBraces(program);
  }
  let render: RenderProgram;
  try {
    render = compileProgram(program);
  } catch (thrown) {
    if (thrown instanceof TemplateProblem) {
      return { ok: false, message: thrown.message, code: "template.invalid" };
    }
    if (thrown instanceof RangeError) {
      return { ok: false, message: "template is nested too deeply", code: "template.too_deep" };
    }
    throw thrown;
  }
  return { ok: true, template: { source, render } };
}

/** Templates a work-budget scope compiled (`work-budget.ts`): each source is charged once per scope. */
const TEMPLATE_PROGRAMS = new CompiledKind<TemplateCompileResult>("template");

/**
 * Renders `source` over `data` (the template is parsed once per isolate and cached).
 *
 * @throws EngineError `template.invalid` when the template does not compile,
 *   `template.too_deep` when it nests deeper than {@link MAX_TEMPLATE_NESTING_DEPTH},
 *   `template.render_failed` when rendering fails (cyclic data in `json`, output too
 *   large), `template.unresolved` (strict), `template.budget_exceeded` past
 *   {@link MAX_TEMPLATE_RENDER_STEPS}.
 */
export function renderTemplate(source: string, data: unknown, options?: RenderOptions): string {
  const compiled = compileInScope(TEMPLATE_PROGRAMS, source, compileTemplate);
  if (!compiled.ok) {
    throw new EngineError(compiled.code, compiled.message);
  }
  return compiled.template.render(data, options);
}
