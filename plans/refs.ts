import type { Json } from "../schemas/common.ts";

/**
 * References of the two plan notations, parsed into one shape:
 * - dependency notation: `${step[N].data.field}`, `${step[N].data[0].field}`,
 *   `${step[N].data.*.field}` (the wildcard collects the field across an array);
 * - placeholder notation: `$step-01.path.to.value`, `$step-01.items[*].id`
 *   (the `[*]` expands the step into one call per item);
 * - both: `${input.name}` / `$input.name`, a plan input.
 * An arg that is exactly one reference takes the referenced value as it is;
 * references embedded in longer text make a template, whose parts are joined
 * into a string when the step starts (`concat`, `lib/expr/mapping.ts`). A reference
 * inside an object or array arg is refused.
 */

export type Segment = { kind: "name"; name: string } | { kind: "index"; index: number } | { kind: "wildcard" };

export interface Reference {
  /** A step's position (dependency notation) or id (placeholder notation), or the plan's inputs. */
  source: { kind: "step"; step: number | string } | { kind: "input" };
  segments: Segment[];
}

/** A piece of a template arg: text as written, or a reference. */
export type TextPart = { kind: "text"; text: string } | { kind: "ref"; ref: Reference };

/** What an arg value is: a reference, a literal, text with references in it, or something refused (and why). */
export type ArgValue =
  | { kind: "ref"; ref: Reference }
  | { kind: "literal"; value: Json }
  | { kind: "template"; parts: TextPart[] }
  | { kind: "unsupported"; reason: string };

const DEPENDENCY_REFS = /\$\{\s*(?:step\[(\d+)\]\.data|(input))((?:\.[A-Za-z0-9_$-]+|\.\*|\[\d+\]|\[\*\])*)\s*\}/g;
const PLACEHOLDER_REFS = /\$(input|[a-z][a-z0-9_]*(?:-[a-z0-9_]+)*)((?:\.[A-Za-z0-9_$-]+|\[\d+\]|\[\*\])*)/g;
const SEGMENT = /\.\*|\.([A-Za-z0-9_$-]+)|\[(\d+)\]|\[\*\]/g;
const DEPENDENCY_MARKERS = ["${step[", "${input"];
const PLACEHOLDER_MARKERS = ["$step-"];

/** Every reference an arg holds, whole or embedded in text. */
export function refsOf(arg: ArgValue): Reference[] {
  if (arg.kind === "ref") {
    return [arg.ref];
  }
  return arg.kind === "template" ? arg.parts.flatMap((part) => (part.kind === "ref" ? [part.ref] : [])) : [];
}

/** An arg value of the dependency notation. */
export function parseDependencyArg(value: Json): ArgValue {
  if (typeof value !== "string") {
    return structured(value, DEPENDENCY_MARKERS);
  }
  return parseText(value, DEPENDENCY_REFS, DEPENDENCY_MARKERS, (match) => {
    const [, index, input, path = ""] = match;
    const source = input === undefined ? { kind: "step" as const, step: Number(index) } : { kind: "input" as const };
    return { source, segments: parseSegments(path) };
  });
}

/** An arg value of the placeholder notation; a `$` word naming no step (`$5`, `$HOME`) is text. */
export function parsePlaceholderArg(value: Json, isStep: (id: string) => boolean): ArgValue {
  if (typeof value !== "string") {
    return structured(value, PLACEHOLDER_MARKERS);
  }
  return parseText(value, PLACEHOLDER_REFS, PLACEHOLDER_MARKERS, (match) => {
    const [, name = "", path = ""] = match;
    if (name !== "input" && !isStep(name) && !name.startsWith("step-")) {
      return undefined;
    }
    const source = name === "input" ? { kind: "input" as const } : { kind: "step" as const, step: name };
    return { source, segments: parseSegments(path) };
  });
}

/** An object or array arg is a literal; one holding a reference is refused (only strings are templates). */
function structured(value: Json, markers: readonly string[]): ArgValue {
  const text = JSON.stringify(value);
  return markers.some((marker) => text.includes(marker))
    ? { kind: "unsupported", reason: "a reference inside an object or array arg is not supported" }
    : { kind: "literal", value };
}

/**
 * A string arg: one reference that is the whole string, text with references
 * in it, or plain text. A notation's marker left in the text once its
 * references are taken out (`${step[0].foo}`, `$step-`) is a reference
 * written wrong, refused rather than sent as text.
 */
function parseText(
  value: string,
  pattern: RegExp,
  markers: readonly string[],
  toRef: (match: RegExpMatchArray) => Reference | undefined,
): ArgValue {
  const parts: TextPart[] = [];
  let last = 0;
  for (const match of value.matchAll(pattern)) {
    const ref = toRef(match);
    if (ref !== undefined) {
      const at = match.index ?? 0;
      if (at > last) {
        parts.push({ kind: "text", text: value.slice(last, at) });
      }
      parts.push({ kind: "ref", ref });
      last = at + match[0].length;
    }
  }
  if (last < value.length) {
    parts.push({ kind: "text", text: value.slice(last) });
  }
  const text = parts.map((part) => (part.kind === "text" ? part.text : "")).join("");
  const marker = markers.find((candidate) => text.includes(candidate));
  if (marker !== undefined) {
    return { kind: "unsupported", reason: `"${marker}…" is not a reference this notation knows` };
  }
  const [first] = parts;
  if (parts.length === 1 && first?.kind === "ref") {
    return { kind: "ref", ref: first.ref };
  }
  return parts.some((part) => part.kind === "ref") ? { kind: "template", parts } : { kind: "literal", value };
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
  return (keys.length === 1 && ["expr", "template", "concat"].includes(keys[0] ?? "")) || keys.includes("path");
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
