import { EngineError } from "../errors.ts";
import { Jwks, PublicJwk } from "../../schemas/journal.ts";
import { base64Decode, base64UrlDecode, base64UrlEncode } from "./encoding.ts";

/**
 * Journal keys: the Ed25519 signing key (from the secret `JOURNAL_SIGNING_KEY`,
 * base64 of a PKCS#8 DER private key) and the public keys as JWKs. Only
 * WebCrypto is used, so this runs unchanged in workerd and in Node ≥ 22.
 */

/**
 * A WebCrypto key. Named through `crypto.subtle` rather than the global
 * `CryptoKey` type so that these modules type-check both against
 * `@cloudflare/workers-types` and against `@types/node` (the verifier CLI).
 */
export type WebCryptoKey = Awaited<ReturnType<typeof crypto.subtle.importKey>>;

/** The private half used to sign entries, with its public JWK and key id. */
export interface JournalSigningKey {
  /** RFC 7638 JWK thumbprint of the public key (base64url SHA-256). */
  kid: string;
  /** Non-extractable Ed25519 private key, usage `sign`. */
  privateKey: WebCryptoKey;
  /** The public key as served in the JWKS. */
  publicJwk: PublicJwk;
}

const ED25519 = { name: "Ed25519" } as const;

/**
 * Imports a PKCS#8 Ed25519 private key given as base64 (standard or url
 * alphabet, whitespace ignored; a PEM `-----BEGIN PRIVATE KEY-----` block is
 * accepted too). The key id is the RFC 7638 thumbprint of the public key.
 *
 * @throws EngineError `journal.bad_key` when the text is not base64 or not an Ed25519 PKCS#8 key.
 */
export async function importSigningKey(pkcs8Base64: string): Promise<JournalSigningKey> {
  const text = pkcs8Base64.replace(/-----(BEGIN|END) PRIVATE KEY-----/g, "").replace(/\s+/g, "");
  if (text === "") {
    throw new EngineError(
      "journal.bad_key",
      "JOURNAL_SIGNING_KEY is empty: expected base64 of a PKCS#8 Ed25519 private key",
    );
  }
  let der: Uint8Array<ArrayBuffer>;
  try {
    der = base64Decode(text);
  } catch {
    throw new EngineError(
      "journal.bad_key",
      "JOURNAL_SIGNING_KEY is not base64: expected base64 of a PKCS#8 Ed25519 private key",
    );
  }
  let extractable: WebCryptoKey;
  let privateKey: WebCryptoKey;
  try {
    extractable = await crypto.subtle.importKey("pkcs8", der, ED25519, true, ["sign"]);
    privateKey = await crypto.subtle.importKey("pkcs8", der, ED25519, false, ["sign"]);
  } catch (cause) {
    throw new EngineError(
      "journal.bad_key",
      `JOURNAL_SIGNING_KEY is not a PKCS#8 Ed25519 private key (${cause instanceof Error ? cause.message : String(cause)}); ` +
        "generate one with `openssl genpkey -algorithm ed25519 -outform DER | base64 -w0`",
      { cause },
    );
  }
  const exported = await crypto.subtle.exportKey("jwk", extractable);
  if (exported instanceof ArrayBuffer) {
    throw new EngineError("journal.bad_key", "JOURNAL_SIGNING_KEY could not be exported as a JWK");
  }
  const x = exported.x;
  if (exported.kty !== "OKP" || exported.crv !== "Ed25519" || typeof x !== "string") {
    throw new EngineError("journal.bad_key", "JOURNAL_SIGNING_KEY did not yield an Ed25519 public key");
  }
  const kid = await jwkThumbprint(x);
  return { kid, privateKey, publicJwk: { kty: "OKP", crv: "Ed25519", x, kid, alg: "EdDSA", use: "sig" } };
}

/**
 * RFC 7638 thumbprint of an Ed25519 public key: base64url(SHA-256 of
 * `{"crv":"Ed25519","kty":"OKP","x":"<x>"}`), the required members in
 * lexicographic order without whitespace.
 */
export async function jwkThumbprint(x: string): Promise<string> {
  const members = `{"crv":"Ed25519","kty":"OKP","x":${JSON.stringify(x)}}`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(members));
  return base64UrlEncode(new Uint8Array(digest));
}

/** The JWKS document (`GET /v1/journal-keys`) for the given public keys. */
export function toJwks(keys: PublicJwk[]): Jwks {
  return { keys: keys.map((key) => ({ ...key })) };
}

/**
 * Imports a public Ed25519 JWK for verification.
 *
 * @throws EngineError `journal.bad_key` when it is not an Ed25519 public key (32-byte `x`).
 */
export async function importVerifyKey(jwk: { kty?: unknown; crv?: unknown; x?: unknown }): Promise<WebCryptoKey> {
  if (jwk.kty !== "OKP" || jwk.crv !== "Ed25519" || typeof jwk.x !== "string") {
    throw new EngineError(
      "journal.bad_key",
      'not an Ed25519 public JWK: expected { "kty": "OKP", "crv": "Ed25519", "x": … }',
    );
  }
  let raw: Uint8Array<ArrayBuffer>;
  try {
    raw = base64UrlDecode(jwk.x);
  } catch {
    throw new EngineError("journal.bad_key", "the JWK member x is not base64url");
  }
  if (raw.length !== 32) {
    throw new EngineError("journal.bad_key", `the JWK member x is ${raw.length} bytes; an Ed25519 public key is 32`);
  }
  try {
    return await crypto.subtle.importKey("raw", raw, ED25519, true, ["verify"]);
  } catch (cause) {
    throw new EngineError(
      "journal.bad_key",
      `cannot import the Ed25519 public key: ${cause instanceof Error ? cause.message : String(cause)}`,
      {
        cause,
      },
    );
  }
}

/**
 * Reads a JWKS leniently for verification: keys of other types are ignored,
 * `alg`/`use` may be absent, and a key without `kid` is named by its
 * thumbprint. Returns the Ed25519 keys by `kid`.
 *
 * @throws EngineError `journal.bad_jwks` when the document is not `{ keys: [...] }`
 *   or an Ed25519 key in it is unusable.
 */
export async function readJwks(jwks: unknown): Promise<Map<string, WebCryptoKey>> {
  const keys: unknown = typeof jwks === "object" && jwks !== null ? Reflect.get(jwks, "keys") : undefined;
  if (!Array.isArray(keys)) {
    throw new EngineError("journal.bad_jwks", 'the JWKS is not a JSON object { "keys": [...] }');
  }
  const byKid = new Map<string, WebCryptoKey>();
  for (const [index, key] of keys.entries()) {
    if (typeof key !== "object" || key === null) {
      throw new EngineError("journal.bad_jwks", `JWKS keys[${index}] is not an object`);
    }
    const jwk = key as Record<string, unknown>;
    if (jwk["kty"] !== "OKP" || jwk["crv"] !== "Ed25519") {
      continue;
    }
    const usable = PublicJwk.partial({ alg: true, use: true, kid: true }).safeParse(jwk);
    if (!usable.success) {
      throw new EngineError(
        "journal.bad_jwks",
        `JWKS keys[${index}] is not a valid Ed25519 public key: ${usable.error.issues[0]?.message ?? "invalid"}`,
      );
    }
    let cryptoKey: WebCryptoKey;
    try {
      cryptoKey = await importVerifyKey(usable.data);
    } catch (error) {
      throw new EngineError(
        "journal.bad_jwks",
        `JWKS keys[${index}]: ${error instanceof Error ? error.message : String(error)}`,
      );
    }
    byKid.set(usable.data.kid ?? (await jwkThumbprint(usable.data.x)), cryptoKey);
  }
  return byKid;
}

/** Checks that a value is a JWKS in the served (strict) shape. */
export function isJwks(value: unknown): value is Jwks {
  return Jwks.safeParse(value).success;
}
