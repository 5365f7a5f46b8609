// The public types and limits of templates, re-exported by `template.ts`.

/** How `{{x}}` (double-stash) output is escaped; `{{{x}}}` is never escaped. */
export type TemplateEscape = "none" | "html" | "url";

/** Per-render options. */
export interface RenderOptions {
  /** Escaping of `{{x}}`; default `none` (the engine's templates are rarely HTML). */
  escape?: TemplateEscape;
  /** Partials by name, as Handlebars sources, for `{{> name}}`. */
  partials?: Readonly<Record<string, string>>;
  /**
   * Replaces what every mustache emits, `{{x}}` and `{{{x}}}` alike (escaping is not
   * applied): it receives the rendered value and returns the text to emit. The shell
   * action uses it to keep values out of command text (see `lib/expr/shell-template.ts`).
   */
  substitute?: (text: string) => string;
  /**
   * A `{{path}}` that selects nothing, or such a path given to a helper that
   * renders it (`{{json path}}`), fails with `template.unresolved` naming
   * it, instead of rendering as nothing: for templates that build requests
   * and commands, where a typo must not reach the peer. `{{default path "…"}}`
   * (or an `{{#if}}` around it) marks a value that may be absent.
   */
  strict?: boolean;
}

/** A parsed and checked template; rendering it never re-parses. */
export interface Template {
  readonly source: string;
  /**
   * @throws EngineError `template.render_failed` (or `template.invalid` / `template.too_deep`
   *   for a bad partial), `template.budget_exceeded` past {@link MAX_TEMPLATE_RENDER_STEPS},
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
  { ok: true; template: Template } | { ok: false; message: string; code: TemplateCompileErrorCode };

/** Why a template does not compile. */
export type TemplateCompileErrorCode = "template.invalid" | "template.too_deep";

/** How many compiled templates an isolate keeps (least recently used are dropped). */
export const TEMPLATE_CACHE_LIMIT = 500;

/** Longest accepted template source, in UTF-16 code units. */
export const MAX_TEMPLATE_SOURCE = 1_000_000;

/** Longest rendered output, in UTF-16 code units: a runaway template fails instead of eating the isolate's memory. */
export const MAX_TEMPLATE_OUTPUT = 16 * 1024 * 1024;

/** Deepest nesting of partial calls (a recursive partial must end before this). */
export const MAX_PARTIAL_DEPTH = 32;

/**
 * Deepest nesting a template may have, counting open blocks (`{{#…}}`, `{{^…}}`), each
 * chained `{{else if …}}` inside them, and sub-expression parentheses inside one mustache.
 * Checked by a linear scan before parsing: `@handlebars/parser` takes time superlinear in
 * nesting (4,000 nested `{{#if}}` in 64 KB: 3–6 s, then a stack overflow).
 */
export const MAX_TEMPLATE_NESTING_DEPTH = 64;

/**
 * Most render steps one rendering may take: a step is a statement rendered, an `#each`
 * iteration, a helper or partial call, and a further step per
 * {@link TEMPLATE_CHARS_PER_RENDER_STEP} characters a helper returns. Nested `#each` over
 * a few thousand items would otherwise run millions of iterations within the output cap.
 */
export const MAX_TEMPLATE_RENDER_STEPS = 1_000_000;

/** Characters of a helper's result (`json`, `join`, `concat`, …) counted as one render step. */
export const TEMPLATE_CHARS_PER_RENDER_STEP = 20;
