import { canonicalJson, canonicalString } from "./canonical.ts";
import { base64UrlDecode, base64UrlEncode, toHex } from "./encoding.ts";

/**
 * Sealed members (docs/journal.md, "Sealed values and erasure"): a body
 * member that holds run data (an input, an output, an answer) is signed by
 * its digest, not by its value, so the value can later be erased and the
 * entry still verifies.
 *
 * ```
 * served body = body + { "$sealed": { <pointer>: "sha256:<hex>", … }, "$salt": <base64url of 16 bytes> }
 * signed body = served body − every sealed pointer's value − "$salt"
 * digest      = "sha256:" + hex(SHA-256(UTF-8(JCS([salt, pointer, value]))))
 * ```
 *
 * Pointers are RFC 6901 JSON Pointers into the body, each naming a member of
 * an object (never an array element: removing one would move the others).
 * An erased entry has neither its sealed values nor its salt.
 */

/** The member of a body that maps each sealed pointer to its digest (signed). */
export const SEALED_MEMBER = "$sealed";
/** The member of a body that holds the salt of its digests (not signed; erased with the values). */
export const SALT_MEMBER = "$salt";
/** Bytes of a salt. */
export const SALT_BYTES = 16;

const DIGEST = /^sha256:[0-9a-f]{64}$/;

type Body = Record<string, unknown>;

/** A body split for signing: what is signed, and what is stored and served. */
export interface SealedBody {
  signed: Body;
  /** The canonical JSON of `signed`. */
  signedText: string;
  /** The served body as JSON text (its members in no particular order). */
  servedText: string;
}

/**
 * Seals the members of `body` at `pointers` (those present; a pointer whose
 * member is absent is left out) with `salt`. Null when none is present: the
 * body is signed as it is.
 */
export async function sealBody(body: Body, pointers: readonly string[], salt: Uint8Array): Promise<SealedBody | null> {
  const present: { pointer: string; tokens: string[]; text: string }[] = [];
  for (const pointer of pointers) {
    const tokens = parsePointer(pointer);
    const found = tokens === null ? undefined : memberAt(body, tokens);
    if (tokens !== null && found !== undefined) {
      present.push({ pointer, tokens, text: canonicalJson(found, `$.body${pointerPath(tokens)}`) });
    }
  }
  if (present.length === 0) {
    return null;
  }
  const saltText = base64UrlEncode(salt);
  const digests = await Promise.all(present.map(({ pointer, text }) => digestOf(saltText, pointer, text)));
  let signed: Body = body;
  for (const { tokens } of present) {
    signed = withoutMember(signed, tokens);
  }
  signed = { ...signed, [SEALED_MEMBER]: Object.fromEntries(present.map(({ pointer }, i) => [pointer, digests[i]])) };
  const signedText = canonicalJson(signed, "$.body");
  // Top-level members go in front of the signed text as they were canonicalized for their digest;
  // a nested one needs the body written again.
  const servedText = present.every(({ tokens }) => tokens.length === 1)
    ? `{"${SALT_MEMBER}":"${saltText}",${present.map(({ tokens, text }) => `${canonicalString(tokens[0] ?? "", "$.body")}:${text}`).join(",")},${signedText.slice(1)}`
    : canonicalJson({ ...body, [SEALED_MEMBER]: signed[SEALED_MEMBER], [SALT_MEMBER]: saltText }, "$.body");
  return { signed, signedText, servedText };
}

/** A fresh salt. */
export function newSalt(): Uint8Array {
  return crypto.getRandomValues(new Uint8Array(SALT_BYTES));
}

/** `"sha256:" + hex(SHA-256(JCS([salt, pointer, value])))`, the value given as its canonical JSON. */
async function digestOf(salt: string, pointer: string, valueText: string): Promise<string> {
  const text = `[${JSON.stringify(salt)},${canonicalString(pointer, "$.body.$sealed")},${valueText}]`;
  const digest = await crypto.subtle.digest("SHA-256", new TextEncoder().encode(text));
  return `sha256:${toHex(new Uint8Array(digest))}`;
}

/** What the verifier makes of a body's sealed members. */
export type SealedCheck =
  | { ok: true; signed: Body; present: string[]; erased: string[] }
  | { ok: false; reason: "malformed" | "bad_sealed_value"; detail: string };

/**
 * The verifier's rule for one body. A body without `$sealed` is signed as it
 * is (and may not carry `$salt`). With `$sealed`: each pointer is well formed
 * and names a member of an object; a sealed value that is present needs the
 * salt and must match its digest; one that is absent was erased. The signed
 * body is the body without the present values and without `$salt`.
 */
export async function checkSealed(body: Body): Promise<SealedCheck> {
  const hasSalt = Object.hasOwn(body, SALT_MEMBER);
  if (!Object.hasOwn(body, SEALED_MEMBER)) {
    return hasSalt
      ? { ok: false, reason: "malformed", detail: `the body has ${SALT_MEMBER} but no ${SEALED_MEMBER}` }
      : { ok: true, signed: body, present: [], erased: [] };
  }
  const read = readSealed(body);
  if (typeof read === "string") {
    return { ok: false, reason: "malformed", detail: read };
  }
  const salt = read.salt;
  let signed: Body = body;
  const present: string[] = [];
  const erased: string[] = [];
  for (const { pointer, tokens, digest } of read.members) {
    const value = memberAt(body, tokens);
    if (value === undefined) {
      erased.push(pointer);
      continue;
    }
    if (salt === null) {
      return { ok: false, reason: "bad_sealed_value", detail: `${pointer} has a value but the body has no salt` };
    }
    let text: string;
    try {
      text = canonicalJson(value, `$.body${pointerPath(tokens)}`);
    } catch (error) {
      return { ok: false, reason: "malformed", detail: error instanceof Error ? error.message : String(error) };
    }
    if ((await digestOf(salt, pointer, text)) !== digest) {
      return { ok: false, reason: "bad_sealed_value", detail: `the value at ${pointer} does not match its digest` };
    }
    present.push(pointer);
    signed = withoutMember(signed, tokens);
  }
  if (hasSalt) {
    const { [SALT_MEMBER]: _salt, ...rest } = signed;
    signed = rest;
  }
  return { ok: true, signed, present, erased };
}

/** `$sealed` and `$salt` read and checked, or what is wrong with them. */
function readSealed(
  body: Body,
): { salt: string | null; members: { pointer: string; tokens: string[]; digest: string }[] } | string {
  const sealed = body[SEALED_MEMBER];
  if (typeof sealed !== "object" || sealed === null || Array.isArray(sealed)) {
    return `${SEALED_MEMBER} is not an object of JSON Pointers to digests`;
  }
  const salt = Object.hasOwn(body, SALT_MEMBER) ? body[SALT_MEMBER] : null;
  if (salt !== null && !isSalt(salt)) {
    return `${SALT_MEMBER} is not base64url of ${SALT_BYTES} bytes`;
  }
  const members: { pointer: string; tokens: string[]; digest: string }[] = [];
  for (const [pointer, digest] of Object.entries(sealed)) {
    const tokens = parsePointer(pointer);
    if (tokens === null || tokens[0] === SEALED_MEMBER || tokens[0] === SALT_MEMBER) {
      return `${SEALED_MEMBER} names ${JSON.stringify(pointer)}, not a JSON Pointer to a member of the body`;
    }
    if (typeof digest !== "string" || !DIGEST.test(digest)) {
      return `${SEALED_MEMBER}[${JSON.stringify(pointer)}] is not "sha256:<64 hex>"`;
    }
    members.push({ pointer, tokens, digest });
  }
  const names = members.map(({ pointer }) => pointer);
  const nested = names.find((a) => names.some((b) => b !== a && a.startsWith(`${b}/`)));
  if (nested !== undefined) {
    return `${SEALED_MEMBER} names ${nested} inside another sealed member`;
  }
  return { salt, members };
}

function isSalt(value: unknown): value is string {
  if (typeof value !== "string") {
    return false;
  }
  try {
    return base64UrlDecode(value).length === SALT_BYTES;
  } catch {
    return false;
  }
}

/**
 * The body with every sealed value and the salt removed: an erased entry,
 * which verifies as it did (nothing signed changes). A body without
 * `$sealed` comes back as it is. Returns the pointers whose values it removed.
 */
export function eraseSealed(body: Body): { body: Body; removed: string[] } {
  const sealed = body[SEALED_MEMBER];
  if (typeof sealed !== "object" || sealed === null || Array.isArray(sealed)) {
    return { body, removed: [] };
  }
  let erased: Body = body;
  const removed: string[] = [];
  for (const pointer of Object.keys(sealed)) {
    const tokens = parsePointer(pointer);
    if (tokens !== null && memberAt(erased, tokens) !== undefined) {
      erased = withoutMember(erased, tokens);
      removed.push(pointer);
    }
  }
  const { [SALT_MEMBER]: _salt, ...rest } = erased;
  return { body: rest, removed };
}

/** RFC 6901 reference tokens of a pointer to a member (not the whole body), or null. */
export function parsePointer(pointer: string): string[] | null {
  if (!pointer.startsWith("/")) {
    return null;
  }
  const tokens = pointer.slice(1).split("/");
  if (tokens.some((token) => /~(?![01])/.test(token))) {
    return null;
  }
  return tokens.map((token) => token.replace(/~1/g, "/").replace(/~0/g, "~"));
}

/** The pointer of reference tokens (RFC 6901 escaping). */
export function toPointer(tokens: readonly (string | number)[]): string {
  return tokens.map((token) => `/${String(token).replace(/~/g, "~0").replace(/\//g, "~1")}`).join("");
}

function pointerPath(tokens: readonly string[]): string {
  return tokens.map((token) => (/^(0|[1-9]\d*)$/.test(token) ? `[${token}]` : `.${token}`)).join("");
}

/**
 * The value of the object member at `tokens`, or undefined when there is
 * none: every step before the last is an object member or an array index,
 * and the last names a member of an object (or, `indexLast`, may be an index too).
 */
function memberAt(body: Body, tokens: readonly string[], indexLast = false): unknown {
  let current: unknown = body;
  for (const [index, token] of tokens.entries()) {
    const last = index === tokens.length - 1 && !indexLast;
    if (Array.isArray(current) && !last && /^(0|[1-9]\d*)$/.test(token)) {
      current = current[Number(token)];
    } else if (isObject(current) && Object.hasOwn(current, token)) {
      current = current[token];
    } else {
      return undefined;
    }
  }
  return current;
}

/** A copy of `value` without the member at `tokens` (which exists), sharing everything off its path. */
function withoutMember<T>(value: T, tokens: readonly string[]): T {
  return withMember(value, tokens, undefined);
}

/**
 * A copy of `value` with the member at `tokens` set to `member` (removed when
 * undefined), sharing everything off its path; every step but the last exists.
 */
function withMember<T>(value: T, tokens: readonly string[], member: unknown): T {
  const [token = "", ...rest] = tokens;
  if (Array.isArray(value)) {
    const copy: unknown[] = [...(value as unknown[])];
    copy[Number(token)] = withMember(copy[Number(token)], rest, member);
    return copy as T;
  }
  const object = value as Body;
  if (rest.length > 0) {
    return { ...object, [token]: withMember(object[token], rest, member) } as T;
  }
  const { [token]: _replaced, ...others } = object;
  return (member === undefined ? others : { ...others, [token]: member }) as T;
}

/**
 * A served body as its kind's schema describes it: without `$sealed` and
 * `$salt`, and each erased value as `null`. A body without `$sealed` comes
 * back as it is.
 */
export function openSealed(body: Body): Body {
  if (!Object.hasOwn(body, SEALED_MEMBER)) {
    return body;
  }
  const { [SEALED_MEMBER]: sealed, [SALT_MEMBER]: _salt, ...open } = body;
  let opened: Body = open;
  for (const pointer of isObject(sealed) ? Object.keys(sealed) : []) {
    const tokens = parsePointer(pointer);
    if (
      tokens !== null &&
      memberAt(opened, tokens) === undefined &&
      memberAt(opened, tokens.slice(0, -1), true) !== undefined
    ) {
      opened = withMember(opened, tokens, null);
    }
  }
  return opened;
}

function isObject(value: unknown): value is Body {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
