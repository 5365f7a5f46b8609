import type { AST } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { evaluationAllowance, WORK_UNITS_PER_TEMPLATE_STEP } from "./work-budget.ts";
import { currentRunVariables, RUN_VARIABLE } from "./run-scope.ts";
import {
  emit,
  getOwn,
  isEmpty,
  isTruthy,
  iterationEntries,
  joinItems,
  lengthOf,
  renderValue,
  toJson,
  urlEncode,
  UrlEncodedText,
} from "./template-values.ts";

// The interpreter: how it reads the parser's AST, the helpers (see the table at the top of
// `template.ts`), the scope a rendering carries, and statements and expressions rendered
// under the render-step budget. `template-check.ts` refuses, at compile time, everything
// this does not handle.

/** Per-render options. */
export interface RenderOptions {
  /**
   * `url` percent-encodes what each `{{x}}` emits (`encodeURIComponent`), for URL
   * templates; `{{{x}}}` stays raw. Default `none`: nothing is escaped.
   */
  escape?: "none" | "url";
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

/** Longest rendered output, in UTF-16 code units: a runaway template fails instead of eating the isolate's memory. */
export const MAX_TEMPLATE_OUTPUT = 16 * 1024 * 1024;

/**
 * Most render steps one rendering may take: a step is a statement rendered, an `#each`
 * iteration, a helper call, and a further step per {@link TEMPLATE_CHARS_PER_RENDER_STEP}
 * characters a helper returns. Nested `#each` over a few thousand items would otherwise
 * run millions of iterations within the output cap.
 */
export const MAX_TEMPLATE_RENDER_STEPS = 1_000_000;

/** Characters of a helper's result (`json`, `join`, `concat`, …) counted as one render step. */
export const TEMPLATE_CHARS_PER_RENDER_STEP = 20;

// ───────────────────────────── the parser's AST ─────────────────────────────

// The parser's d.ts is loose in places (optional `hash`, `program`, `inverse`, `blockParams`;
// literals as paths); these accessors say what the parser really produces.

export type Callable = {
  readonly path: AST.Expression;
  readonly params: AST.Expression[];
  readonly hash?: AST.Hash | undefined;
};

export function hashPairs(node: { readonly hash?: AST.Hash | undefined }): AST.HashPair[] {
  return node.hash?.pairs ?? [];
}

export function hasArguments(node: Callable): boolean {
  return node.params.length > 0 || hashPairs(node).length > 0;
}

export function blockParamsOf(program: AST.Program | undefined): readonly string[] {
  return (program as { blockParams?: string[] } | undefined)?.blockParams ?? [];
}

export function programOf(node: AST.BlockStatement): AST.Program | undefined {
  return (node as { program?: AST.Program }).program;
}

export function inverseOf(node: AST.BlockStatement): AST.Program | undefined {
  return (node as { inverse?: AST.Program }).inverse;
}

/** Raw blocks (`{{{{raw}}}}`) come out of the parser as blocks with empty strip flags. */
export function isRawBlock(node: AST.BlockStatement): boolean {
  return typeof (node.openStrip as { open?: boolean }).open !== "boolean";
}

export const LITERAL_TYPES = new Set([
  "StringLiteral",
  "NumberLiteral",
  "BooleanLiteral",
  "UndefinedLiteral",
  "NullLiteral",
]);

export function isPath(node: AST.Node): node is AST.PathExpression {
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
export function simpleName(node: AST.Expression): string | undefined {
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

export function location(node: AST.Node): string {
  const start = node.loc?.start;
  return start === undefined ? "" : ` at line ${start.line}, column ${start.column + 1}`;
}

/** The statements a checked template holds, by type. */
interface StatementNodes {
  ContentStatement: AST.ContentStatement;
  CommentStatement: AST.CommentStatement;
  MustacheStatement: AST.MustacheStatement;
  BlockStatement: AST.BlockStatement;
}

/** One handler per supported statement type: the checks and the renderer dispatch through these. */
export type StatementHandlers<R, S> = {
  readonly [K in keyof StatementNodes]: (node: StatementNodes[K], scope: S) => R;
};

export function handlerFor<R, S>(
  handlers: StatementHandlers<R, S>,
  node: AST.Statement,
): ((node: AST.Statement, scope: S) => R) | undefined {
  return Object.hasOwn(handlers, node.type)
    ? (handlers[node.type as keyof StatementNodes] as (node: AST.Statement, scope: S) => R)
    : undefined;
}

// ───────────────────────────── helpers ─────────────────────────────

type Args = readonly unknown[];

type HashArgs = ReadonlyMap<string, unknown>;

/** A helper: arity and hash keys are checked at compile time. */
export interface HelperSpec {
  readonly min: number;
  readonly max: number;
  readonly hash?: readonly string[];
  /** Present for block helpers (`#if`, `#each`, …), usable only as blocks. */
  readonly block?: (node: AST.BlockStatement, args: Args, hash: HashArgs, scope: Scope) => string;
  /** Present for value helpers, usable in mustaches and sub-expressions. */
  readonly value?: (args: Args, hash: HashArgs) => unknown;
  /** A value helper that may also open a block: the body renders when its result is truthy. */
  readonly predicate?: boolean;
  /** Block helpers that bind `as |…|` params, and how many. */
  readonly blockParams?: number;
  /** A value helper that tests its arguments (`default`): a strict rendering lets them be absent, as it does a predicate's. */
  readonly acceptsAbsent?: boolean;
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

export const HELPERS: ReadonlyMap<string, HelperSpec> = new Map<string, HelperSpec>([
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
  ["log", { min: 0, max: Infinity, hash: ["level"], acceptsAbsent: true, value: () => undefined }],
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
    {
      min: 1,
      max: Infinity,
      acceptsAbsent: true,
      value: (args) => args.find((arg) => arg !== undefined && arg !== null && arg !== ""),
    },
  ],
  ["concat", { min: 0, max: Infinity, value: (args) => args.map(renderValue).join("") }],
  ["lowercase", textHelper((text) => text.toLowerCase())],
  ["uppercase", textHelper((text) => text.toUpperCase())],
  ["trim", textHelper((text) => text.trim())],
  ["join", { min: 1, max: 2, value: ([items, separator]) => joinItems(items, separator) }],
  ["length", { min: 1, max: 1, value: ([value]) => lengthOf(value) }],
  ["urlencode", { min: 1, max: 1, value: ([value]) => new UrlEncodedText(urlEncode(renderValue(value))) }],
]);

// ───────────────────────────── the scope of a rendering ─────────────────────────────

/** A stack as a linked list, innermost first: each scope pushes onto the ones it needs. */
interface Frame<T> {
  readonly value: T;
  readonly parent: Frame<T> | undefined;
}

/** The frame `depth` levels out from `frame` (what `../` and `@../` reach). */
function frameAt<T>(frame: Frame<T> | undefined, depth: number): Frame<T> | undefined {
  let at = frame;
  for (let level = 0; level < depth && at !== undefined; level += 1) {
    at = at.parent;
  }
  return at;
}

/** What one rendering shares across its scopes. */
interface RenderState {
  /** Render steps taken so far, against {@link limit}. */
  steps: number;
  /** {@link MAX_TEMPLATE_RENDER_STEPS}, or less when the work-budget scope has less left. */
  readonly limit: number;
  /** Why the rendering stops at {@link limit} when the scope, not its own budget, set it. */
  readonly scopeReason: string | undefined;
  readonly root: unknown;
  /** The reserved `run` variable (`run-scope.ts`), or undefined outside a run scope. */
  readonly run: unknown;
  /** `{{x}}` is percent-encoded (`RenderOptions.escape` is `url`). */
  readonly urlEscape: boolean;
  readonly substitute: ((text: string) => string) | undefined;
  /** A `{{path}}` that selects nothing fails (`RenderOptions.strict`). */
  readonly strict: boolean;
}

interface Scope {
  /** `this`; pushed only when the context changes, as in Handlebars. */
  readonly context: Frame<unknown>;
  /** `@index`, `@key`, `@first`, `@last` of the innermost `#each`. */
  readonly data: Frame<ReadonlyMap<string, unknown>>;
  /** Block params (`as |item i|`) by name. */
  readonly params: Frame<ReadonlyMap<string, unknown>> | undefined;
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
  return { ...scope, params: { value: bindings, parent: scope.params } };
}

/**
 * What an unscoped path's first segment names before the data: a block param
 * in scope, else the reserved `run` variable (run-scope.ts), which the data's
 * own `run` field cannot shadow (that field is `{{this.run}}`).
 */
function findParam(scope: Scope, name: string): { found: true; value: unknown } | { found: false } {
  for (let frame = scope.params; frame !== undefined; frame = frame.parent) {
    if (frame.value.has(name)) {
      return { found: true, value: frame.value.get(name) };
    }
  }
  const run = scope.state.run;
  return name === RUN_VARIABLE && run !== undefined ? { found: true, value: run } : { found: false };
}

/** A rendering stopped by its work-budget scope (`work-budget.ts`): `expr.budget_exceeded`, as every kind of expression. */
function scopeExceeded(reason: string): EngineError {
  return new EngineError("expr.budget_exceeded", `template rendering ${reason}`);
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

function checkOutputSize(out: string): void {
  if (out.length > MAX_TEMPLATE_OUTPUT) {
    throw new EngineError("template.render_failed", `template output exceeds ${MAX_TEMPLATE_OUTPUT} characters`);
  }
}

/** A strict template's path selected nothing (`helper`: in an argument of that helper): say which, and what the data has. */
function unresolved(path: AST.Expression, root: unknown, helper?: string): EngineError {
  const shown = path.type === "PathExpression" ? (path as AST.PathExpression).original : path.type;
  const keys =
    root !== null && typeof root === "object" && !Array.isArray(root)
      ? `its top-level keys are ${Object.keys(root).slice(0, 20).join(", ") || "none"}`
      : "it is not an object";
  const [what, fix] =
    helper === undefined
      ? [`{{${shown}}}`, `{{default ${shown} ""}}`]
      : [
          `${shown} (an argument of ${helper})`,
          `{{${helper} (default ${shown} ${helper === "json" ? "null" : '""'})}}`,
        ];
  return EngineError.terminal(
    "template.unresolved",
    `${what} selects nothing in the template's data (${keys}); mark a value that may be absent with ${fix}`,
  );
}

/**
 * In a strict rendering, a helper that renders or transforms its arguments (`json`,
 * `lowercase`, `join`, …) refuses a path argument that selects nothing, as a bare `{{path}}`
 * fails: `{{json titel}}` must not send `null`. Helpers that test a value (`default`, the
 * predicates `eq` … `not`, and the blocks `#if`, `#each`, `#with`) accept an absent one.
 */
function requirePresent(
  helper: string,
  spec: HelperSpec,
  params: readonly AST.Expression[],
  args: Args,
  state: RenderState,
): void {
  if (!state.strict || spec.predicate === true || spec.acceptsAbsent === true) {
    return;
  }
  params.forEach((param, index) => {
    if (args[index] === undefined && param.type === "PathExpression") {
      throw unresolved(param, state.root, helper);
    }
  });
}

// ───────────────────────────── rendering: statements ─────────────────────────────

/**
 * Renders a checked program over `data`, within {@link MAX_TEMPLATE_RENDER_STEPS} and
 * what the work-budget scope has left.
 *
 * @throws EngineError `template.render_failed` (cyclic data in `json`, data nested too
 *   deeply, output too large), `template.unresolved` (strict), `template.budget_exceeded`,
 *   `expr.budget_exceeded`.
 */
export function renderProgram(program: AST.Program, data: unknown, options: RenderOptions = {}): string {
  const allowance = evaluationAllowance(MAX_TEMPLATE_RENDER_STEPS, 1 / WORK_UNITS_PER_TEMPLATE_STEP, scopeExceeded);
  const state: RenderState = {
    steps: 0,
    limit: allowance.limit,
    scopeReason: allowance.scopeReason,
    root: data,
    run: currentRunVariables(),
    urlEscape: options.escape === "url",
    substitute: options.substitute,
    strict: options.strict ?? false,
  };
  const scope: Scope = {
    context: { value: data, parent: undefined },
    data: { value: new Map(), parent: undefined },
    params: undefined,
    state,
  };
  try {
    return renderStatements(program, scope);
  } catch (thrown) {
    if (thrown instanceof EngineError) {
      throw thrown;
    }
    const reason =
      thrown instanceof RangeError
        ? "data is nested too deeply"
        : thrown instanceof Error
          ? thrown.message
          : String(thrown);
    throw new EngineError("template.render_failed", `template rendering failed: ${reason}`, { cause: thrown });
  } finally {
    allowance.settle(state.steps);
  }
}

const renderers: StatementHandlers<string, Scope> = {
  ContentStatement: (node) => node.value,
  CommentStatement: () => "",
  MustacheStatement: (node, scope) => {
    const helper = calleeOf(node, scope);
    const value = helper === undefined ? evaluateTarget(node.path, scope) : callHelper(helper, node, scope);
    const state = scope.state;
    if (value === undefined && state.strict && helper === undefined) {
      throw unresolved(node.path, state.root);
    }
    return state.substitute === undefined
      ? emit(value, node.escaped && state.urlEscape)
      : state.substitute(renderValue(value));
  },
  BlockStatement: renderBlock,
};

function renderStatements(program: AST.Program | undefined, scope: Scope): string {
  let out = "";
  for (const statement of program?.body ?? []) {
    const render = handlerFor(renderers, statement);
    if (render === undefined) {
      // compileTemplate refuses every other statement; this guards the invariant.
      throw new EngineError(
        "template.render_failed",
        `unsupported template syntax (${statement.type})${location(statement)}`,
      );
    }
    chargeSteps(scope.state, 1);
    out += render(statement, scope);
    checkOutputSize(out);
  }
  return out;
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
  return renderStatements(condition ? programOf(node) : inverseOf(node), scope);
}

/** `{{#path}}…{{/path}}` without a helper: Handlebars' `blockHelperMissing`. */
function renderSection(node: AST.BlockStatement, value: unknown, scope: Scope): string {
  if (value === true) {
    return renderStatements(programOf(node), scope);
  }
  if (value === false || value === undefined || value === null) {
    return renderStatements(inverseOf(node), scope);
  }
  if (Array.isArray(value)) {
    return renderEach(node, value, scope);
  }
  return renderStatements(programOf(node), withContext(scope, value));
}

function renderWith(node: AST.BlockStatement, value: unknown, scope: Scope): string {
  if (isEmpty(value)) {
    return renderStatements(inverseOf(node), scope);
  }
  const program = programOf(node);
  return renderStatements(program, withParams(withContext(scope, value), program, [value]));
}

function renderEach(node: AST.BlockStatement, items: unknown, scope: Scope): string {
  const entries = iterationEntries(items);
  if (entries.length === 0) {
    return renderStatements(inverseOf(node), scope);
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
    const itemScope: Scope = { ...withContext(scope, value), data: { value: values, parent: scope.data } };
    out += renderStatements(program, withParams(itemScope, program, [value, key]));
    checkOutputSize(out);
  });
  return out;
}

// ───────────────────────────── rendering: expressions ─────────────────────────────

/** The helper a mustache, block or sub-expression calls, if it is a call (see the top of `template.ts`). */
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
  const args = node.params.map((param) => evaluate(param, scope));
  requirePresent(name, spec, node.params, args, scope.state);
  const value = spec.value(args, evaluateHash(node, scope));
  const text = typeof value === "string" ? value : value instanceof UrlEncodedText ? value.text : "";
  chargeSteps(scope.state, 1 + Math.floor(text.length / TEMPLATE_CHARS_PER_RENDER_STEP));
  return value;
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
    return frameAt(scope.context, path.depth)?.value; // `this`, `.`, `../`
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
  return resolveTail(getOwn(frameAt(scope.context, path.depth)?.value, head), path.tail);
}

function dataValue(scope: Scope, depth: number, name: string): unknown {
  return name === "root" ? scope.state.root : frameAt(scope.data, depth)?.value.get(name);
}

function resolveTail(value: unknown, tail: readonly string[]): unknown {
  let current = value;
  for (const segment of tail) {
    current = getOwn(current, segment);
  }
  return current;
}
