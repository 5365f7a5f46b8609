/**
 * The engine's one Handlebars renderer: http `url_template` / `headers` / `body_template`,
 * prompt messages, shell `command_template`, human gate prompts and `{ "template": … }`
 * mapping sources all render through here.
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
 * - helpers live in a `Map` in this module: data cannot add, replace or reach them, and a
 *   call with arguments must name a known helper, so `{{constructor.constructor "…"}}` or
 *   `{{this.push …}}` is rejected when the template is compiled;
 * - templates never write anything: nothing can pollute a prototype.
 *
 * Supported: mustaches with paths (`a.b`, `a/b`, `this`, `.`, `../x`, `[weird key]`,
 * `@root`, `@index`, `@key`, `@first`, `@last`, `@../index`, and `run.…`: the reserved
 * `run` variable of `run-scope.ts` at any depth, unless a block param is named `run`), `{{{raw}}}` / `{{&raw}}`,
 * sub-expressions, hash arguments, string/number/boolean/null/undefined literals, blocks
 * `#if` / `#unless` (hash `includeZero=true`), `#each` (arrays and objects, `else` when
 * empty), `#with` (with `else`), block params (`as |item i|` on `#each`, `as |x|` on
 * `#with`), `else if` / `else each` … chains, `{{^inverted}}` sections, Mustache-style
 * sections `{{#path}}…{{/path}}` (Handlebars' `blockHelperMissing`), comparison helpers as
 * blocks (`{{#eq a b}}…{{else}}…{{/eq}}`), whitespace control `{{~ ~}}`, standalone-line
 * stripping, comments, raw blocks `{{{{raw}}}}…{{{{/raw}}}}` (content emitted verbatim,
 * whatever the block's name), partials `{{> name}}` / `{{> name ctx key=value}}` from
 * {@link RenderOptions.partials} with standalone indentation, inline partials
 * `{{#*inline "name"}}…{{/inline}}`, and (unlike Handlebars) a mustache followed by `}`:
 * `{"a": {{json a}}}` is `{{json a}}` and the text `}` (`standInForBraces`).
 *
 * Rejected at compile time (`template.invalid`): unknown helpers, calls whose callee is
 * not a helper, wrong helper arity or unknown hash keys, decorators other than `inline`,
 * partial blocks `{{#> name}}` and `@partial-block`, dynamic partials `{{> (expr)}}`,
 * hash literals `{{key=value}}`, block params on anything but `#each` / `#with`.
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
 * raw; `html` escapes `{{x}}` as Handlebars does (`& < > " ' \` =`); `url` applies
 * `encodeURIComponent` to `{{x}}`, for URL templates. `{{{x}}}` is always raw.
 */

import { setBounded } from "../bounded-cache.ts";
import { type AST, parse } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { CompiledKind, compileInScope, evaluationAllowance, WORK_UNITS_PER_TEMPLATE_STEP } from "./work-budget.ts";
import {
  MAX_TEMPLATE_NESTING_DEPTH,
  MAX_TEMPLATE_RENDER_STEPS,
  MAX_TEMPLATE_SOURCE,
  type RenderOptions,
  type Template,
  TEMPLATE_CACHE_LIMIT,
  type TemplateCompileResult,
} from "./template-types.ts";
import { describeParseError, measureNesting, restoreBraces, standInForBraces } from "./template-parse.ts";
import { TemplateProblem } from "./template-ast.ts";
import { type PartialProgram, type RenderState, type Scope, scopeExceeded } from "./template-scope.ts";
import { checkProgram } from "./template-check.ts";
import { renderProgram } from "./template-render.ts";
import { currentRunVariables } from "./run-scope.ts";

export type {
  RenderOptions,
  Template,
  TemplateCompileErrorCode,
  TemplateCompileResult,
  TemplateEscape,
} from "./template-types.ts";
export {
  MAX_PARTIAL_DEPTH,
  MAX_TEMPLATE_NESTING_DEPTH,
  MAX_TEMPLATE_OUTPUT,
  MAX_TEMPLATE_RENDER_STEPS,
  MAX_TEMPLATE_SOURCE,
  TEMPLATE_CACHE_LIMIT,
  TEMPLATE_CHARS_PER_RENDER_STEP,
} from "./template-types.ts";

/**
 * Parses and checks `source` once (cached), for registration-time validation: a template
 * that does not parse, calls an unknown helper or uses an unsupported feature is rejected
 * with a message that names the line.
 */
export function compileTemplate(source: string): TemplateCompileResult {
  if (typeof source !== "string") {
    return { ok: false, message: "a template must be a string", code: "template.invalid" };
  }
  const cached = cacheGet(source);
  if (cached !== undefined) {
    return cached;
  }
  const result = compileUncached(source);
  cacheSet(source, result);
  return result;
}

/** Compiles without the cache; failures are cached too, so a costly refusal is paid once. */
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
  try {
    checkProgram(program, []);
  } catch (thrown) {
    if (thrown instanceof TemplateProblem) {
      return { ok: false, message: thrown.message, code: "template.invalid" };
    }
    if (thrown instanceof RangeError) {
      return { ok: false, message: "template is nested too deeply", code: "template.too_deep" };
    }
    throw thrown;
  }
  return { ok: true, template: new CompiledTemplate(source, program) };
}

/**
 * Renders `source` over `data` (the template is parsed once per isolate and cached).
 *
 * @throws EngineError `template.invalid` when the template does not compile,
 *   `template.too_deep` when it nests deeper than {@link MAX_TEMPLATE_NESTING_DEPTH},
 *   `template.render_failed` when rendering fails (missing partial, cyclic data in `json`,
 *   output too large), `template.budget_exceeded` past {@link MAX_TEMPLATE_RENDER_STEPS}.
 */
export function renderTemplate(source: string, data: unknown, options?: RenderOptions): string {
  return compileOrThrow(source).render(data, options);
}

// ───────────────────────────── compiled templates and cache ─────────────────────────────

class CompiledTemplate implements Template {
  readonly source: string;
  readonly program: AST.Program;

  constructor(source: string, program: AST.Program) {
    this.source = source;
    this.program = program;
  }

  render(data: unknown, options: RenderOptions = {}): string {
    const allowance = evaluationAllowance(MAX_TEMPLATE_RENDER_STEPS, 1 / WORK_UNITS_PER_TEMPLATE_STEP, scopeExceeded);
    const state: RenderState = {
      steps: 0,
      limit: allowance.limit,
      scopeReason: allowance.scopeReason,
      root: data,
      run: currentRunVariables(),
      escape: options.escape ?? "none",
      partials: options.partials,
      substitute: options.substitute,
      strict: options.strict ?? false,
      compilePartial,
    };
    const scope: Scope = {
      context: { value: data, parent: undefined },
      data: { values: new Map(), parent: undefined },
      params: undefined,
      inline: undefined,
      partialDepth: 0,
      state,
    };
    try {
      return renderProgram(this.program, scope);
    } catch (thrown) {
      if (thrown instanceof EngineError) {
        throw thrown;
      }
      const reason = thrown instanceof RangeError ? "data or partials are nested too deeply" : errorText(thrown);
      throw new EngineError("template.render_failed", `template rendering failed: ${reason}`, { cause: thrown });
    } finally {
      allowance.settle(state.steps);
    }
  }
}

/** Templates a work-budget scope compiled (`work-budget.ts`): each source is charged once per scope. */
const TEMPLATE_PROGRAMS = new CompiledKind<TemplateCompileResult>("template");

const cache = new Map<string, TemplateCompileResult>();

function cacheGet(source: string): TemplateCompileResult | undefined {
  const hit = cache.get(source);
  if (hit !== undefined) {
    cache.delete(source);
    cache.set(source, hit);
  }
  return hit;
}

function cacheSet(source: string, result: TemplateCompileResult): void {
  setBounded(cache, source, result, TEMPLATE_CACHE_LIMIT);
}

function compileOrThrow(source: string): CompiledTemplate {
  const compiled = compileInScope(TEMPLATE_PROGRAMS, source, compileTemplate);
  if (!compiled.ok) {
    throw new EngineError(compiled.code, compiled.message);
  }
  // Every Template handed out by compileTemplate is a CompiledTemplate.
  return compiled.template as CompiledTemplate;
}

/** A partial's program, compiled as any template (in the scope's cache, charged once per scope). */
export function compilePartial(source: string): PartialProgram {
  const compiled = compileInScope(TEMPLATE_PROGRAMS, source, compileTemplate);
  // Every Template handed out by compileTemplate is a CompiledTemplate.
  return compiled.ok ? { ok: true, program: (compiled.template as CompiledTemplate).program } : compiled;
}

function errorText(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}
