import { By } from "../../schemas/auth.ts";

/**
 * Who caused an entry (docs/journal.md, "Who caused an entry"): the `by` an
 * outside call signs into the body, in words, as the verifier's report and
 * the console's timeline show it.
 */

/** The entries of a verified journal that carry `by`, in journal order. */
export interface CausedEntry {
  seq: number;
  kind: string;
  /** The `by` exactly as it was signed. */
  by: unknown;
  /** {@link describeBy} of it. */
  who: string;
}

/**
 * One principal in words: `token "ci" (tok_…)`, `Access user ops@example.com`,
 * or `approval link lnk_… for ops@example.com`. A `by` of none of the
 * documented shapes is shown as its JSON, so nothing signed is hidden.
 */
export function describeBy(by: unknown): string {
  const parsed = By.safeParse(by);
  if (!parsed.success) {
    return `an unrecognised principal ${JSON.stringify(by)}`;
  }
  const principal = parsed.data;
  if ("token_id" in principal) {
    return `token ${JSON.stringify(principal.name)} (${principal.token_id})`;
  }
  if ("email" in principal) {
    return `Access user ${principal.email}`;
  }
  return `approval link ${principal.link} for ${principal.approver}`;
}

/** The `by` of an entry's body, in words; null when the body has none. */
export function causedBy(body: Record<string, unknown>): string | null {
  return Object.hasOwn(body, "by") ? describeBy(body["by"]) : null;
}
