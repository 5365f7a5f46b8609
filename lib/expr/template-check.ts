import type { AST } from "@handlebars/parser";
import {
  blockParamsOf,
  type Callable,
  handlerFor,
  hasArguments,
  hashPairs,
  HELPERS,
  type HelperSpec,
  inverseOf,
  isPath,
  isRawBlock,
  LITERAL_TYPES,
  location,
  programOf,
  simpleName,
  type StatementHandlers,
} from "./template-render.ts";

// The compile-time checks: what `compileTemplate` refuses, with the line it is on. The
// renderer handles exactly what passes them.

/** A template that parses but uses something this renderer refuses. */
export class TemplateProblem extends Error {}

function problem(message: string, node: AST.Node): TemplateProblem {
  return new TemplateProblem(`${message}${location(node)}`);
}

/** Statements the parser builds that no template may use. */
const UNSUPPORTED_STATEMENTS: Readonly<Record<string, string>> = {
  PartialStatement: "partials ({{> name}}) are not supported",
  PartialBlockStatement: "partial blocks ({{#> name}}…{{/name}}) are not supported",
  Decorator: "decorators ({{*name}}) are not supported",
  DecoratorBlock: 'decorators are not supported ({{#*name}}…{{/name}}, inline partials {{#*inline "name"}} among them)',
};

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
  if (!hasArguments(node)) {
    checkExpression(node.path, params);
    return;
  }
  if (node.path.type === "SubExpression") {
    throw problem("a sub-expression cannot be called with arguments", node);
  }
  checkArguments(node, checkCallee(node, params, "inline"), params);
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
