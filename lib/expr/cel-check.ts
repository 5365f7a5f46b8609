import { create } from "@bufbuild/protobuf";
import { type Expr, ExprSchema, type SourceInfo } from "@bufbuild/cel-spec/cel/expr/syntax_pb.js";
import { CEL_ITERATION_BASE_COST_UNITS, CEL_ITERATION_FUNCTION, env } from "./cel-budget.ts";

// Walks of a parsed CEL expression: the registration checks the lenient parser leaves to us,
// the variables it reads, and the budget's instrumentation. Each walk is iterative: depth is
// the parser's to bound.

/** Calls the planner evaluates itself; they never appear in the function resolver. */
const PLANNER_CALLS = new Set("_[_] _[?_] _?._ _?_:_ _&&_ _||_ @not_strictly_false __not_strictly_false__".split(" "));

/** Type names CEL binds as values (`type(x) == int`): identifiers that are not variables. */
const TYPE_IDENTIFIERS = new Set("bool bytes double dyn int list map null_type string type uint".split(" "));

/**
 * The direct subexpressions of `expr`, in source order: a select's operand, a call's
 * target and arguments, list elements, map keys and values, a comprehension's parts.
 */
function childExprs(expr: Expr): Expr[] {
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

/** The given roots and all their subexpressions, each before its own subexpressions. */
function subexpressions(...roots: (Expr | undefined)[]): Expr[] {
  const out: Expr[] = [];
  const stack = defined(roots);
  for (let expr = stack.pop(); expr !== undefined; expr = stack.pop()) {
    out.push(expr);
    stack.push(...childExprs(expr));
  }
  return out;
}

/** What the lenient parser accepts but CEL does not (integer ranges, unknown functions); a description or undefined. */
export function findStaticProblem(root: Expr, sourceInfo: SourceInfo | undefined): string | undefined {
  for (const expr of subexpressions(root)) {
    const kind = expr.exprKind;
    if (kind.case === "constExpr") {
      const constant = kind.value.constantKind;
      if (constant.case === "int64Value" && (constant.value < -(2n ** 63n) || constant.value >= 2n ** 63n)) {
        return `integer literal out of range${at(expr.id, sourceInfo)}`;
      }
      if (constant.case === "uint64Value" && constant.value >= 2n ** 64n) {
        return `unsigned integer literal out of range${at(expr.id, sourceInfo)}`;
      }
    } else if (kind.case === "callExpr" && !isKnownFunction(kind.value.function, kind.value.target)) {
      const shown = kind.value.target === undefined ? `${kind.value.function}()` : `.${kind.value.function}()`;
      return `unknown function ${shown} or wrong use of a macro${at(expr.id, sourceInfo)}`;
    }
  }
  return undefined;
}

/** ` at character N` for the expression `id`, or "" when its position is unknown. */
export function at(id: bigint | undefined, sourceInfo: SourceInfo | undefined): string {
  const offset = id === undefined ? undefined : sourceInfo?.positions[Number(id)];
  return offset === undefined ? "" : ` at character ${offset + 1}`;
}

function isKnownFunction(name: string, target: Expr | undefined): boolean {
  if (name === CEL_ITERATION_FUNCTION) {
    return false;
  }
  return PLANNER_CALLS.has(name) || env.funcs.find(name) !== undefined || isNamespaced(name, target);
}

/** Whether `target.name(…)` calls a namespaced function: `strings.quote(x)` parses as method `quote` on `strings`. */
function isNamespaced(name: string, target: Expr | undefined): boolean {
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

/**
 * The variables an expression reads, in order of first use (its identifiers, less those a
 * comprehension binds, type names and the qualifier of a namespaced function), and the
 * fields it selects on the variable `name` (`id` in `run.id`). Registration checks both
 * against what the expression's context binds.
 */
export function variablesRead(root: Expr, name: string): { variables: string[]; fields: string[] } {
  const variables = new Set<string>();
  const fields = new Set<string>();
  visitFree(root, (variable, field) => {
    variables.add(variable);
    if (variable === name && field !== undefined) {
      fields.add(field);
    }
  });
  return { variables: [...variables], fields: [...fields] };
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
      // All subexpressions but the namespace of a namespaced function (`strings` in `strings.quote(s)`).
      const namespaced = kind.case === "callExpr" && isNamespaced(kind.value.function, kind.value.target);
      const children = namespaced ? [...kind.value.args] : childExprs(expr);
      stack.push(...children.reverse().map((child) => ({ expr: child, bound })));
    }
  }
}

/**
 * Wraps the loop condition of every comprehension in `expr` in a call of
 * {@link CEL_ITERATION_FUNCTION} charging the node count of the loop's condition and
 * step, and returns the node count of the whole expression. Mutates `expr` (a fresh
 * parse, owned by the caller).
 */
export function instrumentComprehensions(expr: Expr): number {
  const all = subexpressions(expr);
  let nextId = all.reduce((max, node) => (node.id > max ? node.id : max), 0n) + 1n;
  for (const node of all) {
    const loop = node.exprKind.case === "comprehensionExpr" ? node.exprKind.value : undefined;
    if (loop?.loopCondition === undefined) {
      continue;
    }
    const weight = CEL_ITERATION_BASE_COST_UNITS + subexpressions(loop.loopCondition, loop.loopStep).length;
    const constant = { constantKind: { case: "int64Value" as const, value: BigInt(weight) } };
    const weightExpr = { id: nextId + 1n, exprKind: { case: "constExpr" as const, value: constant } };
    const call = { function: CEL_ITERATION_FUNCTION, args: [loop.loopCondition, weightExpr] };
    loop.loopCondition = create(ExprSchema, { id: nextId, exprKind: { case: "callExpr", value: call } });
    nextId += 2n;
  }
  return all.length;
}
