import { celEnv, type CelEnv, celFunc, type CelFunc, CelScalar } from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { ITERATION_FUNCTION, meterFunctions } from "./cel-budget.ts";
import { METERED_RE2 } from "./cel-re2.ts";
import { CODE_POINT_STRING_FUNCTIONS, LIST_FUNCTIONS } from "./cel-functions.ts";

// The CEL environment every expression is planned in: the engine's functions, metered.

const { INT, DOUBLE } = CelScalar;

/** `int op double` and `double op int` overloads, computed in double (see the header of `cel.ts`). */
const mixedArithmetic = [
  celFunc("_+_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) + r),
  celFunc("_+_", [DOUBLE, INT], DOUBLE, (l, r) => l + Number(r)),
  celFunc("_-_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) - r),
  celFunc("_-_", [DOUBLE, INT], DOUBLE, (l, r) => l - Number(r)),
  celFunc("_*_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) * r),
  celFunc("_*_", [DOUBLE, INT], DOUBLE, (l, r) => l * Number(r)),
  celFunc("_/_", [INT, DOUBLE], DOUBLE, (l, r) => Number(l) / r),
  celFunc("_/_", [DOUBLE, INT], DOUBLE, (l, r) => l / Number(r)),
];

/**
 * The engine's CEL functions, unmetered: the library's `strings` extension with the
 * replacements of `cel-functions.ts` (code-point positions, linear `replace`, flat list
 * `+`) and the mixed arithmetic above. Exported for the conformance tests.
 */
export const CEL_FUNCTIONS: readonly CelFunc[] = [
  ...strings,
  ...mixedArithmetic,
  ...CODE_POINT_STRING_FUNCTIONS,
  ...LIST_FUNCTIONS,
];

/** The same functions and the standard library, each charged to the evaluation's meter (`cel-budget.ts`). */
export const env: CelEnv = celEnv({
  funcs: [...meterFunctions(celEnv({ funcs: [...CEL_FUNCTIONS] }).funcs), ITERATION_FUNCTION],
  re2: METERED_RE2,
});

/** Calls the planner evaluates itself; they never appear in the function resolver. */
export const PLANNER_CALLS = new Set([
  "_[_]",
  "_[?_]",
  "_?._",
  "_?_:_",
  "_&&_",
  "_||_",
  "@not_strictly_false",
  "__not_strictly_false__",
]);
