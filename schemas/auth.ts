import { z } from "zod";

/**
 * Who may do what (docs/security.md, "Roles"): the roles a token holds, the
 * principal a request resolves to, the `by` that signed entries an outside
 * call causes carry, and the bodies of the token routes.
 */

/** The roles, from least to most: `admin` implies every other. */
export const ROLES = ["reader", "runner", "approver", "author", "admin"] as const;
export const Role = z.enum(ROLES);
export type Role = z.infer<typeof Role>;

/**
 * A grant of workflows by id pattern: a workflow id where `*` stands for any
 * run of characters (`billing-*`, `report`). Only the characters of an id
 * and `*`, so the pattern is also a safe SQLite `GLOB` pattern.
 */
export const WORKFLOW_PATTERN = /^[a-z0-9_*-]{1,64}$/;
export const WorkflowPattern = z
  .string()
  .regex(WORKFLOW_PATTERN, "must be a workflow id in which * stands for any characters (e.g. billing-*)");

/** Who calls: a token (from API_TOKENS: admin; or one made by POST /v1/tokens), or a Cloudflare Access identity. */
export const Principal = z.discriminatedUnion("kind", [
  z.strictObject({
    kind: z.literal("token"),
    token_id: z.string(),
    name: z.string(),
    roles: z.array(Role),
    /** `null`: every workflow. */
    workflows: z.array(WorkflowPattern).nullable(),
    /** The name kept on run records: `token:<16 hex>` for API_TOKENS tokens, `token:<token_id>` for stored ones. */
    created_by: z.string(),
  }),
  z.strictObject({
    kind: z.literal("access"),
    email: z.string(),
    groups: z.array(z.string()),
    roles: z.array(Role),
    workflows: z.array(WorkflowPattern).nullable(),
    /** `access:<email>`. */
    created_by: z.string(),
  }),
]);
export type Principal = z.infer<typeof Principal>;

/** `GET /v1/whoami`: the principal the request authenticated as, its roles and the workflows it is limited to. */
export const Whoami = z.strictObject({ principal: Principal });
export type Whoami = z.infer<typeof Whoami>;

/** What signed entries an outside call causes carry as `by`: a token, an Access identity, or an approval link. */
export const By = z.union([
  z.strictObject({ token_id: z.string(), name: z.string() }),
  z.strictObject({ email: z.string() }),
  z.strictObject({ link: z.string(), approver: z.string() }),
]);
export type By = z.infer<typeof By>;

/** The `by` of the entries a principal's calls cause. */
export function byOf(principal: Principal): By {
  return principal.kind === "token"
    ? { token_id: principal.token_id, name: principal.name }
    : { email: principal.email };
}

/** `POST /v1/tokens`: a token's name, its roles, the workflows it is limited to, and when it expires. */
export const CreateTokenBody = z.strictObject({
  name: z.string().min(1).max(100),
  roles: z
    .array(Role)
    .min(1)
    .refine((roles) => new Set(roles).size === roles.length, "must not repeat a role"),
  /** Absent or null: every workflow. */
  workflows: z.array(WorkflowPattern).min(1).max(100).nullable().optional(),
  /** Absent or null: never. */
  expires_at: z.iso.datetime({ offset: true }).nullable().optional(),
});
export type CreateTokenBody = z.infer<typeof CreateTokenBody>;

/** A stored token as `GET /v1/tokens` shows it: never the secret, nor its hash. */
export const TokenView = z.strictObject({
  token_id: z.string(),
  name: z.string(),
  roles: z.array(Role),
  workflows: z.array(WorkflowPattern).nullable(),
  expires_at: z.string().nullable(),
  created_at: z.string(),
  /** Who made it (`created_by` of the admin's principal). */
  created_by: z.string(),
});
export type TokenView = z.infer<typeof TokenView>;

/** The answer to `POST /v1/tokens`: the token, and its secret, shown this once. */
export const CreatedToken = TokenView.pick({
  token_id: true,
  name: true,
  roles: true,
  workflows: true,
  expires_at: true,
}).extend({ token: z.string() });
export type CreatedToken = z.infer<typeof CreatedToken>;

export const TokenList = z.strictObject({ tokens: z.array(TokenView) });
export type TokenList = z.infer<typeof TokenList>;

/** A stored token as the catalog keeps it: the view and the keyed hash of its secret. */
export const TokenRecord = TokenView.extend({ hash: z.string().regex(/^[0-9a-f]{64}$/) });
export type TokenRecord = z.infer<typeof TokenRecord>;
