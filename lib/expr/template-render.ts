import type { AST } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { evaluationAllowance, StepMeter, WORK_UNITS_PER_TEMPLATE_STEP } from "./work-budget.ts";
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

// The interpreter: one walk over the parser's AST checks the template (refusing, with its
// line, everything not handled) and builds the closures that render it; the helpers (listed
// in docs/definitions.md#templates); the scope and budget a rendering carries.

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
   * A `{{path}}` that selects nothing, also as an argument of a helper that renders it
   * (`{{json path}}`), fails with `template.unresolved`: for templates that build requests
   * and commands, where a typo must not reach the peer.
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

/** A template that parses but uses something this interpreter refuses. */
export class TemplateProblem extends Error {}

/** A checked template, ready to render over any data. */
type RenderProgram = (data: unknown, options?: RenderOptions) => string;

type Render = (scope: Scope) => string;
type Evaluate = (scope: Scope) => unknown;
type Args = readonly unknown[];
type HashArgs = ReadonlyMap<string, unknown>;

/** A block's compiled sections and the block params its body declares. */
interface Block {
  readonly body: Render;
  readonly inverse: Render;
  readonly declared: readonly string[];
}

// ───────────────────────────── helpers ─────────────────────────────

/** A helper: arity and hash keys are checked at compile time. */
interface HelperSpec {
  readonly min: number;
  readonly max: number;
  readonly hash?: readonly string[];
  /** Present for block helpers (`#if`, `#each`, …), usable only as blocks. */
  readonly block?: (block: Block, args: Args, hash: HashArgs, scope: Scope) => string;
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

function conditional(when: boolean): HelperSpec {
  return {
    min: 1,
    max: 1,
    hash: ["includeZero"],
    block: (block, [value], hash, scope) =>
      (isTruthy(value, hash.get("includeZero")) === when ? block.body : block.inverse)(scope),
  };
}

function textHelper(transform: (text: string) => string): HelperSpec {
  return { min: 1, max: 1, value: ([value]) => transform(renderValue(value)) };
}

const HELPERS: ReadonlyMap<string, HelperSpec> = new Map<string, HelperSpec>([
  ["if", conditional(true)],
  ["unless", conditional(false)],
  [
    "each",
    { min: 1, max: 1, blockParams: 2, block: (block, [items], _hash, scope) => renderEach(block, items, scope) },
  ],
  [
    "with",
    { min: 1, max: 1, blockParams: 1, block: (block, [value], _hash, scope) => renderWith(block, value, scope) },
  ],
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

// ───────────────────────────── compiling: statements ─────────────────────────────

/** Statements the parser builds that no template may use. */
const UNSUPPORTED_STATEMENTS: Readonly<Record<string, string>> = {
  PartialStatement: "partials ({{> name}}) are not supported",
  PartialBlockStatement: "partial blocks ({{#> name}}…{{/name}}) are not supported",
  Decorator: "decorators ({{*name}}) are not supported",
  DecoratorBlock: 'decorators are not supported ({{#*name}}…{{/name}}, inline partials {{#*inline "name"}} among them)',
};

/** Block params statically in scope, innermost last. */
type ParamNames = readonly (readonly string[])[];

function problem(message: string, node: AST.Node): TemplateProblem {
  const start = node.loc?.start;
  return new TemplateProblem(
    start === undefined ? message : `${message} at line ${start.line}, column ${start.column + 1}`,
  );
}

/**
 * Checks a parsed program and builds what renders it.
 * @throws TemplateProblem for what this interpreter refuses; RangeError when it nests too deeply.
 */
export function compileProgram(program: AST.Program): RenderProgram {
  const render = compileStatements(program, []);
  return (data, options = {}) => renderProgram(render, data, options);
}

function compileStatements(program: AST.Program | undefined, params: ParamNames): Render {
  const parts = (program?.body ?? []).map((statement) => compileStatement(statement, params));
  return (scope) => {
    let out = "";
    for (const part of parts) {
      scope.state.steps.charge(1);
      out += part(scope);
      checkOutputSize(out);
    }
    return out;
  };
}

function compileStatement(statement: AST.Statement, params: ParamNames): Render {
  switch (statement.type) {
    case "ContentStatement": {
      const text = (statement as AST.ContentStatement).value;
      return () => text;
    }
    case "CommentStatement":
      return () => "";
    case "MustacheStatement":
      return compileMustache(statement as AST.MustacheStatement, params);
    case "BlockStatement":
      return compileBlock(statement as AST.BlockStatement, params);
    default:
      throw problem(
        UNSUPPORTED_STATEMENTS[statement.type] ?? `unsupported template syntax (${statement.type})`,
        statement,
      );
  }
}

function compileMustache(node: AST.MustacheStatement, params: ParamNames): Render {
  const called = hasArguments(node);
  if (called && node.path.type === "SubExpression") {
    throw problem("a sub-expression cannot be called with arguments", node);
  }
  const evaluate = called ? compileCall(node, params, "inline") : compileTarget(node.path, params);
  const encode = node.escaped;
  return (scope) => {
    const value = evaluate(scope);
    const state = scope.state;
    if (value === undefined && state.strict && !called) {
      throw unresolved(node.path, state.root);
    }
    return state.substitute === undefined
      ? emit(value, encode && state.urlEscape)
      : state.substitute(renderValue(value));
  };
}

function compileBlock(node: AST.BlockStatement, params: ParamNames): Render {
  const program = (node as { program?: AST.Program }).program;
  // Raw blocks (`{{{{raw}}}}`) come out of the parser as blocks with empty strip flags.
  if (typeof (node.openStrip as { open?: boolean }).open !== "boolean") {
    if (hasArguments(node)) {
      throw problem("a raw block ({{{{raw}}}}) takes no arguments", node);
    }
    const text = (program?.body ?? []).map((statement) => (statement as AST.ContentStatement).value).join("");
    return () => text;
  }
  // A block helper is called even without arguments, so `{{#each}}` is refused for its arity.
  const name = simpleName(node.path);
  const blockHelper = name !== undefined && !isParamName(params, name) && HELPERS.get(name)?.block !== undefined;
  const call = hasArguments(node) || blockHelper ? checkCall(node, params, "block") : undefined;
  const declared = (program as { blockParams?: string[] } | undefined)?.blockParams ?? [];
  const allowed = call?.spec.blockParams ?? 0;
  if (declared.length > allowed) {
    throw problem(
      allowed === 0
        ? "block params (as |…|) are only supported on #each and #with"
        : `#${call?.name ?? ""} takes at most ${allowed} block param${allowed === 1 ? "" : "s"}`,
      node,
    );
  }
  const block: Block = {
    body: compileStatements(program, declared.length > 0 ? [...params, declared] : params),
    inverse: compileStatements((node as { inverse?: AST.Program }).inverse, params),
    declared,
  };
  if (call === undefined) {
    const target = compileTarget(node.path, params);
    return (scope) => renderSection(block, target(scope), scope);
  }
  const { spec, args, hash } = call;
  return (scope) => {
    scope.state.steps.charge(1);
    const values = args.map((arg) => arg(scope));
    const hashValues = evaluateHash(hash, scope);
    if (spec.block !== undefined) {
      return spec.block(block, values, hashValues, scope);
    }
    return (isTruthy(spec.value?.(values, hashValues)) ? block.body : block.inverse)(scope);
  };
}

// ───────────────────────────── compiling: expressions ─────────────────────────────

type Callable = AST.Node & {
  readonly path: AST.Expression;
  readonly params: AST.Expression[];
  readonly hash?: AST.Hash | undefined;
};

/** A checked helper call: a helper is called only with arguments, or in a sub-expression or block. */
interface Call {
  readonly name: string;
  readonly spec: HelperSpec;
  readonly params: readonly AST.Expression[];
  readonly args: readonly Evaluate[];
  readonly hash: readonly (readonly [string, Evaluate])[];
}

function hasArguments(node: Callable): boolean {
  return node.params.length > 0 || (node.hash?.pairs.length ?? 0) > 0;
}

function isParamName(params: ParamNames, name: string): boolean {
  return params.some((names) => names.includes(name));
}

const LITERAL_TYPES = new Set(["StringLiteral", "NumberLiteral", "BooleanLiteral", "UndefinedLiteral", "NullLiteral"]);

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
  if (node.type !== "PathExpression") {
    return undefined;
  }
  const path = node as AST.PathExpression;
  return path.data || path.depth > 0 || path.parts.length !== 1 || typeof path.head !== "string" || isScoped(path)
    ? undefined
    : path.head;
}

/** Finds the helper a call names, or explains why the call is refused; then checks and compiles its arguments. */
function checkCall(node: Callable, params: ParamNames, usage: "inline" | "block" | "subexpression"): Call {
  const name = simpleName(node.path);
  if (name === undefined || isParamName(params, name)) {
    const shown = node.path.type === "PathExpression" ? (node.path as AST.PathExpression).original : node.path.type;
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
  if (node.params.length < spec.min || node.params.length > spec.max) {
    throw problem(`"${name}" takes ${describeArity(spec)}, got ${node.params.length}`, node);
  }
  const hash = (node.hash?.pairs ?? []).map((pair) => {
    if (!(spec.hash ?? []).includes(pair.key)) {
      throw problem(`"${name}" takes no hash argument "${pair.key}"`, pair);
    }
    return [pair.key, compileTarget(pair.value, params, false)] as const;
  });
  const args = node.params.map((param) => compileTarget(param, params, false));
  return { name, spec, params: node.params, args, hash };
}

function describeArity(spec: HelperSpec): string {
  if (spec.min === spec.max) {
    return `exactly ${spec.min} argument${spec.min === 1 ? "" : "s"}`;
  }
  return spec.max === Infinity
    ? `at least ${spec.min} argument${spec.min === 1 ? "" : "s"}`
    : `${spec.min} to ${spec.max} arguments`;
}

/** A value helper's call, charged a step and a step per {@link TEMPLATE_CHARS_PER_RENDER_STEP} characters it returns. */
function compileCall(node: Callable, params: ParamNames, usage: "inline" | "subexpression"): Evaluate {
  const call = checkCall(node, params, usage);
  return (scope) => {
    const values = call.args.map((arg) => arg(scope));
    requirePresent(call, values, scope.state);
    const value = call.spec.value?.(values, evaluateHash(call.hash, scope));
    const text = typeof value === "string" ? value : value instanceof UrlEncodedText ? value.text : "";
    scope.state.steps.charge(1 + Math.floor(text.length / TEMPLATE_CHARS_PER_RENDER_STEP));
    return value;
  };
}

function evaluateHash(hash: Call["hash"], scope: Scope): HashArgs {
  return new Map(hash.map(([key, value]) => [key, value(scope)]));
}

/**
 * An expression. As a mustache's or section's path (`target`), a literal names a key of
 * `this`, as in Handlebars; as an argument it is its value.
 */
function compileTarget(node: AST.Expression, params: ParamNames, target = true): Evaluate {
  if (LITERAL_TYPES.has(node.type)) {
    const key = simpleName(node);
    const value = (node as { value?: unknown }).value;
    return target ? (scope) => getOwn(scope.context.value, key) : () => value;
  }
  if (node.type === "PathExpression") {
    const path = node as AST.PathExpression;
    const head = typeof path.head === "object" ? compileTarget(path.head, params, false) : undefined;
    return (scope) => evaluatePath(path, head, scope);
  }
  if (node.type === "SubExpression") {
    const call = compileCall(node as AST.SubExpression, params, "subexpression");
    return (scope) => {
      const value = call(scope);
      return value instanceof UrlEncodedText ? value.text : value;
    };
  }
  throw problem(
    node.type === "HashLiteral"
      ? "hash literals ({{key=value}}) are not supported"
      : `unsupported expression (${node.type})`,
    node,
  );
}

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
  /** Render steps, against {@link MAX_TEMPLATE_RENDER_STEPS} or what the work-budget scope has left. */
  readonly steps: StepMeter;
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

function withParams(scope: Scope, names: readonly string[], values: Args): Scope {
  if (names.length === 0) {
    return scope;
  }
  const bindings = new Map<string, unknown>();
  names.forEach((name, index) => bindings.set(name, values[index]));
  return { ...scope, params: { value: bindings, parent: scope.params } };
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
function requirePresent({ name, spec, params }: Call, args: Args, state: RenderState): void {
  if (state.strict && spec.predicate !== true && spec.acceptsAbsent !== true) {
    params.forEach((param, index) => {
      if (args[index] === undefined && param.type === "PathExpression") {
        throw unresolved(param, state.root, name);
      }
    });
  }
}

// ───────────────────────────── rendering ─────────────────────────────

/**
 * Renders a compiled program over `data`, within {@link MAX_TEMPLATE_RENDER_STEPS} and
 * what the work-budget scope has left.
 *
 * @throws EngineError `template.render_failed` (cyclic data in `json`, data nested too
 *   deeply, output too large), `template.unresolved` (strict), `template.budget_exceeded`,
 *   `expr.budget_exceeded`.
 */
function renderProgram(render: Render, data: unknown, options: RenderOptions): string {
  const allowance = evaluationAllowance(
    MAX_TEMPLATE_RENDER_STEPS,
    1 / WORK_UNITS_PER_TEMPLATE_STEP,
    (reason) => new EngineError("expr.budget_exceeded", `template rendering ${reason}`),
  );
  // Stopped by the work-budget scope (`work-budget.ts`): `expr.budget_exceeded`, as every kind of expression.
  const steps = new StepMeter(
    allowance.limit,
    `template rendering ${allowance.scopeReason ?? `exceeded its budget of ${MAX_TEMPLATE_RENDER_STEPS} steps (statements, #each iterations and helper calls)`}`,
    allowance.scopeReason === undefined ? "template.budget_exceeded" : "expr.budget_exceeded",
  );
  const state: RenderState = {
    steps,
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
    return render(scope);
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
    allowance.settle(steps.spent);
  }
}

/** `{{#path}}…{{/path}}` without a helper: Handlebars' `blockHelperMissing`. */
function renderSection(block: Block, value: unknown, scope: Scope): string {
  if (value === true) {
    return block.body(scope);
  }
  if (value === false || value === undefined || value === null) {
    return block.inverse(scope);
  }
  if (Array.isArray(value)) {
    return renderEach(block, value, scope);
  }
  return block.body(withContext(scope, value));
}

function renderWith(block: Block, value: unknown, scope: Scope): string {
  if (isEmpty(value)) {
    return block.inverse(scope);
  }
  return block.body(withParams(withContext(scope, value), block.declared, [value]));
}

function renderEach(block: Block, items: unknown, scope: Scope): string {
  const entries = iterationEntries(items);
  if (entries.length === 0) {
    return block.inverse(scope);
  }
  let out = "";
  entries.forEach(([key, value], index) => {
    scope.state.steps.charge(1);
    const values = new Map<string, unknown>([
      ["index", index],
      ["key", key],
      ["first", index === 0],
      ["last", index === entries.length - 1],
    ]);
    const itemScope: Scope = { ...withContext(scope, value), data: { value: values, parent: scope.data } };
    out += block.body(withParams(itemScope, block.declared, [value, key]));
    checkOutputSize(out);
  });
  return out;
}

/**
 * A path's value. An unscoped first segment names, before the data, a block param in
 * scope, else the reserved `run` variable (`run-scope.ts`), which the data's own `run`
 * field cannot shadow (that field is `{{this.run}}`).
 */
function evaluatePath(path: AST.PathExpression, head: Evaluate | undefined, scope: Scope): unknown {
  const first = path.parts[0] as AST.PathExpression["parts"][number] | undefined;
  if (path.data) {
    const name = typeof first === "string" ? first : "";
    return resolveTail(
      name === "root" ? scope.state.root : frameAt(scope.data, path.depth)?.value.get(name),
      path.tail,
    );
  }
  if (head !== undefined) {
    return resolveTail(head(scope), path.tail); // `(helper x).field`
  }
  if (typeof first !== "string") {
    return frameAt(scope.context, path.depth)?.value; // `this`, `.`, `../`
  }
  if (path.depth === 0 && !isScoped(path)) {
    for (let frame = scope.params; frame !== undefined; frame = frame.parent) {
      if (frame.value.has(first)) {
        return resolveTail(frame.value.get(first), path.tail);
      }
    }
    if (first === RUN_VARIABLE && scope.state.run !== undefined) {
      return resolveTail(scope.state.run, path.tail);
    }
  }
  return resolveTail(getOwn(frameAt(scope.context, path.depth)?.value, first), path.tail);
}

function resolveTail(value: unknown, tail: readonly string[]): unknown {
  let current = value;
  for (const segment of tail) {
    current = getOwn(current, segment);
  }
  return current;
}
