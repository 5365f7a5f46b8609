/**
 * The engine's one Handlebars renderer: every template field of a definition and
 * `{ "template": … }` mapping sources render through here. The language (a checked subset),
 * its helpers, value rendering, escaping, strict renderings and the deliberate differences
 * from Handlebars are listed in docs/definitions.md#templates.
 *
 * Why not `handlebars` itself: its `compile` generates JavaScript (`new Function`), which
 * production workerd forbids. This is an interpreter over the official parser's AST
 * (`@handlebars/parser`), so nothing here generates code, and every feature it does not
 * implement is refused when a template is compiled (at definition registration).
 *
 * Security (templates come from definitions, data from run inputs, so neither is trusted):
 * - a path segment, `lookup`, `#each` and `#with` read only an **own data property** of a
 *   plain object or an array (`getOwn`, never a getter), so `constructor`, `prototype`,
 *   `toString`… resolve to `undefined`; `__proto__` is refused even as an own key (as
 *   `JSON.parse` makes it); functions in data are never called (nor is `toJSON`: JSON
 *   output is built from a copy);
 * - helpers live in a `Map` (`HELPERS` in `template-render.ts`) that data cannot reach, and
 *   a call with arguments must name one, so `{{constructor.constructor "…"}}` is refused
 *   when the template is compiled;
 * - templates never write anything: nothing can pollute a prototype.
 */

import { viewOf } from "./blob-scope.ts";
import { setBounded } from "../bounded-cache.ts";
import { type AST, parse } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { CompiledKind, compileInScope } from "./work-budget.ts";
import { describeParseError, measureNesting, restoreBraces, standInForBraces } from "./template-parse.ts";
import { compileProgram, type RenderOptions, TemplateProblem } from "./template-render.ts";

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
    return refused("a template must be a string");
  }
  const cached = cache.get(source);
  const result = cached ?? compileUncached(source);
  setBounded(cache, source, result, TEMPLATE_CACHE_LIMIT); // (re-)inserted: most recently used
  return result;
}

/** Compiled templates by source, least recently used first; failures are cached too, so a costly refusal is paid once. */
const cache = new Map<string, TemplateCompileResult>();

function compileUncached(source: string): TemplateCompileResult {
  if (source.length > MAX_TEMPLATE_SOURCE) {
    return refused(`template is too large (${source.length} characters, at most ${MAX_TEMPLATE_SOURCE})`);
  }
  const text = standInForBraces(source);
  if (measureNesting(text, MAX_TEMPLATE_NESTING_DEPTH) > MAX_TEMPLATE_NESTING_DEPTH) {
    return refused(
      `template nests deeper than ${MAX_TEMPLATE_NESTING_DEPTH} (open blocks, chained else sections and sub-expressions count)`,
      "template.too_deep",
    );
  }
  let program: AST.Program;
  try {
    program = parse(text);
  } catch (thrown) {
    return refused(describeParseError(thrown));
  }
  if (text !== source) {
    restoreBraces(program);
  }
  try {
    return { ok: true, template: { source, render: compileProgram(program) } };
  } catch (thrown) {
    if (thrown instanceof TemplateProblem) {
      return refused(thrown.message);
    }
    if (thrown instanceof RangeError) {
      return refused("template is nested too deeply", "template.too_deep");
    }
    throw thrown;
  }
}

function refused(
  message: string,
  code: "template.invalid" | "template.too_deep" = "template.invalid",
): TemplateCompileResult {
  return { ok: false, message, code };
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
  return compiled.template.render(viewOf(data), options);
}
