import type { Expr } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { childExprs } from "./cel-ast.ts";
import { CEL_ITERATION_BASE_COST_UNITS, CEL_ITERATION_FUNCTION } from "./cel-budget.ts";

// ───────────────────────────── AST instrumentation ─────────────────────────────

/**
 * Wraps the loop condition of every comprehension in `expr` in a call of
 * {@link CEL_ITERATION_FUNCTION} charging the node count of the loop's condition and
 * step, and returns the node count of the whole expression. Mutates `expr` (a fresh
 * parse, owned by the caller).
 */
export function instrumentComprehensions(expr: Expr): number {
  let nextId = maxId(expr) + 1n;
  const all = subexpressions(expr);
  for (const node of all) {
    if (node.exprKind.case !== "comprehensionExpr") {
      continue;
    }
    const loop = node.exprKind.value;
    const condition = loop.loopCondition;
    if (condition === undefined) {
      continue;
    }
    const nodes =
      subexpressions(condition).length + (loop.loopStep === undefined ? 0 : subexpressions(loop.loopStep).length);
    const weight = CEL_ITERATION_BASE_COST_UNITS + nodes;
    loop.loopCondition = iterationCall(nextId, condition, BigInt(weight));
    nextId += 2n;
  }
  return all.length;
}

function iterationCall(id: bigint, condition: Expr, weight: bigint): Expr {
  return {
    $typeName: "cel.expr.Expr",
    id,
    exprKind: {
      case: "callExpr",
      value: {
        $typeName: "cel.expr.Expr.Call",
        function: CEL_ITERATION_FUNCTION,
        args: [
          condition,
          {
            $typeName: "cel.expr.Expr",
            id: id + 1n,
            exprKind: {
              case: "constExpr",
              value: { $typeName: "cel.expr.Constant", constantKind: { case: "int64Value", value: weight } },
            },
          },
        ],
      },
    },
  };
}

function maxId(expr: Expr): bigint {
  let max = 0n;
  for (const node of subexpressions(expr)) {
    if (node.id > max) {
      max = node.id;
    }
  }
  return max;
}

/** `expr` and all its subexpressions, without recursion (depth is the parser's to bound). */
function subexpressions(root: Expr): Expr[] {
  const out: Expr[] = [];
  const stack: Expr[] = [root];
  for (let expr = stack.pop(); expr !== undefined; expr = stack.pop()) {
    out.push(expr);
    stack.push(...childExprs(expr));
  }
  return out;
}
