import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";

/**
 * The direct subexpressions of a parsed CEL expression, in source order: a
 * select's operand, a call's target and arguments, list elements, map keys
 * and values, a comprehension's parts. The one description of the tree's
 * shape that the registration checks, the variable scan and the budget's
 * instrumentation walk (each iteratively: depth is the parser's to bound).
 */
export function childExprs(expr: Expr): Expr[] {
  const kind = expr.exprKind;
  switch (kind.case) {
    case "selectExpr":
      return defined([kind.value.operand]);
    case "callExpr":
      return defined([kind.value.target, ...kind.value.args]);
    case "listExpr":
      return [...kind.value.elements];
    case "structExpr":
      return kind.value.entries.flatMap((entry) =>
        defined([entry.keyKind.case === "mapKey" ? entry.keyKind.value : undefined, entry.value]),
      );
    case "comprehensionExpr": {
      const c = kind.value;
      return defined([c.iterRange, c.accuInit, c.loopCondition, c.loopStep, c.result]);
    }
    default:
      return [];
  }
}

function defined(exprs: (Expr | undefined)[]): Expr[] {
  return exprs.filter((expr): expr is Expr => expr !== undefined);
}
