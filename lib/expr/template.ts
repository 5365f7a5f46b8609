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
 * `@root`, `@index`, `@key`, `@first`, `@last`, `@../index`), `{{{raw}}}` / `{{&raw}}`,
 * sub-expressions, hash arguments, string/number/boolean/null/undefined literals, blocks
 * `#if` / `#unless` (hash `includeZero=true`), `#each` (arrays and objects, `else` when
 * empty), `#with` (with `else`), block params (`as |item i|` on `#each`, `as |x|` on
 * `#with`), `else if` / `else each` … chains, `{{^inverted}}` sections, Mustache-style
 * sections `{{#path}}…{{/path}}` (Handlebars' `blockHelperMissing`), comparison helpers as
 * blocks (`{{#eq a b}}…{{else}}…{{/eq}}`), whitespace control `{{~ ~}}`, standalone-line
 * stripping, comments, raw blocks `{{{{raw}}}}…{{{{/raw}}}}` (content emitted verbatim,
 * whatever the block's name), partials `{{> name}}` / `{{> name ctx key=value}}` from
 * {@link RenderOptions.partials} with standalone indentation, inline partials
 * `{{#*inline "name"}}…{{/inline}}`.
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
import * as handlebarsParser from "@handlebars/parser";
import { parse, type AST } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { CompiledKind, compileInScope, evaluationAllowance, WORK_UNITS_PER_TEMPLATE_STEP } from "./work-budget.ts";

// ───────────────────────────── public API ─────────────────────────────

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

/** Outcome of {@link renderJsonTemplate}. */
export type JsonTemplateResult = { json: true; value: unknown } | { json: false; text: string };

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
  const depth = measureNesting(source, MAX_TEMPLATE_NESTING_DEPTH);
  if (depth > MAX_TEMPLATE_NESTING_DEPTH) {
    return {
      ok: false,
      message: `template nests deeper than ${MAX_TEMPLATE_NESTING_DEPTH} (open blocks, chained else sections and sub-expressions count)`,
      code: "template.too_deep",
    };
  }
  let program: AST.Program;
  try {
    program = parse(source);
  } catch (thrown) {
    return { ok: false, message: describeParseError(thrown), code: "template.invalid" };
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
 * The nesting the parser would build, measured on the parser's own tokens (so raw blocks,
 * escaped mustaches, comments and string literals are read exactly as the parser reads
 * them), in one linear pass that stops once it passes `limit`: open blocks, inverted
 * sections, partial and raw blocks, plus each chained `{{else …}}` inside them, plus open
 * sub-expression parentheses and array brackets. A lexing error ends the count; the parse
 * that follows reports it.
 */
function measureNesting(source: string, limit: number): number {
  const lexer = Object.create(HANDLEBARS_LEXER) as JisonLexer;
  lexer.setInput(source, {});
  const chains: number[] = [];
  let open = 0;
  let brackets = 0;
  let deepest = 0;
  try {
    for (let token = lexer.lex(); token !== TOKENS.EOF && deepest <= limit; token = lexer.lex()) {
      if (
        token === TOKENS.OPEN_BLOCK ||
        token === TOKENS.OPEN_INVERSE ||
        token === TOKENS.OPEN_PARTIAL_BLOCK ||
        token === TOKENS.OPEN_RAW_BLOCK
      ) {
        chains.push(0);
        open += 1;
      } else if (token === TOKENS.OPEN_INVERSE_CHAIN) {
        chains.push((chains.pop() ?? 0) + 1);
        open += 1;
      } else if (token === TOKENS.OPEN_ENDBLOCK || token === TOKENS.END_RAW_BLOCK) {
        open = Math.max(0, open - 1 - (chains.pop() ?? 0));
      } else if (token === TOKENS.OPEN_SEXPR || token === TOKENS.OPEN_ARRAY) {
        brackets += 1;
      } else if (token === TOKENS.CLOSE_SEXPR || token === TOKENS.CLOSE_ARRAY) {
        brackets = Math.max(0, brackets - 1);
      }
      deepest = Math.max(deepest, open + brackets);
    }
  } catch {
    // A lexing error: the parse reports it with its position.
  }
  return deepest;
}

/** The jison lexer of `@handlebars/parser`: exported at run time as `parser.lexer`, absent from its typings. */
interface JisonLexer {
  setInput(input: string, yy: object): unknown;
  lex(): unknown;
}

const TOKEN_NAMES = [
  "EOF",
  "OPEN_BLOCK",
  "OPEN_INVERSE",
  "OPEN_INVERSE_CHAIN",
  "OPEN_PARTIAL_BLOCK",
  "OPEN_RAW_BLOCK",
  "END_RAW_BLOCK",
  "OPEN_ENDBLOCK",
  "OPEN_SEXPR",
  "CLOSE_SEXPR",
  "OPEN_ARRAY",
  "CLOSE_ARRAY",
] as const;

/** Checked when this module loads: a parser release that moves its lexer fails every template test, loudly. */
function loadLexer(): { lexer: JisonLexer; tokens: Record<(typeof TOKEN_NAMES)[number], number> } {
  const host = (handlebarsParser as unknown as { parser?: { lexer?: unknown; terminals_?: unknown } }).parser;
  const lexer = host?.lexer as Partial<JisonLexer> | undefined;
  const terminals = host?.terminals_;
  if (
    typeof lexer?.setInput !== "function" ||
    typeof lexer.lex !== "function" ||
    typeof terminals !== "object" ||
    terminals === null
  ) {
    throw new Error(
      "@handlebars/parser no longer exposes parser.lexer / parser.terminals_; template nesting cannot be measured",
    );
  }
  const ids = new Map(Object.entries(terminals).map(([id, name]) => [String(name), Number(id)]));
  const tokens = {} as Record<(typeof TOKEN_NAMES)[number], number>;
  for (const name of TOKEN_NAMES) {
    const id = ids.get(name);
    if (id === undefined) {
      throw new Error(`@handlebars/parser has no token ${name}; template nesting cannot be measured`);
    }
    tokens[name] = id;
  }
  return { lexer: lexer as JisonLexer, tokens };
}

const { lexer: HANDLEBARS_LEXER, tokens: TOKENS } = loadLexer();

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

/**
 * Renders `source`, then classifies the text: if it parses as JSON the value is returned
 * (`json: true`), otherwise the text. The http action uses it to send a body template that
 * renders JSON as JSON. Any JSON qualifies, including `42` or `"text"`; empty output is text.
 *
 * @throws EngineError as {@link renderTemplate}.
 */
export function renderJsonTemplate(source: string, data: unknown, options?: RenderOptions): JsonTemplateResult {
  const text = renderTemplate(source, data, options);
  try {
    return { json: true, value: JSON.parse(text) as unknown };
  } catch {
    return { json: false, text };
  }
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
      escape: options.escape ?? "none",
      partials: options.partials,
      substitute: options.substitute,
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

/** A rendering stopped by its work-budget scope (`work-budget.ts`): `expr.budget_exceeded`, as every kind of expression. */
function scopeExceeded(reason: string): EngineError {
  return new EngineError("expr.budget_exceeded", `template rendering ${reason}`);
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

// ───────────────────────────── parse errors ─────────────────────────────

/** The shapes of what `@handlebars/parser` throws: jison parse errors and its `Exception`. */
interface ParserErrorShape {
  message?: unknown;
  lineNumber?: unknown;
  column?: unknown;
  hash?: { token?: unknown; text?: unknown; loc?: { last_line?: unknown; last_column?: unknown } };
}

function describeParseError(thrown: unknown): string {
  if (typeof thrown !== "object" || thrown === null) {
    return `template does not parse: ${String(thrown)}`;
  }
  const error = thrown as ParserErrorShape;
  const message = typeof error.message === "string" ? error.message : "unknown parse error";
  const hash = error.hash;
  if (hash !== undefined) {
    const line = typeof hash.loc?.last_line === "number" ? hash.loc.last_line : undefined;
    const near = message.split("\n")[1];
    const what =
      hash.token === "EOF"
        ? "the template ends before a mustache or block is closed"
        : hash.token === "INVALID"
          ? `unexpected character ${JSON.stringify(hash.text)}`
          : `unexpected ${JSON.stringify(hash.text)}`;
    return `template does not parse${line === undefined ? "" : ` at line ${line}`}: ${what}${near === undefined ? "" : ` (near ${JSON.stringify(near)})`}`;
  }
  const bare = message.replace(/ - \d+:\d+$/, "");
  return typeof error.lineNumber === "number"
    ? `template does not parse at line ${error.lineNumber}: ${bare}`
    : `template does not parse: ${bare}`;
}

// ───────────────────────────── helpers ─────────────────────────────

type Args = readonly unknown[];
type HashArgs = ReadonlyMap<string, unknown>;
type BlockRenderer = (node: AST.BlockStatement, args: Args, hash: HashArgs, scope: Scope) => string;

/** A helper: arity and hash keys are checked at compile time. */
interface HelperSpec {
  readonly min: number;
  readonly max: number;
  readonly hash?: readonly string[];
  /** Present for block helpers (`#if`, `#each`, …), usable only as blocks. */
  readonly block?: BlockRenderer;
  /** Present for value helpers, usable in mustaches and sub-expressions. */
  readonly value?: (args: Args, hash: HashArgs) => unknown;
  /** A value helper that may also open a block: the body renders when its result is truthy. */
  readonly predicate?: boolean;
  /** Block helpers that bind `as |…|` params, and how many. */
  readonly blockParams?: number;
}

/** Output of `urlencode`: already URL-safe, so `url` escaping leaves it alone. */
class UrlEncodedText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

function compare(test: (a: number | string, b: number | string) => boolean): HelperSpec {
  return {
    min: 2,
    max: 2,
    predicate: true,
    value: ([a, b]) =>
      (typeof a === "number" && typeof b === "number") || (typeof a === "string" && typeof b === "string")
        ? test(a, b)
        : false,
  };
}

function textHelper(transform: (text: string) => string): HelperSpec {
  return { min: 1, max: 1, value: ([value]) => transform(renderValue(value)) };
}

const HELPERS: ReadonlyMap<string, HelperSpec> = new Map<string, HelperSpec>([
  [
    "if",
    {
      min: 1,
      max: 1,
      hash: ["includeZero"],
      block: (node, [value], hash, scope) => renderBranch(node, isTruthy(value, hash.get("includeZero")), scope),
    },
  ],
  [
    "unless",
    {
      min: 1,
      max: 1,
      hash: ["includeZero"],
      block: (node, [value], hash, scope) => renderBranch(node, !isTruthy(value, hash.get("includeZero")), scope),
    },
  ],
  ["each", { min: 1, max: 1, blockParams: 2, block: (node, [items], _hash, scope) => renderEach(node, items, scope) }],
  ["with", { min: 1, max: 1, blockParams: 1, block: (node, [value], _hash, scope) => renderWith(node, value, scope) }],
  ["lookup", { min: 2, max: 2, value: ([target, key]) => getOwn(target, key) }],
  ["log", { min: 0, max: Infinity, hash: ["level"], value: () => undefined }],
  ["json", { min: 1, max: 2, value: ([value, indent]) => toJson(value, indent) }],
  ["eq", { min: 2, max: 2, predicate: true, value: ([a, b]) => a === b }],
  ["ne", { min: 2, max: 2, predicate: true, value: ([a, b]) => a !== b }],
  ["lt", compare((a, b) => a < b)],
  ["gt", compare((a, b) => a > b)],
  ["lte", compare((a, b) => a <= b)],
  ["gte", compare((a, b) => a >= b)],
  ["and", { min: 1, max: Infinity, predicate: true, value: (args) => args.every((arg) => isTruthy(arg)) }],
  ["or", { min: 1, max: Infinity, predicate: true, value: (args) => args.some((arg) => isTruthy(arg)) }],
  ["not", { min: 1, max: 1, predicate: true, value: ([value]) => !isTruthy(value) }],
  [
    "default",
    { min: 1, max: Infinity, value: (args) => args.find((arg) => arg !== undefined && arg !== null && arg !== "") },
  ],
  ["concat", { min: 0, max: Infinity, value: (args) => args.map(renderValue).join("") }],
  ["lowercase", textHelper((text) => text.toLowerCase())],
  ["uppercase", textHelper((text) => text.toUpperCase())],
  ["trim", textHelper((text) => text.trim())],
  ["join", { min: 1, max: 2, value: ([items, separator]) => joinItems(items, separator) }],
  ["length", { min: 1, max: 1, value: ([value]) => lengthOf(value) }],
  ["urlencode", { min: 1, max: 1, value: ([value]) => new UrlEncodedText(urlEncode(renderValue(value))) }],
]);

function joinItems(items: unknown, separator: unknown): string {
  const glue = separator === undefined ? ", " : renderValue(separator);
  return Array.isArray(items) ? arrayItems(items).map(renderValue).join(glue) : renderValue(items);
}

function lengthOf(value: unknown): number {
  if (typeof value === "string") {
    return value.length;
  }
  if (Array.isArray(value)) {
    return value.length;
  }
  return isPlainObject(value) ? ownKeys(value).length : 0;
}

/** Handlebars' `if` truthiness: falsy values and empty arrays are false; `0` only with `includeZero`. */
function isTruthy(value: unknown, includeZero?: unknown): boolean {
  if (Array.isArray(value)) {
    return value.length > 0;
  }
  if (value === 0 && isTruthy(includeZero)) {
    return true;
  }
  return Boolean(value);
}

/** Handlebars' `isEmpty`, used by `#with`: like falsy, but `0` is not empty. */
function isEmpty(value: unknown): boolean {
  return (!value && value !== 0) || (Array.isArray(value) && value.length === 0);
}

// ───────────────────────────── safe data access ─────────────────────────────

/** Only these are walked into by paths: plain objects (`{}` / null prototype) and arrays. */
function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return false;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** `__proto__` is refused even as an own key, so no template can name a prototype. */
const REFUSED_KEY = "__proto__";

/**
 * The one way a template reads data: an own *data* property of a plain object or array.
 * Getters are not invoked and functions resolve to `undefined`.
 */
function getOwn(target: unknown, key: unknown): unknown {
  if (!Array.isArray(target) && !isPlainObject(target)) {
    return undefined;
  }
  const name = typeof key === "number" ? String(key) : key;
  if (typeof name !== "string" || name === REFUSED_KEY) {
    return undefined;
  }
  const descriptor = Object.getOwnPropertyDescriptor(target, name);
  if (descriptor === undefined || !("value" in descriptor)) {
    return undefined;
  }
  const value: unknown = descriptor.value;
  return typeof value === "function" ? undefined : value;
}

function ownKeys(target: Record<string, unknown>): string[] {
  return Object.keys(target).filter((key) => key !== REFUSED_KEY);
}

/** The items of an array as a template sees them: holes and getters read as `undefined`. */
function arrayItems(items: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let index = 0; index < items.length; index += 1) {
    out.push(getOwn(items, index));
  }
  return out;
}

// ───────────────────────────── value rendering ─────────────────────────────

/** The text of a value (see the rules at the top of this file). */
function renderValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    case "object":
      if (value === null) {
        return "";
      }
      if (value instanceof UrlEncodedText) {
        return value.text;
      }
      return Array.isArray(value) ? arrayItems(value).map(renderValue).join(",") : toJson(value, undefined);
    default:
      return "";
  }
}

/** `JSON.stringify` of a copy built from own data properties, so no `toJSON` or getter in data ever runs. */
function toJson(value: unknown, indent: unknown): string {
  const space =
    typeof indent === "number"
      ? Math.max(0, Math.min(10, Math.trunc(indent)))
      : typeof indent === "string"
        ? indent.slice(0, 10)
        : undefined;
  const copy = toJsonValue(value, new Set());
  return copy === undefined ? "null" : JSON.stringify(copy, null, space);
}

function toJsonValue(value: unknown, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "object":
      return value === null ? null : toJsonObject(value, ancestors);
    default:
      return undefined;
  }
}

function toJsonObject(value: object, ancestors: Set<object>): unknown {
  if (value instanceof UrlEncodedText) {
    return value.text;
  }
  if (Object.getPrototypeOf(value) === Date.prototype) {
    const time = Date.prototype.getTime.call(value);
    return Number.isNaN(time) ? null : Date.prototype.toISOString.call(value);
  }
  if (ancestors.has(value)) {
    throw new EngineError("template.render_failed", "cannot render cyclic data as JSON");
  }
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      return arrayItems(value).map((item) => toJsonValue(item, ancestors) ?? null);
    }
    // Null prototype: JSON.stringify finds no inherited `toJSON`, and `__proto__` stays an ordinary key.
    const out = Object.create(null) as Record<string, unknown>;
    if (isPlainObject(value)) {
      for (const key of Object.keys(value)) {
        const descriptor = Object.getOwnPropertyDescriptor(value, key);
        const item =
          descriptor !== undefined && "value" in descriptor ? toJsonValue(descriptor.value, ancestors) : undefined;
        if (item !== undefined) {
          out[key] = item;
        }
      }
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}

const HTML_ESCAPES: Readonly<Record<string, string>> = {
  "&": "&amp;",
  "<": "&lt;",
  ">": "&gt;",
  '"': "&quot;",
  "'": "&#x27;",
  "`": "&#x60;",
  "=": "&#x3D;",
};

function escapeHtml(text: string): string {
  return text.replace(/[&<>"'`=]/g, (char) => HTML_ESCAPES[char] ?? char);
}

function urlEncode(text: string): string {
  return encodeURIComponent(text.toWellFormed());
}

/** What a mustache writes: escaped per mode for `{{x}}`, raw for `{{{x}}}`. */
function emit(value: unknown, escaped: boolean, mode: TemplateEscape): string {
  if (value instanceof UrlEncodedText && mode === "url") {
    return value.text;
  }
  const text = renderValue(value);
  if (!escaped || mode === "none") {
    return text;
  }
  return mode === "html" ? escapeHtml(text) : urlEncode(text);
}

// ───────────────────────────── render scope ─────────────────────────────

/** `this` and, through `parent`, what `../` reaches (pushed only when the context changes, as in Handlebars). */
interface ContextFrame {
  readonly value: unknown;
  readonly parent: ContextFrame | undefined;
}

/** `@index`, `@key`, `@first`, `@last` of the innermost `#each`; `parent` is what `@../` reaches. */
interface DataFrame {
  readonly values: ReadonlyMap<string, unknown>;
  readonly parent: DataFrame | undefined;
}

/** Block params (`as |item i|`) in scope, innermost first. */
interface ParamFrame {
  readonly bindings: ReadonlyMap<string, unknown>;
  readonly parent: ParamFrame | undefined;
}

/** Inline partials (`{{#*inline}}`) visible from here, innermost first. */
interface InlineFrame {
  readonly partials: ReadonlyMap<string, AST.Program>;
  readonly parent: InlineFrame | undefined;
}

interface RenderState {
  /** Render steps taken so far, against {@link limit}. */
  steps: number;
  /** {@link MAX_TEMPLATE_RENDER_STEPS}, or less when the work-budget scope has less left. */
  readonly limit: number;
  /** Why the rendering stops at {@link limit} when the scope, not its own budget, set it. */
  readonly scopeReason: string | undefined;
  readonly root: unknown;
  readonly escape: TemplateEscape;
  readonly partials: Readonly<Record<string, string>> | undefined;
  readonly substitute: ((text: string) => string) | undefined;
}

interface Scope {
  readonly context: ContextFrame;
  readonly data: DataFrame;
  readonly params: ParamFrame | undefined;
  readonly inline: InlineFrame | undefined;
  readonly partialDepth: number;
  readonly state: RenderState;
}

function withContext(scope: Scope, value: unknown): Scope {
  return value === scope.context.value ? scope : { ...scope, context: { value, parent: scope.context } };
}

function withParams(scope: Scope, program: AST.Program | undefined, values: Args): Scope {
  const names = blockParamsOf(program);
  if (names.length === 0) {
    return scope;
  }
  const bindings = new Map<string, unknown>();
  names.forEach((name, index) => bindings.set(name, values[index]));
  return { ...scope, params: { bindings, parent: scope.params } };
}

function findParam(scope: Scope, name: string): { found: true; value: unknown } | { found: false } {
  for (let frame = scope.params; frame !== undefined; frame = frame.parent) {
    if (frame.bindings.has(name)) {
      return { found: true, value: frame.bindings.get(name) };
    }
  }
  return { found: false };
}

function contextAt(scope: Scope, depth: number): unknown {
  let frame: ContextFrame | undefined = scope.context;
  for (let level = 0; level < depth && frame !== undefined; level += 1) {
    frame = frame.parent;
  }
  return frame?.value;
}

// ───────────────────────────── AST shapes ─────────────────────────────
// The parser's d.ts is loose in places (optional `hash`, `program`, `inverse`, `blockParams`;
// literals as paths); these accessors say what the parser really produces.

type Callable = {
  readonly path: AST.Expression;
  readonly params: AST.Expression[];
  readonly hash?: AST.Hash | undefined;
};

function hashPairs(node: { readonly hash?: AST.Hash | undefined }): AST.HashPair[] {
  return node.hash?.pairs ?? [];
}

function hasArguments(node: Callable): boolean {
  return node.params.length > 0 || hashPairs(node).length > 0;
}

function blockParamsOf(program: AST.Program | undefined): readonly string[] {
  return (program as { blockParams?: string[] } | undefined)?.blockParams ?? [];
}

function programOf(node: AST.BlockStatement): AST.Program | undefined {
  return (node as { program?: AST.Program }).program;
}

function inverseOf(node: AST.BlockStatement): AST.Program | undefined {
  return (node as { inverse?: AST.Program }).inverse;
}

/** Raw blocks (`{{{{raw}}}}`) come out of the parser as blocks with empty strip flags. */
function isRawBlock(node: AST.BlockStatement): boolean {
  return typeof (node.openStrip as { open?: boolean }).open !== "boolean";
}

const LITERAL_TYPES = new Set(["StringLiteral", "NumberLiteral", "BooleanLiteral", "UndefinedLiteral", "NullLiteral"]);

function isPath(node: AST.Node): node is AST.PathExpression {
  return node.type === "PathExpression";
}

/** `this.x`, `./x` and `[this]` are scoped: never helpers, never block params (Handlebars' `scopedId`). */
function isScoped(path: AST.PathExpression): boolean {
  return /^(?:\.|this(?:$|[./]))/.test(path.original);
}

/**
 * The name a helper call would use: a one-segment, unscoped path or a literal (Handlebars
 * turns `{{"name"}}` into a lookup of `name`).
 */
function simpleName(node: AST.Expression): string | undefined {
  if (LITERAL_TYPES.has(node.type)) {
    return String((node as { original?: unknown }).original);
  }
  if (
    !isPath(node) ||
    node.data ||
    node.depth > 0 ||
    node.parts.length !== 1 ||
    typeof node.head !== "string" ||
    isScoped(node)
  ) {
    return undefined;
  }
  return node.head;
}

function location(node: AST.Node): string {
  const start = node.loc?.start;
  return start === undefined ? "" : ` at line ${start.line}, column ${start.column + 1}`;
}

// ───────────────────────────── compile-time checks ─────────────────────────────

/** A template that parses but uses something this renderer refuses. */
class TemplateProblem extends Error {}

function problem(message: string, node: AST.Node): TemplateProblem {
  return new TemplateProblem(`${message}${location(node)}`);
}

/** Block params statically in scope, innermost last. */
type ParamNames = readonly (readonly string[])[];

function isParamName(params: ParamNames, name: string): boolean {
  return params.some((names) => names.includes(name));
}

interface StatementNodes {
  ContentStatement: AST.ContentStatement;
  CommentStatement: AST.CommentStatement;
  MustacheStatement: AST.MustacheStatement;
  BlockStatement: AST.BlockStatement;
  DecoratorBlock: AST.BlockStatement;
  PartialStatement: AST.PartialStatement;
}

type StatementHandlers<R, S> = { readonly [K in keyof StatementNodes]: (node: StatementNodes[K], scope: S) => R };

function handlerFor<R, S>(
  handlers: StatementHandlers<R, S>,
  node: AST.Statement,
): ((node: AST.Statement, scope: S) => R) | undefined {
  return Object.hasOwn(handlers, node.type)
    ? (handlers[node.type as keyof StatementNodes] as (node: AST.Statement, scope: S) => R)
    : undefined;
}

const UNSUPPORTED_STATEMENTS: Readonly<Record<string, string>> = {
  Decorator: "decorators ({{*name}}) are not supported",
  PartialBlockStatement: "partial blocks ({{#> name}}…{{/name}}) are not supported; use {{> name}}",
};

const checkers: StatementHandlers<void, ParamNames> = {
  ContentStatement: () => undefined,
  CommentStatement: () => undefined,
  MustacheStatement: checkMustache,
  BlockStatement: checkBlock,
  DecoratorBlock: checkInlinePartial,
  PartialStatement: checkPartial,
};

function checkProgram(program: AST.Program | undefined, params: ParamNames): void {
  for (const statement of program?.body ?? []) {
    const check = handlerFor(checkers, statement);
    if (check === undefined) {
      throw problem(
        UNSUPPORTED_STATEMENTS[statement.type] ?? `unsupported template syntax (${statement.type})`,
        statement,
      );
    }
    check(statement, params);
  }
}

function checkMustache(node: AST.MustacheStatement, params: ParamNames): void {
  if (node.path.type === "SubExpression") {
    if (hasArguments(node)) {
      throw problem("a sub-expression cannot be called with arguments", node);
    }
    checkExpression(node.path, params);
    return;
  }
  if (!hasArguments(node)) {
    checkExpression(node.path, params);
    return;
  }
  const spec = checkCallee(node, params, "inline");
  checkArguments(node, spec, params);
}

function checkBlock(node: AST.BlockStatement, params: ParamNames): void {
  if (isRawBlock(node)) {
    if (hasArguments(node)) {
      throw problem("a raw block ({{{{raw}}}}) takes no arguments", node);
    }
    return;
  }
  const program = programOf(node);
  const declared = blockParamsOf(program);
  let allowedParams = 0;
  if (hasArguments(node)) {
    const spec = checkCallee(node, params, "block");
    checkArguments(node, spec, params);
    allowedParams = spec.blockParams ?? 0;
  } else {
    const name = simpleName(node.path);
    if (name !== undefined && !isParamName(params, name) && HELPERS.get(name)?.block !== undefined) {
      throw problem(`#${name} requires ${describeArity(HELPERS.get(name))}`, node);
    }
    checkExpression(node.path, params);
  }
  if (declared.length > allowedParams) {
    throw problem(
      allowedParams === 0
        ? "block params (as |…|) are only supported on #each and #with"
        : `#${simpleName(node.path) ?? ""} takes at most ${allowedParams} block param${allowedParams === 1 ? "" : "s"}`,
      node,
    );
  }
  checkProgram(program, declared.length > 0 ? [...params, declared] : params);
  checkProgram(inverseOf(node), params);
}

function checkInlinePartial(node: AST.BlockStatement, _params: ParamNames): void {
  const [name, ...rest] = node.params;
  if (
    simpleName(node.path) !== "inline" ||
    name?.type !== "StringLiteral" ||
    rest.length > 0 ||
    hashPairs(node).length > 0
  ) {
    throw problem('decorators are not supported, except inline partials ({{#*inline "name"}}…{{/inline}})', node);
  }
  // An inline partial renders later, from a partial call, where no block params are in scope.
  checkProgram(programOf(node), []);
}

function checkPartial(node: AST.PartialStatement, params: ParamNames): void {
  if (partialName(node) === undefined) {
    throw problem(
      node.name.type === "SubExpression"
        ? "dynamic partials ({{> (expression)}}) are not supported"
        : "only named partials ({{> name}}) are supported; @partial-block is not",
      node,
    );
  }
  if (node.params.length > 1) {
    throw problem("a partial takes at most one context argument", node);
  }
  for (const param of node.params) {
    checkExpression(param, params);
  }
  for (const pair of hashPairs(node)) {
    checkExpression(pair.value, params);
  }
}

/** Finds the helper a call names, or explains why the call is refused. */
function checkCallee(
  node: Callable & AST.Node,
  params: ParamNames,
  usage: "inline" | "block" | "subexpression",
): HelperSpec {
  const name = simpleName(node.path);
  if (name === undefined || isParamName(params, name)) {
    const shown = isPath(node.path) ? node.path.original : node.path.type;
    throw problem(`"${shown}" is not a helper: only helpers can take arguments`, node);
  }
  const spec = HELPERS.get(name);
  if (spec === undefined) {
    throw problem(`unknown helper "${name}" (known: ${[...HELPERS.keys()].join(", ")})`, node);
  }
  if (usage === "block" && spec.block === undefined && spec.predicate !== true) {
    throw problem(`"${name}" cannot open a block; write {{${name} …}}`, node);
  }
  if (usage !== "block" && spec.block !== undefined) {
    throw problem(`"${name}" is a block helper; write {{#${name} …}}…{{/${name}}}`, node);
  }
  return spec;
}

function describeArity(spec: HelperSpec | undefined): string {
  if (spec === undefined) {
    return "arguments";
  }
  if (spec.min === spec.max) {
    return `exactly ${spec.min} argument${spec.min === 1 ? "" : "s"}`;
  }
  return spec.max === Infinity
    ? `at least ${spec.min} argument${spec.min === 1 ? "" : "s"}`
    : `${spec.min} to ${spec.max} arguments`;
}

function checkArguments(node: Callable & AST.Node, spec: HelperSpec, params: ParamNames): void {
  const name = simpleName(node.path) ?? "";
  if (node.params.length < spec.min || node.params.length > spec.max) {
    throw problem(`"${name}" takes ${describeArity(spec)}, got ${node.params.length}`, node);
  }
  for (const pair of hashPairs(node)) {
    if (!(spec.hash ?? []).includes(pair.key)) {
      throw problem(`"${name}" takes no hash argument "${pair.key}"`, pair);
    }
    checkExpression(pair.value, params);
  }
  for (const param of node.params) {
    checkExpression(param, params);
  }
}

function checkExpression(node: AST.Expression, params: ParamNames): void {
  if (LITERAL_TYPES.has(node.type)) {
    return;
  }
  if (isPath(node)) {
    if (typeof node.head === "object") {
      checkExpression(node.head, params);
    }
    return;
  }
  if (node.type === "SubExpression") {
    const sexpr = node as AST.SubExpression;
    checkArguments(sexpr, checkCallee(sexpr, params, "subexpression"), params);
    return;
  }
  throw problem(
    node.type === "HashLiteral"
      ? "hash literals ({{key=value}}) are not supported"
      : `unsupported expression (${node.type})`,
    node,
  );
}

// ───────────────────────────── rendering: statements ─────────────────────────────

const renderers: StatementHandlers<string, Scope> = {
  ContentStatement: (node) => node.value,
  CommentStatement: () => "",
  MustacheStatement: (node, scope) => {
    const value = mustacheValue(node, scope);
    const substitute = scope.state.substitute;
    return substitute === undefined ? emit(value, node.escaped, scope.state.escape) : substitute(renderValue(value));
  },
  BlockStatement: renderBlock,
  DecoratorBlock: () => "", // inline partials are collected by renderProgram
  PartialStatement: renderPartial,
};

function renderProgram(program: AST.Program | undefined, scope: Scope): string {
  if (program === undefined) {
    return "";
  }
  const inner = withInlinePartials(program, scope);
  let out = "";
  for (const statement of program.body) {
    const render = handlerFor(renderers, statement);
    if (render === undefined) {
      throw new EngineError(
        "template.render_failed",
        `unsupported template syntax (${statement.type})${location(statement)}`,
      );
    }
    chargeSteps(scope.state, 1);
    out += render(statement, inner);
    if (out.length > MAX_TEMPLATE_OUTPUT) {
      throw new EngineError("template.render_failed", `template output exceeds ${MAX_TEMPLATE_OUTPUT} characters`);
    }
  }
  return out;
}

/** Inline partials are visible throughout the program that declares them, as in Handlebars. */
function withInlinePartials(program: AST.Program, scope: Scope): Scope {
  const partials = new Map<string, AST.Program>();
  for (const statement of program.body) {
    if (statement.type === "DecoratorBlock") {
      const block = statement as AST.BlockStatement;
      const name = block.params[0];
      const body = programOf(block);
      if (name?.type === "StringLiteral" && body !== undefined) {
        partials.set((name as AST.StringLiteral).value, body);
      }
    }
  }
  return partials.size === 0 ? scope : { ...scope, inline: { partials, parent: scope.inline } };
}

function mustacheValue(node: AST.MustacheStatement, scope: Scope): unknown {
  const helper = calleeOf(node, scope);
  return helper === undefined ? evaluateTarget(node.path, scope) : callHelper(helper, node, scope);
}

function renderBlock(node: AST.BlockStatement, scope: Scope): string {
  if (isRawBlock(node)) {
    return (programOf(node)?.body ?? []).map((statement) => (statement as AST.ContentStatement).value).join("");
  }
  const helper = calleeOf(node, scope);
  if (helper === undefined) {
    return renderSection(node, evaluateTarget(node.path, scope), scope);
  }
  const spec = helperSpec(helper, node);
  chargeSteps(scope.state, 1);
  const args = node.params.map((param) => evaluate(param, scope));
  const hash = evaluateHash(node, scope);
  if (spec.block !== undefined) {
    return spec.block(node, args, hash, scope);
  }
  return renderBranch(node, isTruthy(spec.value?.(args, hash)), scope);
}

function renderBranch(node: AST.BlockStatement, condition: boolean, scope: Scope): string {
  return renderProgram(condition ? programOf(node) : inverseOf(node), scope);
}

/** `{{#path}}…{{/path}}` without a helper: Handlebars' `blockHelperMissing`. */
function renderSection(node: AST.BlockStatement, value: unknown, scope: Scope): string {
  if (value === true) {
    return renderProgram(programOf(node), scope);
  }
  if (value === false || value === undefined || value === null) {
    return renderProgram(inverseOf(node), scope);
  }
  if (Array.isArray(value)) {
    return renderEach(node, value, scope);
  }
  return renderProgram(programOf(node), withContext(scope, value));
}

function renderWith(node: AST.BlockStatement, value: unknown, scope: Scope): string {
  if (isEmpty(value)) {
    return renderProgram(inverseOf(node), scope);
  }
  const program = programOf(node);
  return renderProgram(program, withParams(withContext(scope, value), program, [value]));
}

function renderEach(node: AST.BlockStatement, items: unknown, scope: Scope): string {
  const entries = iterationEntries(items);
  if (entries.length === 0) {
    return renderProgram(inverseOf(node), scope);
  }
  const program = programOf(node);
  let out = "";
  entries.forEach(([key, value], index) => {
    chargeSteps(scope.state, 1);
    const values = new Map<string, unknown>([
      ["index", index],
      ["key", key],
      ["first", index === 0],
      ["last", index === entries.length - 1],
    ]);
    const itemScope: Scope = { ...withContext(scope, value), data: { values, parent: scope.data } };
    out += renderProgram(program, withParams(itemScope, program, [value, key]));
    if (out.length > MAX_TEMPLATE_OUTPUT) {
      throw new EngineError("template.render_failed", `template output exceeds ${MAX_TEMPLATE_OUTPUT} characters`);
    }
  });
  return out;
}

/** `[key, value]` pairs of an array (holes skipped, as Handlebars does) or a plain object. */
function iterationEntries(items: unknown): [string | number, unknown][] {
  if (Array.isArray(items)) {
    const entries: [number, unknown][] = [];
    for (let index = 0; index < items.length; index += 1) {
      if (Object.hasOwn(items, index)) {
        entries.push([index, getOwn(items, index)]);
      }
    }
    return entries;
  }
  return isPlainObject(items) ? ownKeys(items).map((key) => [key, getOwn(items, key)]) : [];
}

function partialName(node: AST.PartialStatement): string | undefined {
  const name = node.name as AST.Expression;
  if (isPath(name)) {
    return name.data || typeof name.head !== "string" ? undefined : name.original;
  }
  return LITERAL_TYPES.has(name.type) && name.type !== "UndefinedLiteral" && name.type !== "NullLiteral"
    ? String((name as { value?: unknown }).value)
    : undefined;
}

function renderPartial(node: AST.PartialStatement, scope: Scope): string {
  chargeSteps(scope.state, 1);
  const name = partialName(node) ?? "";
  if (scope.partialDepth >= MAX_PARTIAL_DEPTH) {
    throw new EngineError(
      "template.render_failed",
      `partials nest deeper than ${MAX_PARTIAL_DEPTH} (is "${name}" recursive?)${location(node)}`,
    );
  }
  const program = findPartial(name, scope, node);
  const [contextParam] = node.params;
  let context = contextParam === undefined ? scope.context.value : evaluate(contextParam, scope);
  const pairs = hashPairs(node);
  if (pairs.length > 0) {
    const merged: Record<string, unknown> = {};
    if (isPlainObject(context)) {
      for (const key of ownKeys(context)) {
        merged[key] = getOwn(context, key);
      }
    }
    for (const pair of pairs) {
      merged[pair.key] = evaluate(pair.value, scope);
    }
    context = merged;
  }
  // Block params do not reach into partials (as in Handlebars); `@` data and inline partials do.
  const inner: Scope = { ...withContext(scope, context), params: undefined, partialDepth: scope.partialDepth + 1 };
  return indentLines(renderProgram(program, inner), node.indent);
}

function findPartial(name: string, scope: Scope, node: AST.PartialStatement): AST.Program {
  for (let frame = scope.inline; frame !== undefined; frame = frame.parent) {
    const inline = frame.partials.get(name);
    if (inline !== undefined) {
      return inline;
    }
  }
  const partials = scope.state.partials;
  const source = partials !== undefined && Object.hasOwn(partials, name) ? partials[name] : undefined;
  if (typeof source !== "string") {
    throw new EngineError("template.render_failed", `partial "${name}" is not defined${location(node)}`);
  }
  const compiled = compileInScope(TEMPLATE_PROGRAMS, source, compileTemplate);
  if (!compiled.ok) {
    throw new EngineError(compiled.code, `partial "${name}": ${compiled.message}`);
  }
  return (compiled.template as CompiledTemplate).program;
}

/** A standalone partial is indented like the line it stood on (Handlebars' rule). */
function indentLines(text: string, indent: string | undefined): string {
  if (indent === undefined || indent === "") {
    return text;
  }
  const lines = text.split("\n");
  return lines.map((line, index) => (line === "" && index === lines.length - 1 ? line : indent + line)).join("\n");
}

// ───────────────────────────── rendering: expressions ─────────────────────────────

/** The helper a mustache, block or sub-expression calls, if it is a call (see the top of the file). */
function calleeOf(node: Callable & AST.Node, scope: Scope): string | undefined {
  if (node.type !== "SubExpression" && !hasArguments(node)) {
    return undefined;
  }
  const name = simpleName(node.path);
  return name !== undefined && !findParam(scope, name).found ? name : undefined;
}

function helperSpec(name: string, node: AST.Node): HelperSpec {
  const spec = HELPERS.get(name);
  if (spec === undefined) {
    // compileTemplate refuses unknown helpers; this guards the invariant.
    throw new EngineError("template.render_failed", `unknown helper "${name}"${location(node)}`);
  }
  return spec;
}

function callHelper(name: string, node: Callable & AST.Node, scope: Scope): unknown {
  const spec = helperSpec(name, node);
  if (spec.value === undefined) {
    throw new EngineError("template.render_failed", `"${name}" is a block helper${location(node)}`);
  }
  const value = spec.value(
    node.params.map((param) => evaluate(param, scope)),
    evaluateHash(node, scope),
  );
  const text = typeof value === "string" ? value : value instanceof UrlEncodedText ? value.text : "";
  chargeSteps(scope.state, 1 + Math.floor(text.length / TEMPLATE_CHARS_PER_RENDER_STEP));
  return value;
}

/**
 * @throws EngineError `template.budget_exceeded` past {@link MAX_TEMPLATE_RENDER_STEPS},
 *   `expr.budget_exceeded` past what the work-budget scope had left.
 */
function chargeSteps(state: RenderState, steps: number): void {
  state.steps += steps;
  if (state.steps > state.limit) {
    if (state.scopeReason !== undefined) {
      throw scopeExceeded(state.scopeReason);
    }
    throw new EngineError(
      "template.budget_exceeded",
      `template rendering exceeded its budget of ${MAX_TEMPLATE_RENDER_STEPS} steps (statements, #each iterations and helper calls)`,
    );
  }
}

function evaluateHash(node: Callable, scope: Scope): HashArgs {
  return new Map(hashPairs(node).map((pair) => [pair.key, evaluate(pair.value, scope)]));
}

/** A mustache's or section's path: a literal there names a key of `this`, as in Handlebars. */
function evaluateTarget(node: AST.Expression, scope: Scope): unknown {
  return LITERAL_TYPES.has(node.type) ? getOwn(scope.context.value, simpleName(node)) : evaluate(node, scope);
}

interface ExpressionNodes {
  PathExpression: AST.PathExpression;
  SubExpression: AST.SubExpression;
  StringLiteral: AST.StringLiteral;
  NumberLiteral: AST.NumberLiteral;
  BooleanLiteral: AST.BooleanLiteral;
  UndefinedLiteral: AST.UndefinedLiteral;
  NullLiteral: AST.NullLiteral;
}

const evaluators: { readonly [K in keyof ExpressionNodes]: (node: ExpressionNodes[K], scope: Scope) => unknown } = {
  PathExpression: evaluatePath,
  SubExpression: (node, scope) => {
    const helper = calleeOf(node, scope) ?? "";
    const value = callHelper(helper, node, scope);
    return value instanceof UrlEncodedText ? value.text : value;
  },
  StringLiteral: (node) => node.value,
  NumberLiteral: (node) => node.value,
  BooleanLiteral: (node) => node.value,
  UndefinedLiteral: () => undefined,
  NullLiteral: () => null,
};

function evaluate(node: AST.Expression, scope: Scope): unknown {
  if (!Object.hasOwn(evaluators, node.type)) {
    throw new EngineError("template.render_failed", `unsupported expression (${node.type})${location(node)}`);
  }
  const evaluator = evaluators[node.type as keyof ExpressionNodes] as (node: AST.Expression, scope: Scope) => unknown;
  return evaluator(node, scope);
}

function evaluatePath(path: AST.PathExpression, scope: Scope): unknown {
  const head = path.parts[0] as AST.PathExpression["parts"][number] | undefined;
  if (path.data) {
    return resolveTail(dataValue(scope, path.depth, typeof head === "string" ? head : ""), path.tail);
  }
  if (head === undefined) {
    return contextAt(scope, path.depth); // `this`, `.`, `../`
  }
  if (typeof head === "object") {
    return resolveTail(evaluate(head, scope), path.tail); // `(helper x).field`
  }
  if (path.depth === 0 && !isScoped(path)) {
    const param = findParam(scope, head);
    if (param.found) {
      return resolveTail(param.value, path.tail);
    }
  }
  return resolveTail(getOwn(contextAt(scope, path.depth), head), path.tail);
}

function dataValue(scope: Scope, depth: number, name: string): unknown {
  if (name === "root") {
    return scope.state.root;
  }
  let frame: DataFrame | undefined = scope.data;
  for (let level = 0; level < depth && frame !== undefined; level += 1) {
    frame = frame.parent;
  }
  return frame?.values.get(name);
}

function resolveTail(value: unknown, tail: readonly string[]): unknown {
  let current = value;
  for (const segment of tail) {
    current = getOwn(current, segment);
  }
  return current;
}

function errorText(thrown: unknown): string {
  return thrown instanceof Error ? thrown.message : String(thrown);
}
