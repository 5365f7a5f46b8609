import { Validator, type OutputUnit, type Schema } from "@cfworker/json-schema";
import type { ErrorDetail } from "./errors.ts";

/**
 * JSON Schema validation through @cfworker/json-schema, an interpreter (Ajv
 * and similar libraries generate code, which production workerd forbids).
 * Schemas are checked when a definition is registered ({@link checkJsonSchema})
 * and applied on every call ({@link validateJson}); validators are cached per
 * schema object, which definitions never mutate.
 */

const DRAFT = "2020-12";
const validators = new WeakMap<object, Validator>();

function validatorFor(schema: Schema | boolean): Validator {
  if (typeof schema === "boolean") {
    return new Validator(schema, DRAFT, false);
  }
  let validator = validators.get(schema);
  if (!validator) {
    validator = new Validator(schema, DRAFT, false);
    validators.set(schema, validator);
  }
  return validator;
}

/** The problems of `value` against `schema`, as details whose paths start at `basePath`. */
export function validateJson(schema: unknown, value: unknown, basePath = ""): ErrorDetail[] {
  if (schema === undefined || schema === true) {
    return [];
  }
  const result = validatorFor(schema as Schema | boolean).validate(value);
  if (result.valid) {
    return [];
  }
  return leafErrors(result.errors).map((unit) => ({
    path: joinPointer(basePath, unit.instanceLocation),
    message: unit.error,
    code: `schema.${unit.keyword}`,
  }));
}

/** The innermost errors say what is wrong; the wrappers around them only repeat it. */
function leafErrors(errors: OutputUnit[]): OutputUnit[] {
  const leaves = errors.filter((unit) => !errors.some((other) => other !== unit && other.keywordLocation.startsWith(`${unit.keywordLocation}/`)));
  return leaves.length > 0 ? leaves : errors;
}

/** `#/a/0/b` → `a.0.b`, prefixed with `basePath`. */
function joinPointer(basePath: string, pointer: string): string {
  const segments = pointer
    .replace(/^#\/?/, "")
    .split("/")
    .filter((segment) => segment.length > 0)
    .map((segment) => segment.replaceAll("~1", "/").replaceAll("~0", "~"));
  return [basePath, ...segments].filter((part) => part.length > 0).join(".");
}

const TYPE_NAMES = new Set(["null", "boolean", "object", "array", "number", "integer", "string"]);
const SCHEMA_KEYWORDS = ["not", "if", "then", "else", "items", "additionalItems", "additionalProperties", "contains", "propertyNames", "unevaluatedItems", "unevaluatedProperties", "contentSchema"] as const;
const SCHEMA_MAP_KEYWORDS = ["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"] as const;
const SCHEMA_ARRAY_KEYWORDS = ["allOf", "anyOf", "oneOf", "prefixItems"] as const;
const NUMBER_KEYWORDS = ["minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"] as const;
const COUNT_KEYWORDS = ["minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "minContains", "maxContains"] as const;

/**
 * Checks that `schema` is a usable JSON Schema: the structure of the standard
 * keywords (the rules of the draft 2020-12 meta-schema that matter in
 * practice), patterns that compile, and a validator that can be built.
 */
export function checkJsonSchema(schema: unknown, path: string): ErrorDetail[] {
  const problems: ErrorDetail[] = [];
  walkSchema(schema, path, problems);
  if (problems.length === 0) {
    try {
      validatorFor(schema as Schema | boolean).validate(null);
    } catch (error) {
      problems.push({ path, message: `invalid JSON Schema: ${error instanceof Error ? error.message : String(error)}`, code: "schema.invalid" });
    }
  }
  return problems;
}

function walkSchema(schema: unknown, path: string, problems: ErrorDetail[]): void {
  if (typeof schema === "boolean") {
    return;
  }
  if (schema === null || typeof schema !== "object" || Array.isArray(schema)) {
    problems.push({ path, message: "a JSON Schema must be an object or a boolean", code: "schema.invalid" });
    return;
  }
  const node = schema as Record<string, unknown>;
  const fail = (keyword: string, message: string) =>
    problems.push({ path: `${path}.${keyword}`, message, code: "schema.invalid" });

  checkType(node.type, fail);
  for (const keyword of SCHEMA_KEYWORDS) {
    if (keyword in node) {
      walkSchema(node[keyword], `${path}.${keyword}`, problems);
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
        walkSchema(sub, `${path}.${keyword}.${key}`, problems);
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
      list.forEach((sub, index) => walkSchema(sub, `${path}.${keyword}.${index}`, problems));
    }
  }
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
  if ("required" in node && !(Array.isArray(node.required) && node.required.every((item) => typeof item === "string"))) {
    fail("required", '"required" must be an array of strings');
  }
  if ("enum" in node && !Array.isArray(node.enum)) {
    fail("enum", '"enum" must be an array');
  }
  if ("pattern" in node) {
    checkPattern(node.pattern, fail);
  }
  if ("$ref" in node && typeof node.$ref !== "string") {
    fail("$ref", '"$ref" must be a string');
  }
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

function checkPattern(pattern: unknown, fail: (keyword: string, message: string) => void): void {
  if (typeof pattern !== "string") {
    fail("pattern", '"pattern" must be a string');
    return;
  }
  try {
    new RegExp(pattern, "u");
  } catch (error) {
    fail("pattern", `"pattern" is not a valid regular expression: ${error instanceof Error ? error.message : String(error)}`);
  }
}
