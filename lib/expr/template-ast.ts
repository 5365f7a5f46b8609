import type { AST } from "@handlebars/parser";

// The parser's AST as this renderer reads it, shared by the compile-time checks and rendering.

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
export function isScoped(path: AST.PathExpression): boolean {
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

/** A template that parses but uses something this renderer refuses. */
export class TemplateProblem extends Error {}

export function problem(message: string, node: AST.Node): TemplateProblem {
  return new TemplateProblem(`${message}${location(node)}`);
}

interface StatementNodes {
  ContentStatement: AST.ContentStatement;
  CommentStatement: AST.CommentStatement;
  MustacheStatement: AST.MustacheStatement;
  BlockStatement: AST.BlockStatement;
  DecoratorBlock: AST.BlockStatement;
  PartialStatement: AST.PartialStatement;
}

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

export const UNSUPPORTED_STATEMENTS: Readonly<Record<string, string>> = {
  Decorator: "decorators ({{*name}}) are not supported",
  PartialBlockStatement: "partial blocks ({{#> name}}…{{/name}}) are not supported; use {{> name}}",
};

export function partialName(node: AST.PartialStatement): string | undefined {
  const name = node.name as AST.Expression;
  if (isPath(name)) {
    return name.data || typeof name.head !== "string" ? undefined : name.original;
  }
  return LITERAL_TYPES.has(name.type) && name.type !== "UndefinedLiteral" && name.type !== "NullLiteral"
    ? String((name as { value?: unknown }).value)
    : undefined;
}
