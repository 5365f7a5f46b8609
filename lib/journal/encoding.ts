/** Byte encodings of the journal: unpadded base64url (signatures, keys), base64 (key files) and hex (hashes). */

/** Unpadded base64url of bytes (RFC 4648 §5). */
export function base64UrlEncode(bytes: Uint8Array): string {
  let binary = "";
  for (const byte of bytes) {
    binary += String.fromCharCode(byte);
  }
  return btoa(binary).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * Decodes strict, canonical, unpadded base64url: the only text accepted for a
 * byte string is the one {@link base64UrlEncode} writes for it (so no two
 * texts, such as ones differing in the unused low bits of the last
 * character, stand for the same signature).
 *
 * @throws Error when the text has characters outside the alphabet, an impossible length or non-zero padding bits.
 */
export function base64UrlDecode(text: string): Uint8Array<ArrayBuffer> {
  if (!/^[A-Za-z0-9_-]*$/.test(text) || text.length % 4 === 1) {
    throw new Error("invalid base64url");
  }
  const bytes = base64Decode(text);
  if (base64UrlEncode(bytes) !== text) {
    throw new Error("non-canonical base64url");
  }
  return bytes;
}

/** Decodes base64 (standard or url alphabet, padding optional). @throws Error when it is not base64. */
export function base64Decode(text: string): Uint8Array<ArrayBuffer> {
  const standard = text.replace(/-/g, "+").replace(/_/g, "/").replace(/=+$/, "");
  if (!/^[A-Za-z0-9+/]*$/.test(standard) || standard.length % 4 === 1) {
    throw new Error("invalid base64");
  }
  const binary = atob(standard + "=".repeat((4 - (standard.length % 4)) % 4));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i++) {
    bytes[i] = binary.charCodeAt(i);
  }
  return bytes;
}

/** Lowercase hexadecimal of bytes. */
export function toHex(bytes: Uint8Array): string {
  let hex = "";
  for (const byte of bytes) {
    hex += byte.toString(16).padStart(2, "0");
  }
  return hex;
}
