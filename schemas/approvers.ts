import { z } from "zod";
import { By, ROLES } from "./auth.ts";

/**
 * Who may answer a gate (docs/definitions.md, "Verified approvers"): a `human`
 * step's `implementation.approvers`, a high-risk action's `approvers`. A
 * principal matches when it has one of the `roles`, is one of the `tokens`
 * (by token id or name), or is one of the `emails` (a Cloudflare Access
 * identity, or the approver an approval link was made for). Absent: any
 * caller who may answer gates.
 */
export const Approvers = z
  .strictObject({
    roles: z.array(z.enum(ROLES)).min(1).max(5).optional(),
    tokens: z.array(z.string().min(1).max(128)).min(1).max(100).optional(),
    emails: z.array(z.email().max(254)).min(1).max(100).optional(),
  })
  .refine((approvers) => Object.keys(approvers).length > 0, {
    message: "name at least one of roles, tokens or emails (or leave approvers out)",
  });
export type Approvers = z.infer<typeof Approvers>;

/** Who answers a gate, as the coordinator checks it against the gate's approvers and records it. */
export const Answerer = z.strictObject({
  /** What the journal and the gate record (`by`, `answered_by`). */
  by: By,
  /** The caller's roles (none for an approval link: the link names its approver). */
  roles: z.array(z.enum(ROLES)),
});
export type Answerer = z.infer<typeof Answerer>;

/** An approval link of a gate (docs/api.md, "Approval links"): the secret is kept only as its SHA-256. */
export const GateLink = z.strictObject({
  /** Not secret: names the link in URLs and in the journal (`by.link`). */
  link_id: z.string(),
  approver: z.string(),
  secret_sha256: z.string().regex(/^[0-9a-f]{64}$/),
  created_at: z.number(),
  expires_at: z.number(),
  used_at: z.number().nullable(),
  created_by: By,
});
export type GateLink = z.infer<typeof GateLink>;
