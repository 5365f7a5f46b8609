import type { Expr, SourceInfo } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { childExprs } from "./cel-ast.ts";
import { CEL_ITERATION_FUNCTION } from "./cel-budget.ts";
import { env, PLANNER_CALLS } from "./cel-env.ts";

// The registration-time checks the lenient parser leaves to us: integer ranges and known functions.

const INT64_MIN_BIG = -(2n ** 63n);

const INT64_MAX_BIG = 2n ** 63n - 1n;

const UINT64_MAX_BIG = 2n ** 64n - 1n;

/** What the lenient parser accepts but CEL does not; returns a description or undefined. */
export function findStaticProblem(root: Expr, sourceInfo: SourceInfo | undefined): string | undefined {
  const stack: Expr[] = [root];
  for (let expr = stack.pop(); expr !== undefined; expr = stack.pop()) {
    const kind = expr.exprKind;
    switch (kind.case) {
      case "constExpr": {
        const constant = kind.value.constantKind;
        if (constant.case === "int64Value" && (constant.value < INT64_MIN_BIG || constant.value > INT64_MAX_BIG)) {
          return `integer literal out of range${at(expr, sourceInfo)}`;
        }
        if (constant.case === "uint64Value" && constant.value > UINT64_MAX_BIG) {
          return `unsigned integer literal out of range${at(expr, sourceInfo)}`;
        }
        break;
      }
      case "callExpr": {
        const call = kind.value;
        if (!isKnownFunction(call.function, call.target)) {
          const shown = call.target === undefined ? `${call.function}()` : `.${call.function}()`;
          return `unknown function ${shown} or wrong use of a macro${at(expr, sourceInfo)}`;
        }
        break;
      }
      default:
        break;
    }
    stack.push(...childExprs(expr));
  }
  return undefined;
}

function isKnownFunction(name: string, target: Expr | undefined): boolean {
  if (name === CEL_ITERATION_FUNCTION) {
    return false;
  }
  if (PLANNER_CALLS.has(name) || env.funcs.find(name) !== undefined) {
    return true;
  }
  // `strings.quote(x)` parses as method `quote` on the identifier `strings`.
  const qualifier = target === undefined ? undefined : qualifiedName(target);
  return qualifier !== undefined && env.funcs.find(`${qualifier}.${name}`) !== undefined;
}

function qualifiedName(expr: Expr): string | undefined {
  const kind = expr.exprKind;
  if (kind.case === "identExpr") {
    return kind.value.name;
  }
  if (kind.case === "selectExpr" && kind.value.operand !== undefined) {
    const operand = qualifiedName(kind.value.operand);
    return operand === undefined ? undefined : `${operand}.${kind.value.field}`;
  }
  return undefined;
}

/** Type names CEL binds as values (`type(x) == int`): identifiers that are not variables. */
const TYPE_IDENTIFIERS: ReadonlySet<string> = new Set([
  "bool",
  "bytes",
  "double",
  "dyn",
  "int",
  "list",
  "map",
  "null_type",
  "string",
  "type",
  "uint",
]);

/**
 * The variables an expression reads, in order of first use: its identifiers,
 * less those a comprehension binds (`x` in `items.all(x, x > 0)`), type names
 * and the qualifier of a namespaced function (`strings` in `strings.quote(s)`).
 * Registration compares them with the variables the expression's context binds.
 */
export function freeVariables(root: Expr): string[] {
  const found = new Set<string>();
  visitFree(root, (name) => found.add(name));
  return [...found];
}

/** The fields an expression selects on the free variable `name` (`id` in `run.id`), in order of first use. */
export function fieldsSelected(root: Expr, name: string): string[] {
  const found = new Set<string>();
  visitFree(root, (variable, field) => {
    if (variable === name && field !== undefined) {
      found.add(field);
    }
  });
  return [...found];
}

/** Calls `visit` for each read of a free variable, with the field selected on it when the read is `name.field`. */
function visitFree(root: Expr, visit: (name: string, field: string | undefined) => void): void {
  const stack: { expr: Expr; bound: ReadonlySet<string> }[] = [{ expr: root, bound: new Set() }];
  const isFree = (name: string, bound: ReadonlySet<string>) => !bound.has(name) && !TYPE_IDENTIFIERS.has(name);
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    const { expr, bound } = item;
    const kind = expr.exprKind;
    const operand = kind.case === "selectExpr" ? kind.value.operand?.exprKind : undefined;
    if (kind.case === "selectExpr" && operand?.case === "identExpr" && isFree(operand.value.name, bound)) {
      visit(operand.value.name, kind.value.field);
    } else if (kind.case === "identExpr") {
      if (isFree(kind.value.name, bound)) {
        visit(kind.value.name, undefined);
      }
    } else if (kind.case === "comprehensionExpr") {
      const c = kind.value;
      const inLoop = new Set([...bound, c.iterVar, c.iterVar2, c.accuVar].filter((name) => name !== ""));
      const parts = [
        { part: c.iterRange, scope: bound },
        { part: c.accuInit, scope: bound },
        { part: c.loopCondition, scope: inLoop },
        { part: c.loopStep, scope: inLoop },
        { part: c.result, scope: new Set([...bound, c.accuVar]) },
      ];
      for (const { part, scope } of parts.reverse()) {
        if (part !== undefined) {
          stack.push({ expr: part, bound: scope });
        }
      }
    } else {
      stack.push(...childrenOf(expr).map((child) => ({ expr: child, bound })));
    }
  }
}

/** The subexpressions the variable scan walks: all, but the namespace of a namespaced function (`strings` in `strings.quote(s)`). */
function childrenOf(expr: Expr): Expr[] {
  const kind = expr.exprKind;
  if (kind.case === "callExpr" && kind.value.target !== undefined) {
    const qualifier = qualifiedName(kind.value.target);
    if (qualifier !== undefined && env.funcs.find(`${qualifier}.${kind.value.function}`) !== undefined) {
      return [...kind.value.args].reverse();
    }
  }
  return childExprs(expr).reverse();
}

export function at(expr: Expr, sourceInfo: SourceInfo | undefined): string {
  const offset = sourceInfo?.positions[Number(expr.id)];
  return offset === undefined ? "" : ` at character ${offset + 1}`;
}
