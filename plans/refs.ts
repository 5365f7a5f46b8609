import type { Json } from "../schemas/index.ts";

/**
 * References of the two plan notations, parsed into one shape:
 * - dependency notation: `${step[N].data.field}`, `${step[N].data[0].field}`,
 *   `${step[N].data.*.field}` (the wildcard collects the field across an array);
 * - placeholder notation: `$step-01.path.to.value`, `$step-01.items[*].id`
 *   (the `[*]` expands the step into one call per item);
 * - both: `${input.name}` / `$input.name`, a plan input.
 * A reference is a whole arg value; one embedded in a longer string is refused.
 */

export type Segment = { kind: "name"; name: string } | { kind: "index"; index: number } | { kind: "wildcard" };

export interface Reference {
  /** A step's position (dependency notation) or id (placeholder notation), or the plan's inputs. */
  source: { kind: "step"; step: number | string } | { kind: "input" };
  segments: Segment[];
}

/** What an arg value is: a reference, a literal, or a reference embedded in text (refused). */
export type ArgValue = { kind: "ref"; ref: Reference } | { kind: "literal"; value: Json } | { kind: "embedded" };

const DEPENDENCY_REF = /^\$\{\s*(?:step\[(\d+)\]\.data|(input))((?:\.[A-Za-z0-9_$-]+|\.\*|\[\d+\]|\[\*\])*)\s*\}$/;
const PLACEHOLDER_REF = /^\$(input|[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*)((?:\.[A-Za-z0-9_$-]+|\[\d+\]|\[\*\])*)$/;
const SEGMENT = /\.\*|\.([A-Za-z0-9_$-]+)|\[(\d+)\]|\[\*\]/g;

/** An arg value of the dependency notation. */
export function parseDependencyArg(value: Json): ArgValue {
  if (typeof value !== "string") {
    return containsRef(value, "${") ? { kind: "embedded" } : { kind: "literal", value };
  }
  const match = DEPENDENCY_REF.exec(value);
  if (match === null) {
    return value.includes("${step[") || value.includes("${input") ? { kind: "embedded" } : { kind: "literal", value };
  }
  const [, index, input, path = ""] = match;
  const source = input === undefined ? { kind: "step" as const, step: Number(index) } : { kind: "input" as const };
  return { kind: "ref", ref: { source, segments: parseSegments(path) } };
}

/** An arg value of the placeholder notation; `steps` are the plan's step ids (a `$` string naming none is a literal). */
export function parsePlaceholderArg(value: Json, isStep: (id: string) => boolean): ArgValue {
  if (typeof value !== "string") {
    return containsRef(value, "$step-") ? { kind: "embedded" } : { kind: "literal", value };
  }
  const match = PLACEHOLDER_REF.exec(value);
  if (match === null || (match[1] !== "input" && !isStep(match[1] ?? "") && !(match[1] ?? "").startsWith("step-"))) {
    return value.includes("$step-") ? { kind: "embedded" } : { kind: "literal", value };
  }
  const [, name = "", path = ""] = match;
  const source = name === "input" ? { kind: "input" as const } : { kind: "step" as const, step: name };
  return { kind: "ref", ref: { source, segments: parseSegments(path) } };
}

function parseSegments(path: string): Segment[] {
  const segments: Segment[] = [];
  for (const match of path.matchAll(SEGMENT)) {
    if (match[1] !== undefined) {
      segments.push({ kind: "name", name: match[1] });
    } else if (match[2] !== undefined) {
      segments.push({ kind: "index", index: Number(match[2]) });
    } else {
      segments.push({ kind: "wildcard" });
    }
  }
  return segments;
}

/** Whether a structured literal holds a reference somewhere inside (only whole values are references). */
function containsRef(value: Json, marker: string): boolean {
  return JSON.stringify(value).includes(marker);
}

/** A JSONPath over `base` following `segments` (names in brackets: step ids and fields may hold `-`). */
export function toJsonPath(base: string, segments: readonly Segment[]): string {
  return segments.reduce((path, segment) => {
    if (segment.kind === "name") {
      return `${path}[${quoteName(segment.name)}]`;
    }
    return segment.kind === "index" ? `${path}[${segment.index}]` : `${path}[*]`;
  }, base);
}

/** A JSONPath name selector: single-quoted, with `'` and `\` escaped (RFC 9535 §2.3.1.1). */
export function quoteName(name: string): string {
  return `'${name.replaceAll("\\", "\\\\").replaceAll("'", "\\'")}'`;
}

/** The base of a step's data in the run context. */
export function stepDataPath(node: string): string {
  return `$.state${`[${quoteName(node)}]`}`;
}

/**
 * A literal as a mapping source. Most literals are literals as they are; a
 * string starting with `$` (a JSONPath to the engine) and an object shaped
 * like a computed source (`{ expr }`, `{ template }`, `{ path, … }`) are
 * written as a CEL literal that evaluates to exactly that value.
 */
export function literalSource(value: Json): Json {
  const misread =
    (typeof value === "string" && value.startsWith("$")) ||
    (value !== null && typeof value === "object" && !Array.isArray(value) && looksComputed(value));
  return misread ? { expr: toCelLiteral(value) } : value;
}

function looksComputed(value: { [key: string]: Json }): boolean {
  const keys = Object.keys(value);
  return (keys.length === 1 && (keys[0] === "expr" || keys[0] === "template")) || keys.includes("path");
}

/** A CEL expression whose value is `value` (JSON strings are valid CEL string literals). */
export function toCelLiteral(value: Json): string {
  if (value === null || typeof value === "boolean" || typeof value === "number") {
    return JSON.stringify(value);
  }
  if (typeof value === "string") {
    return JSON.stringify(value);
  }
  if (Array.isArray(value)) {
    return `[${value.map(toCelLiteral).join(", ")}]`;
  }
  return `{${Object.entries(value)
    .map(([key, item]) => `${JSON.stringify(key)}: ${toCelLiteral(item)}`)
    .join(", ")}}`;
}
