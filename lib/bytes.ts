/**
 * Bytes ↔ text in the encodings the engine's tools speak (`utf8`, `base64`),
 * with only Web APIs (no `node:buffer`).
 */
export type TextEncoding = "utf8" | "base64";

const CHUNK = 0x8000;

/** Decodes `text` written in `encoding` into bytes. */
export function textToBytes(text: string, encoding: TextEncoding): Uint8Array {
  if (encoding === "utf8") {
    return new TextEncoder().encode(text);
  }
  const binary = atob(text.replace(/\s+/g, ""));
  const bytes = new Uint8Array(binary.length);
  for (let i = 0; i < binary.length; i += 1) {
    bytes[i] = binary.charCodeAt(i);
  }
  return bytes;
}

/** Encodes bytes as text in `encoding` (invalid UTF-8 becomes U+FFFD). */
export function bytesToText(bytes: Uint8Array, encoding: TextEncoding): string {
  if (encoding === "utf8") {
    return new TextDecoder().decode(bytes);
  }
  let binary = "";
  for (let i = 0; i < bytes.length; i += CHUNK) {
    binary += String.fromCharCode(...bytes.subarray(i, i + CHUNK));
  }
  return btoa(binary);
}
