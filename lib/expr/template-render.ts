import type { AST } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { MAX_PARTIAL_DEPTH, MAX_TEMPLATE_OUTPUT, TEMPLATE_CHARS_PER_RENDER_STEP } from "./template-types.ts";
import {
  emit,
  getOwn,
  indentLines,
  isEmpty,
  isPlainObject,
  isTruthy,
  iterationEntries,
  joinItems,
  lengthOf,
  ownKeys,
  renderValue,
  toJson,
  urlEncode,
  UrlEncodedText,
} from "./template-values.ts";
import {
  type Callable,
  handlerFor,
  hasArguments,
  hashPairs,
  inverseOf,
  isRawBlock,
  isScoped,
  LITERAL_TYPES,
  location,
  partialName,
  programOf,
  simpleName,
  type StatementHandlers,
} from "./template-ast.ts";
import {
  chargeSteps,
  contextAt,
  type DataFrame,
  findParam,
  findPartial,
  type HashArgs,
  type HelperSpec,
  requirePresent,
  type Scope,
  unresolved,
  withContext,
  withParams,
} from "./template-scope.ts";

// The helpers (see the table at the top of `template.ts`) and the interpreter: statements and expressions.

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

// ───────────────────────────── rendering: statements ─────────────────────────────

const renderers: StatementHandlers<string, Scope> = {
  ContentStatement: (node) => node.value,
  CommentStatement: () => "",
  MustacheStatement: (node, scope) => {
    const value = mustacheValue(node, scope);
    if (value === undefined && scope.state.strict && calleeOf(node, scope) === undefined) {
      throw unresolved(node.path, scope.state.root);
    }
    const substitute = scope.state.substitute;
    return substitute === undefined ? emit(value, node.escaped, scope.state.escape) : substitute(renderValue(value));
  },
  BlockStatement: renderBlock,
  DecoratorBlock: () => "", // inline partials are collected by renderProgram
  PartialStatement: renderPartial,
};

export function renderProgram(program: AST.Program | undefined, scope: Scope): string {
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
