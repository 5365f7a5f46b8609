import { EngineError } from "../errors.ts";

/**
 * RFC 8785 JSON Canonicalization Scheme (JCS).
 *
 * - Objects: members sorted by their names compared as arrays of UTF-16 code
 *   units (what `Array.prototype.sort` does on strings); no whitespace.
 * - Numbers: ECMAScript `Number.prototype.toString` (RFC 8785 §3.2.2.3), `-0` as `0`.
 * - Strings: JSON escaping as ECMAScript `JSON.stringify` does it (`\b \t \n
 *   \f \r \" \\`, other controls as lowercase `\u00XX`, everything else literal).
 *
 * Values are what `JSON.stringify` would write: `toJSON` is honoured (so a
 * `Date` becomes its ISO string) and object members whose value is
 * `undefined` are left out. Everything that JSON cannot represent faithfully
 * is rejected with an {@link EngineError} `journal.not_canonicalizable`:
 * non-finite numbers, `undefined`/functions/symbols in arrays or at the top,
 * `bigint`, `Map`/`Set`/typed arrays and other non-plain objects, cycles,
 * and strings with lone surrogates (not I-JSON, RFC 7493, which JCS requires).
 */
export function canonicalJson(value: unknown): string {
  const parts: string[] = [];
  write(value, "", "$", parts, new Set<object>());
  return parts.join("");
}

/** `canonicalJson(value)` encoded as UTF-8: the exact bytes that are hashed and signed. */
export function canonicalBytes(value: unknown): Uint8Array<ArrayBuffer> {
  // Copied into a fresh ArrayBuffer: some TextEncoder typings allow a shared buffer, which WebCrypto refuses.
  return new Uint8Array(new TextEncoder().encode(canonicalJson(value)));
}

function fail(path: string, what: string): never {
  throw new EngineError("journal.not_canonicalizable", `cannot canonicalize ${path}: ${what}`);
}

function write(
  input: unknown,
  key: string,
  path: string,
  out: string[],
  ancestors: Set<object>,
  callToJson = true,
): void {
  const value = callToJson ? applyToJson(input, key) : input;
  if (typeof value === "string") {
    out.push(quote(value, path));
    return;
  }
  if (typeof value === "number") {
    if (!Number.isFinite(value)) {
      fail(path, `${String(value)} is not a JSON number`);
    }
    // ES Number-to-String is exactly RFC 8785's number serialization; String(-0) is "0".
    out.push(String(value));
    return;
  }
  if (typeof value === "boolean") {
    out.push(value ? "true" : "false");
    return;
  }
  if (typeof value === "bigint") {
    fail(path, "bigint is not a JSON value (convert it to a number or a string)");
  }
  if (typeof value !== "object") {
    fail(path, `${typeof value} is not a JSON value`);
  }
  if (value === null) {
    out.push("null");
    return;
  }
  if (ancestors.has(value)) {
    fail(path, "cyclic structure");
  }
  ancestors.add(value);
  if (Array.isArray(value)) {
    writeArray(value, path, out, ancestors);
  } else {
    writeObject(value, path, out, ancestors);
  }
  ancestors.delete(value);
}

function writeArray(value: unknown[], path: string, out: string[], ancestors: Set<object>): void {
  out.push("[");
  for (let i = 0; i < value.length; i++) {
    if (i > 0) {
      out.push(",");
    }
    write(value[i], String(i), `${path}[${i}]`, out, ancestors);
  }
  out.push("]");
}

function writeObject(value: object, path: string, out: string[], ancestors: Set<object>): void {
  const tag = Object.prototype.toString.call(value);
  if (tag !== "[object Object]") {
    fail(path, `${tag.slice(8, -1)} is not a plain JSON object`);
  }
  // Members JSON.stringify would drop (undefined, functions, symbols) are left out.
  const members: [string, unknown][] = [];
  for (const name of Object.keys(value)) {
    const member = applyToJson(Reflect.get(value, name), name);
    if (member !== undefined && typeof member !== "function" && typeof member !== "symbol") {
      members.push([name, member]);
    }
  }
  members.sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  out.push("{");
  members.forEach(([name, member], i) => {
    if (i > 0) {
      out.push(",");
    }
    const childPath = `${path}.${name}`;
    out.push(quote(name, childPath), ":");
    writeResolved(member, childPath, out, ancestors);
  });
  out.push("}");
}

/** Writes a value whose `toJSON` has already been applied. */
function writeResolved(value: unknown, path: string, out: string[], ancestors: Set<object>): void {
  write(value, "", path, out, ancestors, false);
}

/** Calls `value.toJSON(key)` when there is one, as `JSON.stringify` does. */
function applyToJson(value: unknown, key: string): unknown {
  if (typeof value === "object" && value !== null) {
    const toJson: unknown = Reflect.get(value, "toJSON");
    if (typeof toJson === "function") {
      const result: unknown = Reflect.apply(toJson, value, [key]);
      return result;
    }
  }
  return value;
}

function quote(text: string, path: string): string {
  if (!text.isWellFormed()) {
    fail(path, "string contains a lone UTF-16 surrogate (not I-JSON)");
  }
  // Well-formed JSON.stringify (ES2019) escapes exactly as RFC 8785 §3.2.2.2 requires.
  return JSON.stringify(text);
}

/**
 * The deepest nesting a value may have and still be journaled: arrays and
 * objects count one level each, so a scalar is depth 0 and `[[1]]` depth 2.
 * {@link canonicalJson} and the rest of the engine recurse over values, and a
 * Worker's stack holds a few thousand frames; the API refuses deeper bodies at
 * ingress, and the executor fails a step whose output is deeper.
 */
export const MAX_CANONICAL_DEPTH = 128;

/** What keeps `value` out of a journal entry: where, and why. */
export interface CanonicalProblem {
  path: string;
  message: string;
}

/**
 * The first reason `value` cannot be canonicalized and signed, or `null`:
 * nesting deeper than `maxDepth`, a string or key with a lone UTF-16
 * surrogate, a number that is not finite, or something that is not JSON.
 * Iterative, so a value of any depth is checked without exhausting the
 * stack. Plain JSON data only (`toJSON` is not applied): task results and
 * outputs as they come off the wire.
 */
export function canonicalProblem(value: unknown, maxDepth = MAX_CANONICAL_DEPTH): CanonicalProblem | null {
  const stack: { value: unknown; path: string; depth: number }[] = [{ value, path: "$", depth: 0 }];
  while (stack.length > 0) {
    const item = stack.pop() as { value: unknown; path: string; depth: number };
    const problem = scalarProblem(item.value);
    if (problem !== undefined) {
      return { path: item.path, message: problem };
    }
    if (typeof item.value !== "object" || item.value === null) {
      continue;
    }
    if (item.depth >= maxDepth) {
      return { path: item.path, message: `nested deeper than ${maxDepth} levels` };
    }
    if (Array.isArray(item.value)) {
      item.value.forEach((member, index) =>
        stack.push({ value: member, path: `${item.path}[${index}]`, depth: item.depth + 1 }),
      );
      continue;
    }
    for (const [key, member] of Object.entries(item.value)) {
      if (!key.isWellFormed()) {
        return { path: item.path, message: "an object key contains a lone UTF-16 surrogate (not I-JSON)" };
      }
      if (member !== undefined) {
        // Left out by JSON.stringify and canonicalJson alike.
        stack.push({ value: member, path: `${item.path}.${key}`, depth: item.depth + 1 });
      }
    }
  }
  return null;
}

function scalarProblem(value: unknown): string | undefined {
  switch (typeof value) {
    case "string":
      return value.isWellFormed() ? undefined : "the string contains a lone UTF-16 surrogate (not I-JSON)";
    case "number":
      return Number.isFinite(value) ? undefined : `${String(value)} is not a JSON number`;
    case "boolean":
      return undefined;
    case "object":
      return value === null || Array.isArray(value) || Object.prototype.toString.call(value) === "[object Object]"
        ? undefined
        : "not a plain JSON object";
    default:
      return `${typeof value} is not a JSON value`;
  }
}
