import { inBlobScope, rerefOf } from "./blob-scope.ts";
import { EngineError } from "../errors.ts";
import { evalCel } from "./cel.ts";
import { selectJsonPath } from "./jsonpath.ts";
import { renderTemplate } from "./template.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";

/**
 * Input and output mappings and the sources they are made of (a `$` JSONPath, `{ "expr" }`,
 * `{ "template" }`, `{ "path", "default" | "optional" }`, `{ "concat" }`, or a literal):
 * docs/definitions.md, "Mappings".
 */

type Selected = { found: true; value: Json } | { found: false };

/** The value of `key` when `source` is an object with that one key. */
function soleMember(source: unknown, key: string): unknown {
  return isPlainObject(source) && Object.keys(source).length === 1 && Object.hasOwn(source, key)
    ? source[key]
    : undefined;
}

/** `{ "expr": "…" }` or `{ "template": "…" }`: an object with exactly that one string key. */
export function isComputed<K extends "expr" | "template">(source: unknown, key: K): source is Record<K, string> {
  return typeof soleMember(source, key) === "string";
}

/** The parts of a `{ "concat": [...] }` source: an object with exactly that one key, holding an array. */
export function concatPartsOf(source: unknown): readonly unknown[] | undefined {
  const parts = soleMember(source, "concat");
  return Array.isArray(parts) ? parts : undefined;
}

/** A JSONPath, and what stands in for it when it selects nothing (nothing: the field is left out). */
interface PathSource {
  path: string;
  fallback: Selected;
}

/** `{ "path": "$…", "default": v }` or `{ "path": "$…", "optional": true }`: a JSONPath that may select nothing. */
export function optionalPathOf(source: unknown): PathSource | undefined {
  if (!isPlainObject(source)) {
    return undefined;
  }
  const { path, ...rest } = source;
  const keys = Object.keys(rest);
  if (typeof path !== "string" || !path.startsWith("$") || keys.length !== 1) {
    return undefined;
  }
  if (keys[0] === "default") {
    return { path, fallback: { found: true, value: rest.default as Json } };
  }
  return keys[0] === "optional" && rest.optional === true ? { path, fallback: { found: false } } : undefined;
}

/** A bare `$` path (absent when it selects nothing) or an optional one. */
function pathSourceOf(source: unknown): PathSource | undefined {
  return typeof source === "string" && source.startsWith("$")
    ? { path: source, fallback: { found: false } }
    : optionalPathOf(source);
}

/** Whether `value` is a source other than a literal: a `$` path, `path`, `expr`, `template` or `concat`. */
export function isComputedSource(value: unknown): boolean {
  return (
    pathSourceOf(value) !== undefined ||
    isComputed(value, "expr") ||
    isComputed(value, "template") ||
    concatPartsOf(value) !== undefined
  );
}

/**
 * What a source is evaluated against: the document JSONPath and templates read, CEL's variables, what the
 * document is called when a path selects nothing, and whether templates render strictly (`RenderOptions.strict`).
 */
interface SourceScope {
  doc: unknown;
  vars: Record<string, unknown>;
  noun: string;
  strict?: boolean;
}

/** The value of one source against `doc`, or absent (a singular JSONPath that matched nothing). */
export function evaluateSource(source: unknown, doc: Record<string, unknown>, strict = false): Selected {
  return evaluateIn(source, { doc, vars: doc, noun: "document", strict });
}

function evaluateIn(source: unknown, scope: SourceScope): Selected {
  const selected = evaluateUnkept(source, scope);
  return selected.found && inBlobScope() ? { found: true, value: rerefOf(selected.value) } : selected;
}

function evaluateUnkept(source: unknown, scope: SourceScope): Selected {
  const path = pathSourceOf(source);
  if (path !== undefined) {
    const selected = selectJsonPath(path.path, scope.doc);
    return selected.found ? { found: true, value: selected.value as Json } : path.fallback;
  }
  if (isComputed(source, "expr")) {
    return { found: true, value: evalCel(source.expr, scope.vars) as Json };
  }
  if (isComputed(source, "template")) {
    return { found: true, value: renderTemplate(source.template, scope.doc, { strict: scope.strict === true }) };
  }
  const parts = concatPartsOf(source);
  if (parts !== undefined) {
    const values = parts.map((part, index) => {
      // A bare `$` part that selects nothing fails as a whole-value path does; an optional one adds nothing.
      const result = required(`concat.${index}`, part, evaluateIn(part, scope), scope);
      return result.found ? result.value : "";
    });
    return { found: true, value: concatText(values) };
  }
  return { found: true, value: source as Json };
}

/** `result`, unless `source` is a bare `$` path that selected nothing (a typo is not an absent value). */
function required(at: string, source: unknown, result: Selected, scope: SourceScope): Selected {
  if (!result.found && typeof source === "string") {
    throw unresolvedPath(at, source, scope);
  }
  return result;
}

/** The most characters a `concat` source yields: a request body's limit. */
export const MAX_CONCAT_CHARS = 1_048_576;

/**
 * A `concat`'s part values as one string (docs/definitions.md): what a plan's reference in text compiles to.
 * @throws EngineError `mapping.not_text` for a value with no text, `mapping.too_large` past {@link MAX_CONCAT_CHARS}.
 */
function concatText(values: readonly Json[]): string {
  let text = "";
  values.forEach((value, index) => {
    const piece = Array.isArray(value)
      ? value.map((item, itemIndex) => scalarText(item, `concat.${index}[${itemIndex}]`)).join(",")
      : scalarText(value, `concat.${index}`);
    if (text.length + piece.length > MAX_CONCAT_CHARS) {
      throw EngineError.terminal(
        "mapping.too_large",
        `the text built from concat would be longer than ${MAX_CONCAT_CHARS} characters`,
      );
    }
    text += piece;
  });
  return text;
}

function scalarText(value: Json, at: string): string {
  if (typeof value === "string") {
    return value;
  }
  if (typeof value === "number" || typeof value === "boolean") {
    return JSON.stringify(value);
  }
  const what = value === null ? "null" : Array.isArray(value) ? "an array" : "an object";
  throw EngineError.terminal(
    "mapping.not_text",
    `${at} is ${what}, which has no text to put in a string (a string, number, boolean or an array of those has)`,
  );
}

/**
 * Codes that keep their name through a mapping (any other becomes `mapping.failed`): an expression out of its
 * budget, and the mapping's own (a `concat` part's `mapping.unresolved` routes a plan to its fallback).
 */
const KEPT_CODES: ReadonlySet<string> = new Set([
  "expr.budget_exceeded",
  "template.budget_exceeded",
  "template.too_deep",
  "mapping.unresolved",
  "template.unresolved",
  "mapping.not_text",
  "mapping.too_large",
]);

/** The value one mapping entry gives its field or target (`at` names it, e.g. `input_mapping.id`), strictly. */
function selectStrict(at: string, source: unknown, scope: SourceScope): Selected {
  let result: Selected;
  try {
    result = evaluateIn(source, scope);
  } catch (error) {
    if (!(error instanceof EngineError)) {
      throw error;
    }
    const code = KEPT_CODES.has(error.code) ? error.code : "mapping.failed";
    throw new EngineError(code, `${at}: ${error.message}`, { retryable: false, cause: error });
  }
  return required(at, source, result, scope);
}

/** Builds a callee's input from an input mapping; a field whose optional path selects nothing is left out. */
export function buildInput(mapping: Record<string, unknown>, doc: Record<string, unknown>): JsonObject {
  const scope: SourceScope = { doc, vars: doc, noun: "document" };
  return objectOf(mapping, (field, source) => selectStrict(`input_mapping.${field}`, source, scope));
}

/**
 * A JSON value built from a shape whose leaves may be sources (an http action's `body`,
 * docs/definitions.md), evaluated as an input mapping's with strict templates, the computed
 * values' JSON at most `maxChars` characters (`mapping.too_large`). `at` names the shape in errors.
 */
export function buildValue(shape: Json, doc: Record<string, unknown>, at: string, maxChars: number): Selected {
  const scope: SourceScope = { doc, vars: doc, noun: "document", strict: true };
  let left = maxChars;
  const build = (node: Json, where: string): Selected => {
    if (isComputedSource(node)) {
      const result = selectStrict(where, node, scope);
      left -= result.found ? JSON.stringify(result.value).length : 0;
      if (left < 0) {
        throw EngineError.terminal(
          "mapping.too_large",
          `${where}: the values computed for ${at} pass ${maxChars} characters of JSON`,
        );
      }
      return result;
    }
    if (Array.isArray(node)) {
      const items = node.map((item, index) => build(item, `${where}.${index}`));
      return { found: true, value: items.flatMap((item) => (item.found ? [item.value] : [])) };
    }
    if (node !== null && typeof node === "object") {
      return { found: true, value: objectOf(node, (key, member) => build(member, `${where}.${key}`)) };
    }
    return { found: true, value: node };
  };
  return build(shape, at);
}

/**
 * What `select` finds for each member of `record` (one it finds nothing for is left out), as
 * plain own members whatever the key: assigning `"__proto__"` would replace the prototype
 * (registration refuses such fields; this keeps an older stored definition harmless).
 */
function objectOf<V>(record: Record<string, V>, select: (key: string, value: V) => Selected): JsonObject {
  const object: JsonObject = {};
  for (const [key, value] of Object.entries(record)) {
    const result = select(key, value);
    if (result.found) {
      Object.defineProperty(object, key, { value: result.value, enumerable: true, writable: true, configurable: true });
    }
  }
  return object;
}

/** A `$` path selected nothing: what the document has, where the selection stopped, how to mark it optional. */
function unresolvedPath(at: string, path: string, scope: SourceScope): EngineError {
  const stopped = stoppedAt(path, scope.doc);
  const near = stopped === undefined ? "" : `; ${describe(stopped.value, `${stopped.at} has`, stopped.at)}`;
  const top = describe(scope.doc, `the ${scope.noun}'s top-level keys are`, `the ${scope.noun}`);
  return EngineError.terminal(
    "mapping.unresolved",
    `${at}: ${path} selects nothing (${top}${near}); ` +
      `mark a value that may be absent with { "path": "${path}", "default": … } or { "path": "${path}", "optional": true }`,
  );
}

/** For a plain dotted path (`$.a.b.c`), the deepest value along it that exists, other than the document itself. */
function stoppedAt(path: string, doc: unknown): { at: string; value: unknown } | undefined {
  if (!/^\$(\.[A-Za-z_][A-Za-z0-9_-]*)+$/.test(path)) {
    return undefined;
  }
  let found: { at: string; value: unknown } | undefined;
  for (const name of path.slice(2).split(".")) {
    const current = found === undefined ? doc : found.value;
    if (!isPlainObject(current) || !Object.hasOwn(current, name)) {
      break;
    }
    found = { at: `${found?.at ?? "$"}.${name}`, value: current[name] };
  }
  return found;
}

/** An object's keys after `keysIntro` (at most 20 shown), or what `name` is instead. */
function describe(value: unknown, keysIntro: string, name: string): string {
  if (!isPlainObject(value)) {
    const kind = value === null ? "null" : Array.isArray(value) ? `an array of ${value.length}` : `a ${typeof value}`;
    return `${name} is ${kind}`;
  }
  const keys = Object.keys(value);
  const shown = keys.slice(0, 20).join(", ");
  const more = keys.length > 20 ? `, … (${keys.length} in all)` : "";
  return `${keysIntro} ${keys.length === 0 ? "none" : shown + more}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

/** The parts of a context an output mapping may write. */
export interface Writable {
  state: JsonObject;
  output: JsonObject;
}

/**
 * Writes a callee's output into the caller's context, returning new `state` and `output`
 * objects (the inputs are not changed); strict as an input mapping is.
 */
export function applyOutputMapping(mapping: Record<string, unknown>, calleeOutput: Json, target: Writable): Writable {
  let next = target;
  for (const [path, source] of Object.entries(mapping)) {
    const result = selectOutput(path, source, calleeOutput);
    if (result.found) {
      next = setTargetPath(next, path, result.value);
    }
  }
  return next;
}

/**
 * What one output-mapping entry gives its target `path` from a callee's output (JSONPath and
 * templates read the output, CEL sees it as `output`), or absent. `item` names a foreach item
 * in the error of a path that selects nothing.
 */
export function selectOutput(path: string, source: unknown, calleeOutput: Json, item?: number): Selected {
  const at = `output_mapping.${path}${item === undefined ? "" : ` (item ${item})`}`;
  return selectStrict(at, source, { doc: calleeOutput, vars: { output: calleeOutput }, noun: "output" });
}

/** Sets `state.a.b` or `output.x` immutably, creating objects along the way. */
export function setTargetPath(target: Writable, path: string, value: Json): Writable {
  const [root, ...segments] = path.split(".");
  if ((root !== "state" && root !== "output") || segments.length === 0) {
    throw EngineError.terminal("mapping.bad_target", `"${path}" must start with "state." or "output."`);
  }
  return { ...target, [root]: setIn(target[root], segments, value) };
}

/** Sets a dotted path inside a plain object immutably. */
export function setIn(object: JsonObject, segments: readonly string[], value: Json): JsonObject {
  const [head, ...rest] = segments;
  if (head === undefined) {
    return object;
  }
  // Own members only: `object["__proto__"]` would read the prototype.
  const child = Object.hasOwn(object, head) ? object[head] : undefined;
  return { ...object, [head]: rest.length === 0 ? value : setIn(isPlainObject(child) ? child : {}, rest, value) };
}

/**
 * A triggered run's input from a trigger's `input` mapping (docs/definitions.md, "Event triggers"):
 * JSONPath and templates read the event itself (`$.data.order_id`), CEL sees it as `event`.
 */
export function buildEventInput(mapping: Record<string, unknown>, event: Json | object): JsonObject {
  const scope: SourceScope = { doc: event, vars: { event }, noun: "event" };
  return objectOf(mapping, (field, source) => selectStrict(`input.${field}`, source, scope));
}
