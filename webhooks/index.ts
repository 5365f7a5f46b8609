/** Webhooks: how each scheme verifies a delivery, and the event a verified one becomes (docs/api.md, "POST /v1/hooks/{id}"). */
export { toWebhookEvent } from "./delivery.ts";
export {
  HMAC_SIGNATURE_HEADER,
  HMAC_TIMESTAMP_HEADER,
  SCHEMES,
  type SignedDelivery,
  type VerifyOptions,
} from "./schemes.ts";
