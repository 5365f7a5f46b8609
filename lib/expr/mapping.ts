import { EngineError } from "../errors.ts";
import { evalCel } from "./cel.ts";
import { concatPartsOf, concatText } from "./concat.ts";
import { selectJsonPath } from "./jsonpath.ts";
import { renderTemplate } from "./template.ts";
import type { Json, JsonObject } from "../../schemas/common.ts";

/**
 * Input and output mappings (docs/definitions.md, "Mappings"). A source is:
 * - a string starting with `$`: a JSONPath over the source document;
 * - `{ "expr": "<CEL>" }`: CEL over the document's top-level fields;
 * - `{ "template": "<Handlebars>" }`: a string rendered from the document;
 * - `{ "path": "$…", "default": <JSON> }` or `{ "path": "$…", "optional": true }`:
 *   a JSONPath that may select nothing (in either mapping, a bare `$` path
 *   that selects nothing fails with `mapping.unresolved`);
 * - `{ "concat": [<source>, …] }`: the parts' values as one string (`./concat.ts`);
 * - any other JSON value: a literal.
 */

/** `{ "expr": "…" }` or `{ "template": "…" }`: an object with exactly that one string key. */
export function isComputed<K extends "expr" | "template">(source: unknown, key: K): source is Record<K, string> {
  return (
    typeof source === "object" &&
    source !== null &&
    !Array.isArray(source) &&
    Object.keys(source).length === 1 &&
    typeof (source as Record<string, unknown>)[key] === "string"
  );
}

/** A JSONPath marked as allowed to select nothing, with what stands in for it then (nothing: the field is left out). */
export interface OptionalPath {
  path: string;
  fallback: { found: true; value: Json } | { found: false };
}

/** `{ "path": "$…", "default": v }` or `{ "path": "$…", "optional": true }`, read as an {@link OptionalPath}. */
export function optionalPathOf(source: unknown): OptionalPath | undefined {
  if (typeof source !== "object" || source === null || Array.isArray(source)) {
    return undefined;
  }
  const { path, ...rest } = source as Record<string, unknown>;
  const keys = Object.keys(rest);
  if (typeof path !== "string" || !path.startsWith("$") || keys.length !== 1) {
    return undefined;
  }
  if (keys[0] === "default") {
    return { path, fallback: { found: true, value: rest.default as Json } };
  }
  return keys[0] === "optional" && rest.optional === true ? { path, fallback: { found: false } } : undefined;
}

type Selected = { found: true; value: Json } | { found: false };

/**
 * What a source is evaluated against: the document JSONPath and templates read,
 * CEL's variables, and what the document is called when a path selects nothing.
 */
interface SourceScope {
  doc: unknown;
  vars: Record<string, unknown>;
  noun: string;
  /** Templates render strictly, as a template that builds a request does (`RenderOptions.strict`). */
  strict?: boolean;
}

/**
 * The value of one source against `doc`, or absent (a singular JSONPath that matched nothing).
 * `strict`: a `{ "template" }` (also inside a `concat`) renders strictly, as a template that
 * builds a request does (`RenderOptions.strict`).
 */
export function evaluateSource(source: unknown, doc: Record<string, unknown>, strict = false): Selected {
  return evaluateIn(source, { doc, vars: doc, noun: "document", strict });
}

function evaluateIn(source: unknown, scope: SourceScope): Selected {
  if (typeof source === "string" && source.startsWith("$")) {
    const selected = selectJsonPath(source, scope.doc);
    return selected.found ? { found: true, value: selected.value as Json } : selected;
  }
  const optional = optionalPathOf(source);
  if (optional !== undefined) {
    const selected = selectJsonPath(optional.path, scope.doc);
    return selected.found ? { found: true, value: selected.value as Json } : optional.fallback;
  }
  if (isComputed(source, "expr")) {
    return { found: true, value: evalCel(source.expr, scope.vars) as Json };
  }
  if (isComputed(source, "template")) {
    return { found: true, value: renderTemplate(source.template, scope.doc, { strict: scope.strict === true }) };
  }
  const parts = concatPartsOf(source);
  if (parts !== undefined) {
    return { found: true, value: concatText(parts.map((part, index) => partValue(part, index, scope))) };
  }
  return { found: true, value: source as Json };
}

/**
 * A `concat` part's value. A bare `$` part that selects nothing fails with
 * `mapping.unresolved`, as a whole-value path does; an optional one without a
 * default adds nothing.
 */
function partValue(part: unknown, index: number, scope: SourceScope): Json {
  const result = evaluateIn(part, scope);
  if (result.found) {
    return result.value;
  }
  if (typeof part === "string") {
    throw unresolvedPath(`concat.${index}`, part, scope);
  }
  return "";
}

/**
 * The value one mapping entry gives its field or target (`at` names it, e.g.
 * `input_mapping.id`). A bare `$` path that selects nothing fails with
 * `mapping.unresolved` (a typo must not pass as a value that is absent); one
 * marked optional takes its default, or is absent.
 */
function selectStrict(at: string, source: unknown, scope: SourceScope): Selected {
  const result = withPath(at, () => evaluateIn(source, scope));
  if (!result.found && typeof source === "string") {
    // A bare `$` path selected nothing; one marked optional (`{ path, … }`) has said what then.
    throw unresolvedPath(at, source, scope);
  }
  return result;
}

/**
 * Builds a callee's input from an input mapping. A `$` path that selects
 * nothing fails with `mapping.unresolved`; one marked optional takes its
 * default, or leaves its field out.
 */
export function buildInput(mapping: Record<string, unknown>, doc: Record<string, unknown>): JsonObject {
  const input: JsonObject = {};
  const scope: SourceScope = { doc, vars: doc, noun: "document" };
  for (const [field, source] of Object.entries(mapping)) {
    const result = selectStrict(`input_mapping.${field}`, source, scope);
    if (result.found) {
      defineMember(input, field, result.value);
    }
  }
  return input;
}

/** Whether `value` is a source ({@link evaluateSource}) other than a literal: a `$` path, `path`, `expr`, `template` or `concat`. */
export function isComputedSource(value: unknown): boolean {
  return (
    (typeof value === "string" && value.startsWith("$")) ||
    optionalPathOf(value) !== undefined ||
    isComputed(value, "expr") ||
    isComputed(value, "template") ||
    concatPartsOf(value) !== undefined
  );
}

/**
 * A JSON value built from a shape whose leaves may be sources (an http action's `body`):
 * each computed source ({@link isComputedSource}) is replaced by its value over `doc`;
 * other arrays and objects are walked; anything else is a literal. Templates render strictly
 * (the value builds a request: an absent `{{path}}` fails). As in an input mapping,
 * a bare `$` path that selects nothing fails with `mapping.unresolved`, and one marked
 * optional (`{ "path", "optional": true }`) leaves its object member or array item out
 * (the whole value is then absent when the shape itself is such a source). The computed
 * values' JSON may total at most `maxChars` characters (`mapping.too_large`), so paths to a
 * large input repeated in the shape cannot build an unbounded body. `at` names the shape in
 * errors (`body.items.0: …`).
 */
export function buildValue(
  shape: Json,
  doc: Record<string, unknown>,
  at: string,
  maxChars: number,
): { found: true; value: Json } | { found: false } {
  const scope: SourceScope = { doc, vars: doc, noun: "document", strict: true };
  return buildNode(shape, scope, at, { left: maxChars, max: maxChars, root: at });
}

/** What {@link buildValue} may still add, and for the message, its limit and the shape's name. */
interface BuildBudget {
  left: number;
  readonly max: number;
  readonly root: string;
}

function buildNode(shape: Json, scope: SourceScope, at: string, budget: BuildBudget): Selected {
  if (isComputedSource(shape)) {
    const result = selectStrict(at, shape, scope);
    if (result.found) {
      budget.left -= JSON.stringify(result.value).length;
      if (budget.left < 0) {
        throw EngineError.terminal(
          "mapping.too_large",
          `${at}: the values computed for ${budget.root} pass ${budget.max} characters of JSON`,
        );
      }
    }
    return result;
  }
  if (Array.isArray(shape)) {
    const items = shape.map((item, index) => buildNode(item, scope, `${at}.${index}`, budget));
    return { found: true, value: items.flatMap((item) => (item.found ? [item.value] : [])) };
  }
  if (shape !== null && typeof shape === "object") {
    const object: JsonObject = {};
    for (const [key, member] of Object.entries(shape)) {
      const result = buildNode(member, scope, `${at}.${key}`, budget);
      if (result.found) {
        defineMember(object, key, result.value);
      }
    }
    return { found: true, value: object };
  }
  return { found: true, value: shape };
}

/**
 * A `$` path selected nothing: name it, what the document has at its top and
 * where the selection stopped, and how to mark it optional.
 */
function unresolvedPath(at: string, path: string, scope: SourceScope): EngineError {
  const stopped = stoppedAt(path, scope.doc);
  const near = stopped === undefined ? "" : `; ${describeAt(stopped.at, stopped.value)}`;
  return EngineError.terminal(
    "mapping.unresolved",
    `${at}: ${path} selects nothing (${describeTop(scope.noun, scope.doc)}${near}); ` +
      `mark a value that may be absent with { "path": "${path}", "default": … } or { "path": "${path}", "optional": true }`,
  );
}

/**
 * For a plain dotted path (`$.a.b.c`), the deepest value along it that exists,
 * other than the document itself: where the selection stopped.
 */
function stoppedAt(path: string, doc: unknown): { at: string; value: unknown } | undefined {
  if (!/^\$(\.[A-Za-z_][A-Za-z0-9_-]*)+$/.test(path)) {
    return undefined;
  }
  let found: { at: string; value: unknown } | undefined;
  let current: unknown = doc;
  let at = "$";
  for (const name of path.slice(2).split(".")) {
    if (!isPlainObject(current) || !Object.hasOwn(current, name)) {
      break;
    }
    current = current[name];
    at = `${at}.${name}`;
    found = { at, value: current };
  }
  return found;
}

function describeTop(noun: string, doc: unknown): string {
  return isPlainObject(doc) ? `the ${noun}'s top-level keys are ${describeKeys(doc)}` : `the ${noun} is ${kindOf(doc)}`;
}

function describeAt(at: string, value: unknown): string {
  return isPlainObject(value) ? `${at} has ${describeKeys(value)}` : `${at} is ${kindOf(value)}`;
}

function kindOf(value: unknown): string {
  if (value === null) {
    return "null";
  }
  if (Array.isArray(value)) {
    return `an array of ${value.length}`;
  }
  return typeof value === "object" ? "an object" : `a ${typeof value}`;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return value !== null && typeof value === "object" && !Array.isArray(value);
}

function describeKeys(value: object): string {
  const keys = Object.keys(value);
  const shown = keys.slice(0, 20).join(", ");
  return keys.length === 0 ? "none" : keys.length > 20 ? `${shown}, … (${keys.length} in all)` : shown;
}

/** The parts of a context an output mapping may write. */
export interface Writable {
  state: JsonObject;
  output: JsonObject;
}

/**
 * Writes a callee's output into the caller's context, returning new `state`
 * and `output` objects (the inputs are not changed). Sources are evaluated
 * against `{ "$": output }` for JSONPath and templates, and CEL sees the
 * callee's output as the variable `output`. Strict as an input mapping is: a
 * bare `$` path that selects nothing fails with `mapping.unresolved`; one
 * marked optional writes its default, or leaves its target unwritten.
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
 * What one output-mapping entry gives its target `path` from a callee's
 * output, or absent (a path marked optional that selected nothing). `item`
 * names a foreach item in the error of a path that selects nothing.
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
  if (rest.length === 0) {
    return { ...object, [head]: value };
  }
  // Own members only: `object["__proto__"]` would read the prototype.
  const child = Object.hasOwn(object, head) ? object[head] : undefined;
  const childObject = child !== null && typeof child === "object" && !Array.isArray(child) ? child : {};
  return { ...object, [head]: setIn(childObject, rest, value) };
}

/**
 * `record[key] = value` as a plain own member, whatever the key: assignment to
 * `"__proto__"` would replace the prototype (registration refuses such fields;
 * this keeps a stored definition from older rules harmless too).
 */
function defineMember(record: JsonObject, key: string, value: Json): void {
  Object.defineProperty(record, key, { value, enumerable: true, writable: true, configurable: true });
}

/**
 * Codes that keep their name through a mapping: an expression out of its
 * budget, and the mapping's own (`mapping.unresolved` of a `concat` part routes
 * a plan to its fallback as a whole-value path's does).
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

function withPath<T>(path: string, fn: () => T): T {
  try {
    return fn();
  } catch (error) {
    if (error instanceof EngineError) {
      const code = KEPT_CODES.has(error.code) ? error.code : "mapping.failed";
      throw new EngineError(code, `${path}: ${error.message}`, { retryable: false, cause: error });
    }
    throw error;
  }
}
