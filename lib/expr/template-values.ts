import { EngineError } from "../errors.ts";

// How a template reads and writes data: own data properties only, values as text, escaping.

/** Output of `urlencode`: already URL-safe, so `url` escaping leaves it alone. */
export class UrlEncodedText {
  readonly text: string;
  constructor(text: string) {
    this.text = text;
  }
}

export function joinItems(items: unknown, separator: unknown): string {
  const glue = separator === undefined ? ", " : renderValue(separator);
  return Array.isArray(items) ? arrayItems(items).map(renderValue).join(glue) : renderValue(items);
}

export function lengthOf(value: unknown): number {
  if (typeof value === "string" || Array.isArray(value)) {
    return value.length;
  }
  return isPlainObject(value) ? ownKeys(value).length : 0;
}

/** Handlebars' `if` truthiness: falsy values and empty arrays are false; `0` only with `includeZero`. */
export function isTruthy(value: unknown, includeZero?: unknown): boolean {
  if (Array.isArray(value)) {
    return value.length > 0;
  }
  if (value === 0 && isTruthy(includeZero)) {
    return true;
  }
  return Boolean(value);
}

/** Handlebars' `isEmpty`, used by `#with`: like falsy, but `0` is not empty. */
export function isEmpty(value: unknown): boolean {
  return (!value && value !== 0) || (Array.isArray(value) && value.length === 0);
}

// ───────────────────────────── safe data access ─────────────────────────────

/** Only these are walked into by paths: plain objects (`{}` / null prototype) and arrays. */
export function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    return false;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  return proto === Object.prototype || proto === null;
}

/** `__proto__` is refused even as an own key, so no template can name a prototype. */
const REFUSED_KEY = "__proto__";

/**
 * The one way a template reads data: an own *data* property of a plain object or array.
 * Getters are not invoked and functions resolve to `undefined`.
 */
export function getOwn(target: unknown, key: unknown): unknown {
  if (!Array.isArray(target) && !isPlainObject(target)) {
    return undefined;
  }
  const name = typeof key === "number" ? String(key) : key;
  if (typeof name !== "string" || name === REFUSED_KEY) {
    return undefined;
  }
  const descriptor = Object.getOwnPropertyDescriptor(target, name);
  if (descriptor === undefined || !("value" in descriptor)) {
    return undefined;
  }
  const value: unknown = descriptor.value;
  return typeof value === "function" ? undefined : value;
}

function ownKeys(target: Record<string, unknown>): string[] {
  return Object.keys(target).filter((key) => key !== REFUSED_KEY);
}

/** The items of an array as a template sees them: holes and getters read as `undefined`. */
function arrayItems(items: readonly unknown[]): unknown[] {
  const out: unknown[] = [];
  for (let index = 0; index < items.length; index += 1) {
    out.push(getOwn(items, index));
  }
  return out;
}

// ───────────────────────────── value rendering ─────────────────────────────

/** The text of a value (see the rules at the top of `template.ts`). */
export function renderValue(value: unknown): string {
  switch (typeof value) {
    case "string":
      return value;
    case "number":
    case "boolean":
    case "bigint":
      return String(value);
    case "object":
      if (value === null) {
        return "";
      }
      if (value instanceof UrlEncodedText) {
        return value.text;
      }
      return Array.isArray(value) ? arrayItems(value).map(renderValue).join(",") : toJson(value, undefined);
    default:
      return "";
  }
}

/** `JSON.stringify` of a copy built from own data properties, so no `toJSON` or getter in data ever runs. */
export function toJson(value: unknown, indent: unknown): string {
  const space =
    typeof indent === "number"
      ? Math.max(0, Math.min(10, Math.trunc(indent)))
      : typeof indent === "string"
        ? indent.slice(0, 10)
        : undefined;
  const copy = toJsonValue(value, new Set());
  return copy === undefined ? "null" : JSON.stringify(copy, null, space);
}

function toJsonValue(value: unknown, ancestors: Set<object>): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value;
    case "number":
      return Number.isFinite(value) ? value : null;
    case "bigint":
      return value.toString();
    case "object":
      return value === null ? null : toJsonObject(value, ancestors);
    default:
      return undefined;
  }
}

function toJsonObject(value: object, ancestors: Set<object>): unknown {
  if (value instanceof UrlEncodedText) {
    return value.text;
  }
  if (Object.getPrototypeOf(value) === Date.prototype) {
    const time = Date.prototype.getTime.call(value);
    return Number.isNaN(time) ? null : Date.prototype.toISOString.call(value);
  }
  if (ancestors.has(value)) {
    throw new EngineError("template.render_failed", "cannot render cyclic data as JSON");
  }
  ancestors.add(value);
  try {
    if (Array.isArray(value)) {
      return arrayItems(value).map((item) => toJsonValue(item, ancestors) ?? null);
    }
    // Null prototype: JSON.stringify finds no inherited `toJSON`, and `__proto__` stays an ordinary key.
    const out = Object.create(null) as Record<string, unknown>;
    if (isPlainObject(value)) {
      for (const key of Object.keys(value)) {
        const descriptor = Object.getOwnPropertyDescriptor(value, key);
        const item =
          descriptor !== undefined && "value" in descriptor ? toJsonValue(descriptor.value, ancestors) : undefined;
        if (item !== undefined) {
          out[key] = item;
        }
      }
    }
    return out;
  } finally {
    ancestors.delete(value);
  }
}

export function urlEncode(text: string): string {
  return encodeURIComponent(text.toWellFormed());
}

/**
 * What a mustache writes: the value's text, percent-encoded when `encode` (a `{{x}}` in a
 * URL template) unless `urlencode` made it already.
 */
export function emit(value: unknown, encode: boolean): string {
  const text = renderValue(value);
  return encode && !(value instanceof UrlEncodedText) ? urlEncode(text) : text;
}

/** `[key, value]` pairs of an array (holes skipped, as Handlebars does) or a plain object. */
export function iterationEntries(items: unknown): [string | number, unknown][] {
  if (Array.isArray(items)) {
    const entries: [number, unknown][] = [];
    for (let index = 0; index < items.length; index += 1) {
      if (Object.hasOwn(items, index)) {
        entries.push([index, getOwn(items, index)]);
      }
    }
    return entries;
  }
  return isPlainObject(items) ? ownKeys(items).map((key) => [key, getOwn(items, key)]) : [];
}
