import { z } from "zod";
import { ROLES } from "./auth.ts";

const Roles = z.array(z.enum(ROLES)).min(1).max(ROLES.length);

/**
 * `ACCESS_ROLES` (docs/security.md, "Cloudflare Access"): the roles a verified
 * Access identity gets, by its email (compared without case) and by each of
 * its groups, plus `default` for every verified identity. An identity gets the
 * union of what matches; none matching leaves it without roles (403).
 */
export const AccessRoles = z.strictObject({
  default: Roles.optional(),
  emails: z.record(z.string().min(3).max(254), Roles).optional(),
  groups: z.record(z.string().min(1).max(256), Roles).optional(),
});
export type AccessRoles = z.infer<typeof AccessRoles>;

/** The claims Trellis reads of a verified Access application token (its signature, audience, issuer and expiry checked first). */
export const AccessClaims = z.looseObject({
  email: z.string().min(3).max(254),
  /** Group names, when the identity provider passes them (`groups`, or `custom.groups` for SAML and OIDC claims). */
  groups: z.array(z.string().max(256)).max(1000).optional(),
  custom: z.looseObject({ groups: z.array(z.string().max(256)).max(1000).optional() }).optional(),
});
export type AccessClaims = z.infer<typeof AccessClaims>;
