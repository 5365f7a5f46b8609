import type { z } from "zod";
import { EngineError, type ErrorDetail } from "./errors.ts";

/** Zod issues as details with dotted paths (`workflows.0.nodes.fetch.task`). */
export function issuesToDetails(issues: readonly z.core.$ZodIssue[], basePath = ""): ErrorDetail[] {
  return issues.flatMap((issue) => {
    // A union that failed on every branch: the branch's own issues say more.
    if (issue.code === "invalid_union" && issue.errors.length > 0) {
      const best = pickUnionBranch(issue.errors);
      if (best) {
        return issuesToDetails(best, joinPath(basePath, issue.path));
      }
    }
    // A record key that failed its own schema: say why, at the key's path.
    if (issue.code === "invalid_key" && issue.issues.length > 0) {
      return issue.issues.map((inner) => ({
        path: joinPath(basePath, issue.path),
        message: inner.message,
        code: "schema.invalid_key",
      }));
    }
    return [{ path: joinPath(basePath, issue.path), message: issue.message, code: `schema.${issue.code}` }];
  });
}

/** The branch that got furthest (its issues are deepest) is the one the user meant. */
function pickUnionBranch(branches: z.core.$ZodIssue[][]): z.core.$ZodIssue[] | undefined {
  let best: z.core.$ZodIssue[] | undefined;
  let bestDepth = -1;
  for (const branch of branches) {
    const depth = Math.max(...branch.map((issue) => issue.path.length));
    const wrongType = branch.every((issue) => issue.code === "invalid_type" && issue.path.length === 0);
    if (!wrongType && depth > bestDepth) {
      best = branch;
      bestDepth = depth;
    }
  }
  return best;
}

export function joinPath(basePath: string, path: readonly PropertyKey[]): string {
  return [basePath, ...path.map(String)].filter((part) => part.length > 0).join(".");
}

/**
 * Parses `value` with `schema` or throws a 400-class {@link EngineError}
 * (`code`) that lists every problem with its path.
 */
export function parseOrThrow<T extends z.ZodType>(schema: T, value: unknown, code: string, what: string): z.infer<T> {
  const result = schema.safeParse(value);
  if (result.success) {
    return result.data;
  }
  const details = issuesToDetails(result.error.issues);
  throw EngineError.terminal(code, `${what} is invalid: ${summarize(details)}`, details);
}

/** The first problem, and how many more: a message that fits on a line. */
export function summarize(details: readonly ErrorDetail[]): string {
  const [first] = details;
  if (!first) {
    return "no details";
  }
  const where = first.path.length > 0 ? `${first.path}: ` : "";
  const more = details.length > 1 ? ` (and ${details.length - 1} more)` : "";
  return `${where}${first.message}${more}`;
}
