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
export function canonicalJson(value: unknown, path = "$"): string {
  return new CanonicalWriter(path).text(value);
}

/** A string as canonical JSON writes it; refuses one with a lone surrogate, naming `path`. */
export function canonicalString(text: string, path: string): string {
  return new CanonicalWriter(path).text(text);
}

/** `canonicalJson(value)` encoded as UTF-8: the exact bytes that are hashed and signed. */
export function canonicalBytes(value: unknown): Uint8Array<ArrayBuffer> {
  // Copied into a fresh ArrayBuffer: some TextEncoder typings allow a shared buffer, which WebCrypto refuses.
  return new Uint8Array(new TextEncoder().encode(canonicalJson(value)));
}

/**
 * One canonicalization. The path to the value being written is kept as a
 * stack of member names and indexes, and spelled out (`$.a[0].b`) only when
 * something fails: a journal entry has hundreds of members, and building
 * each one's path as text cost more than writing it.
 */
class CanonicalWriter {
  private readonly out: string[] = [];
  private readonly segments: (string | number)[] = [];
  private readonly ancestors = new Set<object>();
  /** How failures name the value written: `$`, or where it sits in a larger one. */
  private readonly root: string;

  constructor(root: string) {
    this.root = root;
  }

  text(value: unknown): string {
    this.write(value, "", true);
    return this.out.join("");
  }

  private fail(what: string): never {
    const path = this.segments.map((segment) => (typeof segment === "number" ? `[${segment}]` : `.${segment}`));
    throw new EngineError("journal.not_canonicalizable", `cannot canonicalize ${this.root}${path.join("")}: ${what}`);
  }

  private write(input: unknown, key: string, callToJson: boolean): void {
    const value = callToJson ? applyToJson(input, key) : input;
    if (typeof value === "string") {
      this.out.push(this.quote(value));
      return;
    }
    if (typeof value === "number") {
      if (!Number.isFinite(value)) {
        this.fail(`${String(value)} is not a JSON number`);
      }
      // ES Number-to-String is exactly RFC 8785's number serialization; String(-0) is "0".
      this.out.push(String(value));
      return;
    }
    if (typeof value === "boolean") {
      this.out.push(value ? "true" : "false");
      return;
    }
    if (typeof value === "bigint") {
      this.fail("bigint is not a JSON value (convert it to a number or a string)");
    }
    if (typeof value !== "object") {
      this.fail(`${typeof value} is not a JSON value`);
    }
    if (value === null) {
      this.out.push("null");
      return;
    }
    if (this.ancestors.has(value)) {
      this.fail("cyclic structure");
    }
    this.ancestors.add(value);
    if (Array.isArray(value)) {
      this.writeArray(value);
    } else {
      this.writeObject(value);
    }
    this.ancestors.delete(value);
  }

  private writeArray(value: unknown[]): void {
    const { out, segments } = this;
    out.push("[");
    for (let i = 0; i < value.length; i++) {
      if (i > 0) {
        out.push(",");
      }
      segments.push(i);
      this.write(value[i], String(i), true);
      segments.pop();
    }
    out.push("]");
  }

  private writeObject(value: object): void {
    const tag = Object.prototype.toString.call(value);
    if (tag !== "[object Object]") {
      this.fail(`${tag.slice(8, -1)} is not a plain JSON object`);
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
    const { out, segments } = this;
    out.push("{");
    for (let i = 0; i < members.length; i++) {
      const [name, member] = members[i] as [string, unknown];
      if (i > 0) {
        out.push(",");
      }
      segments.push(name);
      out.push(this.quote(name), ":");
      this.write(member, "", false); // toJSON was applied above
      segments.pop();
    }
    out.push("}");
  }

  private quote(text: string): string {
    if (!text.isWellFormed()) {
      this.fail("string contains a lone UTF-16 surrogate (not I-JSON)");
    }
    // Well-formed JSON.stringify (ES2019) escapes exactly as RFC 8785 §3.2.2.2 requires.
    return JSON.stringify(text);
  }
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
 * It descends at most `maxDepth` levels, so a value of any depth is checked
 * without exhausting the stack, and spells out the problem's path only once
 * it found one. Plain JSON data only (`toJSON` is not applied): task results
 * and outputs as they come off the wire.
 */
export function canonicalProblem(value: unknown, maxDepth = MAX_CANONICAL_DEPTH): CanonicalProblem | null {
  const found = problemIn(value, 0, maxDepth);
  return found === null ? null : { path: `$${found.path.reverse().join("")}`, message: found.message };
}

/** The problem in `value` at `depth`, with its path as segments from the problem up (`.key`, `[i]`). */
function problemIn(value: unknown, depth: number, maxDepth: number): { path: string[]; message: string } | null {
  const problem = scalarProblem(value);
  if (problem !== undefined) {
    return { path: [], message: problem };
  }
  if (typeof value !== "object" || value === null) {
    return null;
  }
  if (depth >= maxDepth) {
    return { path: [], message: `nested deeper than ${maxDepth} levels` };
  }
  // Members are looked at last first (as the checks have always reported the first problem).
  if (Array.isArray(value)) {
    for (let index = value.length - 1; index >= 0; index -= 1) {
      const found = problemIn(value[index], depth + 1, maxDepth);
      if (found !== null) {
        found.path.push(`[${index}]`);
        return found;
      }
    }
    return null;
  }
  const keys = Object.keys(value);
  for (const key of keys) {
    if (!key.isWellFormed()) {
      return { path: [], message: "an object key contains a lone UTF-16 surrogate (not I-JSON)" };
    }
  }
  for (let index = keys.length - 1; index >= 0; index -= 1) {
    const key = keys[index] as string;
    const member: unknown = Reflect.get(value, key);
    // An undefined member is left out by JSON.stringify and canonicalJson alike.
    const found = member === undefined ? null : problemIn(member, depth + 1, maxDepth);
    if (found !== null) {
      found.path.push(`.${key}`);
      return found;
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
