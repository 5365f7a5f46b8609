import { z } from "zod";
import { DefinitionId, Description, MappingSource } from "./common.ts";

/**
 * Webhooks (docs/definitions.md, "Webhooks"; docs/api.md, "POST /v1/hooks/{id}"):
 * a signed delivery from outside, verified by its scheme and turned into an event.
 */

/**
 * How a delivery is signed: each scheme's headers and encoding are in
 * docs/api.md. `hmac-sha256` is the plain scheme for senders of our own:
 * `X-Signature: sha256=<hex>` over the raw body (or over `<timestamp>.<body>`
 * when `X-Signature-Timestamp` is sent).
 */
export const WEBHOOK_SCHEMES = ["standard-webhooks", "github", "stripe", "hmac-sha256"] as const;
export const WebhookScheme = z.enum(WEBHOOK_SCHEMES);
export type WebhookScheme = z.infer<typeof WebhookScheme>;

/** How far a signed timestamp may be from the receiver's clock, by default: 5 minutes, as every provider advises. */
export const DEFAULT_WEBHOOK_TOLERANCE_MS = 300_000;
/** The widest tolerance a webhook may set: one hour. */
export const MAX_WEBHOOK_TOLERANCE_MS = 3_600_000;

export const WebhookVerify = z.strictObject({
  scheme: WebhookScheme,
  /** `$env:NAME`: a workflow secret (`WORKFLOW_SECRETS`), resolved at each delivery. */
  secret: z.string().min(1),
  /** For schemes whose signature carries a timestamp. @default 300000 */
  tolerance_ms: z.number().int().min(1_000).max(MAX_WEBHOOK_TOLERANCE_MS).optional(),
});
export type WebhookVerify = z.infer<typeof WebhookVerify>;

/**
 * The event a verified delivery becomes. Each field is a mapping source over
 * `{ headers, body }` (header names in lower case, the body parsed as JSON):
 * `name` a literal event name or a source that yields one; `id` (default: the
 * delivery's own id by its scheme) and `data` (default: the body; a JSON value
 * whose leaves may be sources).
 */
export const WebhookEvent = z.strictObject({
  name: MappingSource,
  id: MappingSource.optional(),
  data: MappingSource.optional(),
});
export type WebhookEvent = z.infer<typeof WebhookEvent>;

export const Webhook = z.strictObject({
  id: DefinitionId,
  description: Description,
  verify: WebhookVerify,
  event: WebhookEvent,
});
export type Webhook = z.infer<typeof Webhook>;
