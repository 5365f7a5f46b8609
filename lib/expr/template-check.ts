import type { AST } from "@handlebars/parser";
import {
  blockParamsOf,
  type Callable,
  handlerFor,
  hasArguments,
  hashPairs,
  inverseOf,
  isPath,
  isRawBlock,
  LITERAL_TYPES,
  partialName,
  problem,
  programOf,
  simpleName,
  type StatementHandlers,
  UNSUPPORTED_STATEMENTS,
} from "./template-ast.ts";
import type { HelperSpec } from "./template-scope.ts";
import { HELPERS } from "./template-render.ts";

// The compile-time checks: what `compileTemplate` refuses, with the line it is on.

/** Block params statically in scope, innermost last. */
type ParamNames = readonly (readonly string[])[];

function isParamName(params: ParamNames, name: string): boolean {
  return params.some((names) => names.includes(name));
}

const checkers: StatementHandlers<void, ParamNames> = {
  ContentStatement: () => undefined,
  CommentStatement: () => undefined,
  MustacheStatement: checkMustache,
  BlockStatement: checkBlock,
  DecoratorBlock: checkInlinePartial,
  PartialStatement: checkPartial,
};

export function checkProgram(program: AST.Program | undefined, params: ParamNames): void {
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
