import { verify as verifyGitHub } from "@octokit/webhooks-methods";
import { Webhook as StandardWebhook } from "standardwebhooks";
import { EngineError } from "../lib/errors.ts";
import type { Json } from "../schemas/common.ts";
import type { WebhookScheme } from "../schemas/webhooks.ts";

/**
 * How each scheme signs a delivery, and which id it gives it
 * (docs/api.md, "POST /v1/hooks/{id}"; the choice of library per scheme:
 * docs/security.md, "Webhooks"). Every comparison of a signature is constant
 * time: the library's, or `crypto.subtle.verify` with an HMAC key (workerd
 * compares the MACs with BoringSSL's `CRYPTO_memcmp`), never `===`.
 */

/** A delivery as it arrived: the raw body (never parsed before it is verified) and the headers. */
export interface SignedDelivery {
  body: Uint8Array;
  headers: Headers;
}

/** What a verifier needs besides the delivery: the resolved secret, the tolerance, and the receiver's clock. */
export interface VerifyOptions {
  secret: string;
  toleranceMs: number;
  now: number;
}

interface SchemeVerifier {
  /**
   * Checks the delivery's signature (and its timestamp, where the scheme signs one).
   * @throws EngineError `webhook.missing_signature`, `webhook.invalid_signature`,
   *   `webhook.stale` (all 401), `webhook.misconfigured` (a secret this scheme cannot use).
   */
  verify(delivery: SignedDelivery, options: VerifyOptions): Promise<void>;
  /** The delivery's own id by the scheme's convention, read once it is verified and its body parsed. */
  deliveryId(headers: Headers, body: Json): string | undefined;
  /** Whether the signed content carries a timestamp (so `tolerance_ms` applies). */
  timestamped: boolean;
}

/** The header of the plain `hmac-sha256` scheme: `sha256=<hex>`. */
export const HMAC_SIGNATURE_HEADER = "x-signature";
/** Its optional timestamp (Unix seconds); when sent, the MAC covers `<timestamp>.<body>`. */
export const HMAC_TIMESTAMP_HEADER = "x-signature-timestamp";

const SHA256_HEX = /^[0-9a-f]{64}$/i;

export const SCHEMES = {
  "standard-webhooks": {
    timestamped: true,
    verify: verifyStandardWebhooks,
    deliveryId: (headers) => headers.get("webhook-id") ?? undefined,
  },
  "github": {
    timestamped: false,
    verify: verifyGitHubDelivery,
    deliveryId: (headers) => headers.get("x-github-delivery") ?? undefined,
  },
  "stripe": {
    timestamped: true,
    verify: verifyStripe,
    deliveryId: (_headers, body) =>
      typeof body === "object" && body !== null && !Array.isArray(body) && typeof body.id === "string"
        ? body.id
        : undefined,
  },
  "hmac-sha256": {
    timestamped: true,
    verify: verifyPlainHmac,
    // A replay of a signed delivery carries the same MAC; any other delivery a different one.
    deliveryId: (headers) =>
      /^sha256=([0-9a-f]{64})$/i.exec(headers.get(HMAC_SIGNATURE_HEADER) ?? "")?.[1]?.toLowerCase(),
  },
} as const satisfies Record<WebhookScheme, SchemeVerifier>;

/**
 * Standard Webhooks, with its reference library (`standardwebhooks`):
 * `webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64> …` (any
 * may match) over `<id>.<timestamp>.<body>`, the secret `whsec_<base64>`. The
 * library signs (its secret decoding, signed content and encoding); the
 * signatures are compared here with `crypto.subtle.timingSafeEqual`, since its
 * `verify` checks a fixed 5-minute window against its own clock, not the
 * webhook's `tolerance_ms` against the receiver's.
 */
async function verifyStandardWebhooks(delivery: SignedDelivery, options: VerifyOptions): Promise<void> {
  const id = delivery.headers.get("webhook-id");
  const timestamp = delivery.headers.get("webhook-timestamp");
  const header = delivery.headers.get("webhook-signature");
  if (id === null || timestamp === null || header === null) {
    throw missing("webhook-id, webhook-timestamp and webhook-signature");
  }
  if (!/^\d{1,12}$/.test(timestamp)) {
    throw invalid(`webhook-timestamp "${timestamp.slice(0, 32)}" is not a Unix time in seconds`);
  }
  let library: StandardWebhook;
  try {
    library = new StandardWebhook(options.secret);
  } catch {
    throw new EngineError(
      "webhook.misconfigured",
      "the webhook's secret is not a Standard Webhooks secret (whsec_ then base64)",
    );
  }
  const encoder = new TextEncoder();
  const expected = encoder.encode(library.sign(id, new Date(Number(timestamp) * 1000), utf8(delivery.body)));
  const matches = header
    .split(" ")
    .map((signature) => encoder.encode(signature))
    .filter((given) => given.byteLength === expected.byteLength && crypto.subtle.timingSafeEqual(given, expected));
  if (matches.length === 0) {
    throw invalid("no v1 signature in webhook-signature matches the delivery");
  }
  checkTimestamp(timestamp, options);
}

/**
 * GitHub, with its own library (`@octokit/webhooks-methods`, whose web build
 * verifies with `crypto.subtle.verify`): `X-Hub-Signature-256: sha256=<hex>`,
 * the HMAC-SHA256 of the body under the secret. GitHub signs no timestamp.
 */
async function verifyGitHubDelivery(delivery: SignedDelivery, options: VerifyOptions): Promise<void> {
  const signature = delivery.headers.get("x-hub-signature-256");
  if (signature === null) {
    throw missing("X-Hub-Signature-256");
  }
  // The library takes any hex pairs it finds after "sha256="; only the documented form is let through.
  if (!/^sha256=[0-9a-f]{64}$/i.test(signature) || delivery.body.byteLength === 0) {
    throw invalid("X-Hub-Signature-256 is not sha256=<64 hex digits> over a body");
  }
  if (!(await verifyGitHub(options.secret, utf8(delivery.body), signature))) {
    throw invalid("X-Hub-Signature-256 does not match the delivery");
  }
}

/**
 * Stripe: `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…]`, the
 * HMAC-SHA256 of `<t>.<body>` under the endpoint's secret (`whsec_…`, used as
 * it is); any `v1` may match. Verified with WebCrypto (docs/security.md says
 * why not the Stripe SDK).
 */
async function verifyStripe(delivery: SignedDelivery, options: VerifyOptions): Promise<void> {
  const header = delivery.headers.get("stripe-signature");
  if (header === null) {
    throw missing("Stripe-Signature");
  }
  const parts = header.split(",").map((part) => part.trim().split("="));
  const timestamp = parts.find(([key]) => key === "t")?.[1];
  const signatures = parts.filter(([key, value]) => key === "v1" && SHA256_HEX.test(value ?? ""));
  if (timestamp === undefined || signatures.length === 0) {
    throw invalid("Stripe-Signature needs t=<timestamp> and at least one v1=<hex>");
  }
  const key = await hmacKey(options.secret);
  const signed = concat(new TextEncoder().encode(`${timestamp}.`), delivery.body);
  const results = await Promise.all(
    signatures.map(([, hex]) => crypto.subtle.verify("HMAC", key, fromHex(hex ?? ""), signed)),
  );
  if (!results.includes(true)) {
    throw invalid("no v1 signature in Stripe-Signature matches the delivery");
  }
  checkTimestamp(timestamp, options);
}

/**
 * The plain scheme: `X-Signature: sha256=<hex>`, the HMAC-SHA256 of the raw
 * body under the secret (UTF-8); with `X-Signature-Timestamp: <unix seconds>`,
 * of `<timestamp>.<body>`, and the timestamp must lie within the tolerance.
 */
async function verifyPlainHmac(delivery: SignedDelivery, options: VerifyOptions): Promise<void> {
  const signature = delivery.headers.get(HMAC_SIGNATURE_HEADER);
  if (signature === null) {
    throw missing("X-Signature");
  }
  const hex = /^sha256=([0-9a-f]{64})$/i.exec(signature)?.[1];
  if (hex === undefined) {
    throw invalid("X-Signature is not sha256=<64 hex digits>");
  }
  const timestamp = delivery.headers.get(HMAC_TIMESTAMP_HEADER);
  const signed = timestamp === null ? delivery.body : concat(new TextEncoder().encode(`${timestamp}.`), delivery.body);
  if (!(await crypto.subtle.verify("HMAC", await hmacKey(options.secret), fromHex(hex), signed))) {
    throw invalid("X-Signature does not match the delivery");
  }
  if (timestamp !== null) {
    checkTimestamp(timestamp, options);
  }
}

/** A signed timestamp (Unix seconds) must lie within `toleranceMs` of the receiver's clock, either way. */
function checkTimestamp(text: string, options: VerifyOptions): void {
  if (!/^\d{1,12}$/.test(text)) {
    throw invalid(`the signed timestamp "${text.slice(0, 32)}" is not a Unix time in seconds`);
  }
  const skew = Math.abs(options.now - Number(text) * 1000);
  if (skew > options.toleranceMs) {
    throw new EngineError(
      "webhook.stale",
      `the delivery was signed ${Math.round(skew / 1000)} s from now, more than the tolerance of ${options.toleranceMs} ms`,
    );
  }
}

async function hmacKey(secret: string): Promise<CryptoKey> {
  return crypto.subtle.importKey("raw", new TextEncoder().encode(secret), { name: "HMAC", hash: "SHA-256" }, false, [
    "verify",
  ]);
}

/** The bytes of a hex string already checked to be whole bytes. */
function fromHex(hex: string): Uint8Array<ArrayBuffer> {
  const bytes = new Uint8Array(hex.length / 2);
  for (let i = 0; i < bytes.length; i += 1) {
    bytes[i] = Number.parseInt(hex.slice(i * 2, i * 2 + 2), 16);
  }
  return bytes;
}

function concat(head: Uint8Array, tail: Uint8Array): Uint8Array<ArrayBuffer> {
  const joined = new Uint8Array(head.byteLength + tail.byteLength);
  joined.set(head, 0);
  joined.set(tail, head.byteLength);
  return joined;
}

/**
 * The body as text for the libraries that take a string: exact UTF-8 (a
 * leading BOM kept, so the text encodes back to the same bytes); a body that
 * is not UTF-8 cannot carry their signature.
 */
function utf8(body: Uint8Array): string {
  try {
    return new TextDecoder("utf-8", { fatal: true, ignoreBOM: true }).decode(body);
  } catch {
    throw invalid("the body is not UTF-8 text");
  }
}

function missing(headers: string): EngineError {
  return new EngineError("webhook.missing_signature", `the delivery has no ${headers} header`);
}

function invalid(reason: string): EngineError {
  return new EngineError("webhook.invalid_signature", `the signature is not valid: ${reason}`);
}
