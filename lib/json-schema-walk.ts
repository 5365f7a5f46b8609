import type { ErrorDetail } from "./errors.ts";
import { compileEcmaPattern } from "./expr/regex-syntax.ts";
import { PATTERN_REFUSAL_CODES } from "./json-schema-hooks.ts";

// The structural check of a JSON Schema at registration (`checkJsonSchema` in `json-schema.ts`): keywords, values, patterns.

// ───────────────────────────── registration ─────────────────────────────

const TYPE_NAMES = new Set(["null", "boolean", "object", "array", "number", "integer", "string"]);
const SCHEMA_KEYWORDS = [
  "not",
  "if",
  "then",
  "else",
  "items",
  "additionalItems",
  "additionalProperties",
  "contains",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
  "contentSchema",
] as const;
const SCHEMA_MAP_KEYWORDS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"] as const;
const SCHEMA_ARRAY_KEYWORDS = ["allOf", "anyOf", "oneOf", "prefixItems"] as const;
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"] as const;
const COUNT_KEYWORDS = [
  "minLength",
  "maxLength",
  "minProperties",
  "maxProperties",
  "minItems",
  "maxItems",
  "minContains",
  "maxContains",
] as const;
/** Keywords the validator would ignore (`$dynamicRef`) or follow into an endless loop (its `$recursiveRef` re-enters its own schema). */
const UNSUPPORTED_KEYWORDS = ["$dynamicRef", "$recursiveRef"] as const;
export function walkSchema(schema: unknown, path: string, problems: ErrorDetail[], walked: Set<object>): void {
  if (typeof schema === "boolean") {
    return;
  }
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    problems.push({ path, message: "a JSON Schema must be an object or a boolean", code: "schema.invalid" });
    return;
  }
  walked.add(schema);
  const node = schema as Record<string, unknown>;
  const fail = (keyword: string, message: string, code = "schema.invalid") =>
    problems.push({ path: `${path}.${keyword}`, message, code });

  checkType(node.type, fail);
  walkSubschemas(node, path, problems, walked, fail);
  checkValues(node, fail);
  checkDependencies(node, path, problems, walked);
  checkPatterns(node, path, problems);
  if ("$ref" in node && typeof node.$ref !== "string") {
    fail("$ref", '"$ref" must be a string');
  }
  for (const keyword of UNSUPPORTED_KEYWORDS) {
    if (keyword in node) {
      fail(keyword, `"${keyword}" is not supported; use "$ref"`, "schema.unsupported_keyword");
    }
  }
}

/** The subschemas under the keywords that hold one, a map of them or a list of them. */
function walkSubschemas(
  node: Record<string, unknown>,
  path: string,
  problems: ErrorDetail[],
  walked: Set<object>,
  fail: (keyword: string, message: string) => void,
): void {
  for (const keyword of SCHEMA_KEYWORDS) {
    if (keyword in node) {
      walkSchema(node[keyword], `${path}.${keyword}`, problems, walked);
    }
  }
  for (const keyword of SCHEMA_MAP_KEYWORDS) {
    if (keyword in node) {
      const map = node[keyword];
      if (map === null || typeof map !== "object" || Array.isArray(map)) {
        fail(keyword, `"${keyword}" must be an object of schemas`);
        continue;
      }
      for (const [key, sub] of Object.entries(map)) {
        walkSchema(sub, `${path}.${keyword}.${key}`, problems, walked);
      }
    }
  }
  for (const keyword of SCHEMA_ARRAY_KEYWORDS) {
    if (keyword in node) {
      const list = node[keyword];
      if (!Array.isArray(list) || list.length === 0) {
        fail(keyword, `"${keyword}" must be a non-empty array of schemas`);
        continue;
      }
      list.forEach((sub, index) => walkSchema(sub, `${path}.${keyword}.${index}`, problems, walked));
    }
  }
}

/** `pattern` and the keys of `patternProperties`. */
function checkPatterns(node: Record<string, unknown>, path: string, problems: ErrorDetail[]): void {
  if ("pattern" in node) {
    checkPattern(node.pattern, `${path}.pattern`, problems);
  }
  const patternProperties = node.patternProperties;
  if (patternProperties !== null && typeof patternProperties === "object" && !Array.isArray(patternProperties)) {
    for (const key of Object.keys(patternProperties)) {
      checkPattern(key, `${path}.patternProperties.${key}`, problems);
    }
  }
}

/** The keywords whose values are numbers, counts or lists. */
function checkValues(node: Record<string, unknown>, fail: (keyword: string, message: string) => void): void {
  for (const keyword of NUMBER_KEYWORDS) {
    if (keyword in node && typeof node[keyword] !== "number") {
      fail(keyword, `"${keyword}" must be a number`);
    }
  }
  for (const keyword of COUNT_KEYWORDS) {
    const value = node[keyword];
    if (keyword in node && !(typeof value === "number" && Number.isInteger(value) && value >= 0)) {
      fail(keyword, `"${keyword}" must be a non-negative integer`);
    }
  }
  if ("required" in node && !isStringList(node.required)) {
    fail("required", '"required" must be an array of strings');
  }
  if ("enum" in node && !Array.isArray(node.enum)) {
    fail("enum", '"enum" must be an array');
  }
}

/** `dependentRequired` (lists of names) and draft 7's `dependencies` (lists of names or schemas), which the validator applies too. */
function checkDependencies(
  node: Record<string, unknown>,
  path: string,
  problems: ErrorDetail[],
  walked: Set<object>,
): void {
  for (const keyword of ["dependentRequired", "dependencies"] as const) {
    if (!(keyword in node)) {
      continue;
    }
    const map = node[keyword];
    if (map === null || typeof map !== "object" || Array.isArray(map)) {
      problems.push({ path: `${path}.${keyword}`, message: `"${keyword}" must be an object`, code: "schema.invalid" });
      continue;
    }
    for (const [key, value] of Object.entries(map)) {
      const at = `${path}.${keyword}.${key}`;
      if (Array.isArray(value) || keyword === "dependentRequired") {
        if (!isStringList(value)) {
          problems.push({ path: at, message: "must be an array of property names", code: "schema.invalid" });
        }
      } else {
        walkSchema(value, at, problems, walked);
      }
    }
  }
}

function isStringList(value: unknown): boolean {
  return Array.isArray(value) && value.every((item) => typeof item === "string");
}

function checkType(type: unknown, fail: (keyword: string, message: string) => void): void {
  if (type === undefined) {
    return;
  }
  const names = Array.isArray(type) ? type : [type];
  for (const name of names) {
    if (typeof name !== "string" || !TYPE_NAMES.has(name)) {
      fail("type", `unknown type ${JSON.stringify(name)}; expected one of ${[...TYPE_NAMES].join(", ")}`);
    }
  }
}

/** A `pattern` or `patternProperties` key must run on RE2 (`expr/regex-syntax.ts`). */
function checkPattern(pattern: unknown, path: string, problems: ErrorDetail[]): void {
  if (typeof pattern !== "string") {
    problems.push({ path, message: '"pattern" must be a string', code: "schema.invalid" });
    return;
  }
  const compiled = compileEcmaPattern(pattern);
  if (!compiled.ok) {
    problems.push({
      path,
      message: `pattern ${JSON.stringify(pattern)}: ${compiled.message}`,
      code: PATTERN_REFUSAL_CODES[compiled.reason],
    });
  }
}
