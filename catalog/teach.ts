import type { z } from "zod";
import { EngineError, type ErrorDetail } from "../lib/errors.ts";
import { issuesToDetails, summarize } from "../lib/validation.ts";
import { DefinitionBundle } from "../schemas/definitions.ts";
import { mappingsIn } from "./mappings-in.ts";

/**
 * Registration that teaches (docs/definitions.md, "What registration rejects"):
 * an unknown field gets a "did you mean", a bundle's schema problems and its
 * expression problems come back together, and a mapping source that reads
 * like a JSONPath without its `$` is a warning in the 201 answer.
 */

/**
 * The bundle, parsed; or a `definition.invalid` error listing every schema
 * problem (unknown fields with their likely intended name) and, when the only
 * schema problems were unknown fields, also what `check` finds in the bundle
 * without them, so one answer lists everything to fix.
 */
export function parseBundle(body: unknown, check: (bundle: DefinitionBundle) => ErrorDetail[]): DefinitionBundle {
  const parsed = DefinitionBundle.safeParse(body);
  if (parsed.success) {
    return parsed.data;
  }
  const details = issuesToDetails(parsed.error.issues).map(withSuggestion);
  const unknownOnly = details.every((detail) => detail.code === "schema.unrecognized_keys");
  const withoutUnknown = unknownOnly ? DefinitionBundle.safeParse(withoutKeys(body, details)) : undefined;
  const problems = [...details, ...(withoutUnknown?.success ? check(withoutUnknown.data) : [])];
  throw EngineError.terminal(
    "definition.invalid",
    `the definition bundle is invalid: ${summarize(problems)}`,
    problems,
  );
}

/** Keys zod reported as unrecognized, from its message (`Unrecognized key: "a"`, `Unrecognized keys: "a", "b"`). */
function unknownKeys(detail: ErrorDetail): string[] {
  return [...detail.message.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((match) => match[1] ?? "");
}

function withSuggestion(detail: ErrorDetail): ErrorDetail {
  if (detail.code !== "schema.unrecognized_keys") {
    return detail;
  }
  const known = knownKeysAt(DefinitionBundle, pathSegments(detail.path));
  const hints = unknownKeys(detail).flatMap((key) => {
    const best = closest(key, known);
    return best === undefined ? [] : [`"${key}": did you mean "${best}"?`];
  });
  const expected = known.size > 0 && known.size <= 24 ? ` Known fields here: ${[...known].sort().join(", ")}.` : "";
  return { ...detail, message: `${detail.message}${hints.length > 0 ? ` (${hints.join("; ")})` : ""}.${expected}` };
}

function pathSegments(path: string): (string | number)[] {
  return path === "" ? [] : path.split(".").map((part) => (/^\d+$/.test(part) ? Number(part) : part));
}

/** The fields the object schemas at `path` know (every branch of a union), or none when the walk is lost. */
export function knownKeysAt(schema: z.core.$ZodType, path: readonly (string | number)[]): Set<string> {
  const keys = new Set<string>();
  for (const object of objectsAt(schema, path, 0)) {
    for (const key of Object.keys(object._zod.def.shape)) {
      keys.add(key);
    }
  }
  return keys;
}

type AnyDef = { type: string; [key: string]: unknown };
const defOf = (schema: z.core.$ZodType): AnyDef => schema._zod.def as unknown as AnyDef;

function objectsAt(schema: z.core.$ZodType, path: readonly (string | number)[], depth: number): z.core.$ZodObject[] {
  if (depth > 64) {
    return [];
  }
  const def = defOf(schema);
  const inner = (next: unknown) => objectsAt(next as z.core.$ZodType, path, depth + 1);
  switch (def.type) {
    case "optional":
    case "nullable":
    case "default":
    case "readonly":
    case "catch":
      return inner(def.innerType);
    case "lazy":
      return inner((def.getter as () => unknown)());
    case "pipe":
      return inner(defOf(def.in as z.core.$ZodType).type === "transform" ? def.out : def.in);
    case "union":
      return (def.options as z.core.$ZodType[]).flatMap((option) => objectsAt(option, path, depth + 1));
    case "intersection":
      return [...inner(def.left), ...inner(def.right)];
    default:
      return path.length === 0
        ? def.type === "object"
          ? [schema as z.core.$ZodObject]
          : []
        : step(schema, def, path, depth);
  }
}

function step(
  schema: z.core.$ZodType,
  def: AnyDef,
  path: readonly (string | number)[],
  depth: number,
): z.core.$ZodObject[] {
  const [head, ...rest] = path;
  const next = (value: unknown) => (value === undefined ? [] : objectsAt(value as z.core.$ZodType, rest, depth + 1));
  if (def.type === "object" && typeof head === "string") {
    return next((schema as z.core.$ZodObject)._zod.def.shape[head]);
  }
  if (def.type === "array" && typeof head === "number") {
    return next(def.element);
  }
  if (def.type === "record") {
    return next(def.valueType);
  }
  return [];
}

/** The known key nearest to `key` by edit distance, if near enough to be a typo of it. */
export function closest(key: string, known: ReadonlySet<string>): string | undefined {
  const limit = Math.min(3, Math.max(1, Math.floor(key.length / 3)));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const candidate of known) {
    const distance = editDistance(key.toLowerCase(), candidate.toLowerCase(), limit);
    if (distance < bestDistance) {
      best = candidate;
      bestDistance = distance;
    }
  }
  return best;
}

/** Levenshtein distance with adjacent transpositions, giving up (limit + 1) past `limit`. */
function editDistance(a: string, b: string, limit: number): number {
  if (Math.abs(a.length - b.length) > limit) {
    return limit + 1;
  }
  let before: number[] = [];
  let previous = Array.from({ length: b.length + 1 }, (_, index) => index);
  for (let i = 1; i <= a.length; i += 1) {
    const current = [i];
    for (let j = 1; j <= b.length; j += 1) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      let value = Math.min((previous[j] ?? 0) + 1, (current[j - 1] ?? 0) + 1, (previous[j - 1] ?? 0) + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) {
        value = Math.min(value, (before[j - 2] ?? 0) + 1);
      }
      current.push(value);
    }
    before = previous;
    previous = current;
  }
  return previous[b.length] ?? limit + 1;
}

/** A copy of `body` without the unrecognized keys the details name. */
function withoutKeys(body: unknown, details: readonly ErrorDetail[]): unknown {
  const copy: unknown = structuredClone(body);
  for (const detail of details) {
    let target: unknown = copy;
    for (const segment of pathSegments(detail.path)) {
      target = typeof target === "object" && target !== null ? Reflect.get(target, segment) : undefined;
    }
    if (typeof target === "object" && target !== null) {
      for (const key of unknownKeys(detail)) {
        Reflect.deleteProperty(target, key);
      }
    }
  }
  return copy;
}

/** Roots of the context a mapping reads: a node's has the foreach `item` and `index`, a step's does not. */
const NODE_ROOTS = /^(input|state|output|item|index)(\.[A-Za-z_][A-Za-z0-9_-]*)*$/;
const STEP_ROOTS = /^(input|state|output)(\.[A-Za-z_][A-Za-z0-9_-]*)*$/;

/**
 * Warnings for input mapping sources that are literal strings shaped like a
 * path into the context the mapping reads (`"item"`, `"input.x"`): almost
 * always a JSONPath that lost its `$`. They are sent as the text they are, so
 * registration goes on; the 201 answer lists them.
 */
export function mappingWarnings(bundle: DefinitionBundle): ErrorDetail[] {
  const warnings = mappingsIn(bundle)
    .filter((found) => found.key === "input_mapping")
    .flatMap(({ mapping, path, owner }) => {
      const roots = /\.steps\.\d+$/.test(owner) ? STEP_ROOTS : NODE_ROOTS;
      return Object.entries(mapping).flatMap(([field, source]) =>
        typeof source === "string" && roots.test(source)
          ? [
              {
                path: `${path}.${field}`,
                message: `"${source}" looks like a JSONPath without its "$": write "$.${source}" to read that value (as written, the text "${source}" is sent)`,
                code: "mapping.looks_like_path",
              },
            ]
          : [],
      );
    });
  return warnings.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
