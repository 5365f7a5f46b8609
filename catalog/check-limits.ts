import { parseReference } from "../schemas/common.ts";
import { Limit, type LimitUse } from "../schemas/limits.ts";
import { CEL_SCOPES, checkCel, checkReference, type CheckContext } from "./checks.ts";

/**
 * Where limits are named (docs/definitions.md, "Limits"): on a workflow (its
 * runs), an action (its calls) or a model (its calls). Only an `llm` call
 * reports tokens, so only an `llm` action or a model may name a limit with a
 * `tokens` budget: on anything else that budget would count nothing.
 */
export type LimitSite = "workflow" | "action" | "llm" | "model";

const COUNTS_TOKENS: Record<LimitSite, boolean> = { workflow: false, action: false, llm: true, model: true };

/**
 * A site's `limits`: each names a limit registered or in the bundle, its `key`
 * compiles as CEL over `input` (and reads nothing else), and a `tokens` limit
 * stands only where tokens are reported. (At most 4, none twice: the schema.)
 */
export function checkLimitUses(
  uses: readonly LimitUse[] | undefined,
  path: string,
  site: LimitSite,
  check: CheckContext,
): void {
  uses?.forEach((use, i) => {
    const at = `${path}.${i}`;
    const before = check.problems.length;
    checkReference("limits", use.limit, `${at}.limit`, check.lookup, check.report);
    if (check.problems.length === before && !COUNTS_TOKENS[site]) {
      checkTokensCounted(use.limit, `${at}.limit`, site, check);
    }
    checkCel(use.key, `${at}.key`, check.report, CEL_SCOPES.limitKey);
  });
}

function checkTokensCounted(ref: string, path: string, site: LimitSite, check: CheckContext): void {
  const parsed = parseReference(ref);
  const limit =
    parsed === undefined ? undefined : Limit.safeParse(check.lookup.read("limits", parsed.id, parsed.version)).data;
  if (limit?.tokens !== undefined) {
    const here = site === "workflow" ? "a workflow's runs report" : "an action that is not llm reports";
    check.report(
      path,
      `the limit "${ref}" has a tokens budget, and ${here} no tokens: only llm calls do (name it on an llm action or a model)`,
      "definition.invalid_limit",
    );
  }
}
