export const ROLES = ["reader", "runner", "approver", "author", "admin"] as const;
export type Role = (typeof ROLES)[number];

/** Who calls: a token (from API_TOKENS: admin; or one made by POST /v1/tokens), or a Cloudflare Access identity. */
export type Principal =
  | { kind: "token"; token_id: string; name: string; roles: Role[]; workflows: string[] | null; created_by: string }
  | { kind: "access"; email: string; groups: string[]; roles: Role[]; workflows: string[] | null; created_by: string };
// `created_by` is the legacy string kept on records (`token:<16 hex>` for API_TOKENS tokens, `token:<token_id>`
// for stored tokens, `access:<email>`). `workflows: null` means every workflow.

/** What signed entries an outside call causes carry as `by` (schemas/journal-bodies.ts: `By`). */
export type By = { token_id: string; name: string } | { email: string } | { link: string; approver: string };

export function byOf(principal: Principal): By {
  return principal.kind === "token"
    ? { token_id: principal.token_id, name: principal.name }
    : { email: principal.email };
}
