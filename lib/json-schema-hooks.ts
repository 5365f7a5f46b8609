/**
 * What the vendored validator (`lib/vendor/cfworker-json-schema/validate.js`) calls back
 * into: every subschema it applies, every pattern and format it tests and every
 * `uniqueItems` it checks is charged to the budget of the validation running now, and
 * its nesting is bounded. Definitions (and so schemas) and the values they check may both
 * come from anyone holding a token: without this, `^(a|aa)+$` against 60 characters,
 * `uniqueItems` over 3,000 small objects (4.3 s, quadratic), `enum`s of 100,000 values
 * applied to 100,000 items, or `$ref`s that fan out (each of 30 `$defs` applying the next
 * twice: 2^30 applications) would each hold a Worker past its CPU limit.
 *
 * **Steps.** The budget counts steps (25 ns each assumed); ten are a work unit of
 * `expr/work-budget.ts`. Charged:
 * - each subschema applied to a value: {@link SUBSCHEMA_STEPS}, plus a step per item of
 *   what its keywords walk in the schema (`enum` and `const` values by their JSON nodes,
 *   `required` names, `properties` entries, `allOf` members…), plus, for an object,
 *   {@link KEY_STEPS} per key and {@link KEY_LOOP_STEPS} more per key for each keyword
 *   that loops over its keys, plus, for a string that `minLength`/`maxLength` counts, a
 *   step per 4 characters;
 * - each pattern: {@link PATTERN_TEST_STEPS} per match plus
 *   {@link PATTERN_STEPS_PER_REGEX_WORK} per work unit of `expr/regex.ts` (input
 *   characters × program instructions, charged up front: RE2 cannot count its work), and
 *   compiling it once per validation (cached or not, so the charge does not depend on
 *   what the isolate ran before), by its program, in the same units;
 * - each format check: a few steps per character (`json-schema-formats.ts`);
 * - `uniqueItems`: {@link UNIQUE_ITEM_STEPS} per item and
 *   {@link UNIQUE_ITEM_STEPS_PER_NODE} per JSON node in it (an O(n) check replaces the
 *   library's pairwise comparison, 4.3 s for 3,000 small objects).
 *
 * Against the same workloads in workerd (1 MB-scale values: 100,000 items, 100,000 keys,
 * `enum`s of 1,000, ten `patternProperties`, `uniqueItems` over 20,000 objects, a `$ref`
 * fan-out of 2^16) a step measured 1–27 ns: 25 ns is the rate the budgets assume.
 *
 * The state of the validation running now is the one piece of module state here: a
 * validation is synchronous from start to end, so it is set and restored around it
 * ({@link withValidation}) and no request ever sees another's.
 */
import { EngineError } from "./errors.ts";
import { compileEcmaPattern } from "./expr/regex-syntax.ts";
import { matchWork, type Regex } from "./expr/regex.ts";
import type { StepMeter } from "./expr/work-budget.ts";

/**
 * Deepest nesting of subschema applications (each `$ref`, `allOf` member, property
 * schema… applied inside another). In workerd, under a test, the stack held 508 nested
 * `$ref`s or `properties` (673 `anyOf`s); half of that leaves room for the caller's own
 * frames. Values nest at most 64 levels at ingress (four applications a level) and 128
 * in outputs (two).
 */
export const MAX_SCHEMA_VALIDATION_DEPTH = 256;

/**
 * What applying one subschema costs before its keywords walk anything. Measured in
 * workerd: 0.4 µs a call for `items: { type, minimum }`, 0.6–0.8 µs under `anyOf`,
 * `oneOf` or `properties` with `required`.
 */
export const SUBSCHEMA_STEPS = 30;

/** Steps per key of an object value, each time a subschema is applied to it: listing its keys (0.2 µs a key measured on 100,000 keys, under 50 `anyOf` branches). */
export const KEY_STEPS = 8;

/** Steps per key of an object value for each keyword that loops over its keys (encoding its pointer, marking it evaluated): 1.9 µs a key measured with two such keywords, subschemas included. */
export const KEY_LOOP_STEPS = 8;

/** Steps per match of a pattern besides its work: each match reads its input and starts its DFA... */
export const PATTERN_TEST_STEPS = 20;
/** ...and this much per regex work unit (`expr/regex.ts`, up to 80 ns in Node 22), matching or compiling. */
export const PATTERN_STEPS_PER_REGEX_WORK = 4;

/** Steps per item for `uniqueItems` (0.7 µs an integer measured: a key, a map entry)... */
export const UNIQUE_ITEM_STEPS = 28;
/** ...plus this much per JSON node inside it (building its canonical form: 1.7 µs for an item of 22 nodes). */
export const UNIQUE_ITEM_STEPS_PER_NODE = 4;

/** Most errors a validation collects under one subschema; the first ones say what is wrong. */
export const MAX_COLLECTED_ERRORS = 1_000;

/** A validation running now: its budget, nesting and compiled patterns. */
export interface Validation {
  readonly meter: StepMeter;
  /** Compiled patterns of the schema being applied (kept across validations of the same schema). */
  readonly patterns: Map<string, Regex | EngineError>;
  /** Patterns this validation has paid to compile. */
  readonly charged: Set<string>;
  depth: number;
}

let active: Validation | undefined;

/** Runs the synchronous `validate` with `validation` as the one the hooks charge. */
export function withValidation<T>(validation: Validation, validate: () => T): T {
  const outer = active;
  active = validation;
  try {
    return validate();
  } finally {
    active = outer;
  }
}

function current(): Validation {
  if (active === undefined) {
    throw new Error("a JSON Schema hook ran outside withValidation");
  }
  return active;
}

/** Charges `steps` to the validation running now. @throws EngineError `expr.budget_exceeded` past its limit. */
export function chargeValidation(steps: number): void {
  current().meter.charge(steps);
}

/** Called as each subschema is applied to a value: nesting and cost (see the top of this file). */
export function enterSubschema(instance: unknown, schema: unknown): void {
  const validation = current();
  validation.depth += 1;
  if (validation.depth > MAX_SCHEMA_VALIDATION_DEPTH) {
    throw new EngineError(
      "schema.too_deep",
      `subschemas nest deeper than ${MAX_SCHEMA_VALIDATION_DEPTH} while validating this value`,
    );
  }
  if (schema === null || typeof schema !== "object") {
    validation.meter.charge(SUBSCHEMA_STEPS);
    return;
  }
  const cost = costOf(schema);
  let steps = SUBSCHEMA_STEPS + cost.fixed;
  if (typeof instance === "string" && cost.countsChars) {
    steps += Math.ceil(instance.length / 4);
  } else if (instance !== null && typeof instance === "object" && !Array.isArray(instance)) {
    steps += Object.keys(instance).length * cost.perKey;
  }
  validation.meter.charge(steps);
}

/** Called as each subschema application ends, however it ends. */
export function exitSubschema(): void {
  current().depth -= 1;
}

// ───────────────────────────── what a schema node costs ─────────────────────────────

interface NodeCost {
  /** Steps every application costs beyond {@link SUBSCHEMA_STEPS}. */
  readonly fixed: number;
  /** Steps per key of an object value. */
  readonly perKey: number;
  /** Whether `minLength` / `maxLength` make it count a string's characters. */
  readonly countsChars: boolean;
}

/** Schema nodes are never mutated once registered: their cost is computed once. */
const costs = new WeakMap<object, NodeCost>();

function costOf(schema: object): NodeCost {
  let cost = costs.get(schema);
  if (cost === undefined) {
    cost = computeCost(schema as Record<string, unknown>);
    costs.set(schema, cost);
  }
  return cost;
}

const KEY_LOOP_KEYWORDS = ["propertyNames", "additionalProperties", "unevaluatedProperties"] as const;
const LIST_KEYWORDS = ["required", "allOf", "anyOf", "oneOf", "prefixItems", "type"] as const;
const MAP_KEYWORDS = ["properties", "patternProperties", "dependentSchemas"] as const;
const LIST_MAP_KEYWORDS = ["dependentRequired", "dependencies"] as const;

function computeCost(schema: Record<string, unknown>): NodeCost {
  let fixed = jsonNodes(schema.enum) + jsonNodes(schema.const);
  for (const keyword of LIST_KEYWORDS) {
    fixed += lengthOf(schema[keyword]);
  }
  for (const keyword of MAP_KEYWORDS) {
    fixed += valuesOf(schema[keyword]).length;
  }
  for (const keyword of LIST_MAP_KEYWORDS) {
    for (const value of valuesOf(schema[keyword])) {
      fixed += 1 + lengthOf(value);
    }
  }
  let loops = valuesOf(schema.patternProperties).length;
  for (const keyword of KEY_LOOP_KEYWORDS) {
    loops += keyword in schema ? 1 : 0;
  }
  const perKey = KEY_STEPS + loops * KEY_LOOP_STEPS;
  return { fixed, perKey, countsChars: "minLength" in schema || "maxLength" in schema };
}

function lengthOf(value: unknown): number {
  return Array.isArray(value) ? value.length : 0;
}

function valuesOf(value: unknown): unknown[] {
  return value !== null && typeof value === "object" && !Array.isArray(value) ? Object.values(value) : [];
}

/** JSON nodes in `value` (0 when absent), without recursion. */
function jsonNodes(value: unknown): number {
  let count = 0;
  const stack: unknown[] = value === undefined ? [] : [value];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    count += 1;
    if (item !== null && typeof item === "object") {
      for (const member of Array.isArray(item) ? item : Object.values(item)) {
        stack.push(member);
      }
    }
  }
  return count;
}

// ───────────────────────────── patterns ─────────────────────────────

/** A compiled `pattern` or `patternProperties` key, as the validator uses it. */
export interface SchemaPattern {
  test(text: string): boolean;
}

/**
 * `source` compiled for RE2 (`expr/regex-syntax.ts`), its matches charged to the
 * validation's budget. Registration refuses what does not compile; a definition stored
 * before that check fails its validation here with the reason.
 *
 * @throws EngineError `schema.invalid_pattern` / `schema.unsupported_pattern` / `schema.pattern_too_large`.
 */
export function compilePattern(source: string): SchemaPattern {
  const validation = current();
  let compiled = validation.patterns.get(source);
  if (compiled === undefined || !validation.charged.has(source)) {
    validation.charged.add(source);
    const result = compileEcmaPattern(source, (work) => validation.meter.charge(work * PATTERN_STEPS_PER_REGEX_WORK));
    compiled = result.ok
      ? result.regex
      : new EngineError(PATTERN_REFUSAL_CODES[result.reason], `pattern ${JSON.stringify(source)}: ${result.message}`);
    validation.patterns.set(source, compiled);
  }
  if (compiled instanceof EngineError) {
    throw compiled;
  }
  const regex = compiled;
  return {
    test: (text) => {
      validation.meter.charge(PATTERN_TEST_STEPS + matchWork(regex, text) * PATTERN_STEPS_PER_REGEX_WORK);
      return regex.regex.test(text);
    },
  };
}

/** The detail code of each reason a pattern is refused. */
export const PATTERN_REFUSAL_CODES = {
  invalid: "schema.invalid_pattern",
  unsupported: "schema.unsupported_pattern",
  too_large: "schema.pattern_too_large",
} as const;

// ───────────────────────────── uniqueItems ─────────────────────────────

/**
 * The first pair of equal items, as the library reports it (the lowest index that has a
 * duplicate, and its first duplicate), or undefined. Items are equal when their
 * canonical forms are (sorted keys; numbers as JSON writes them, so `1` and `1.0` are one
 * value, as `===` has them): one pass, where the library compared every pair.
 */
export function findDuplicateItems(items: readonly unknown[]): [number, number] | undefined {
  const validation = current();
  const first = new Map<string, number>();
  let found: [number, number] | undefined;
  items.forEach((item, index) => {
    validation.meter.charge(UNIQUE_ITEM_STEPS + UNIQUE_ITEM_STEPS_PER_NODE * jsonNodes(item));
    const key = canonicalKey(item);
    const seen = first.get(key);
    if (seen === undefined) {
      first.set(key, index);
    } else if (found === undefined || seen < found[0]) {
      found = [seen, index];
    }
  });
  return found;
}

function canonicalKey(value: unknown): string {
  if (Array.isArray(value)) {
    return `[${value.map(canonicalKey).join(",")}]`;
  }
  if (value !== null && typeof value === "object") {
    const record = value as Record<string, unknown>;
    return `{${Object.keys(record)
      .sort()
      .map((key) => `${JSON.stringify(key)}:${canonicalKey(record[key])}`)
      .join(",")}}`;
  }
  return JSON.stringify(value) ?? "undefined";
}

// ───────────────────────────── errors ─────────────────────────────

/**
 * Appends `source` to `target`, up to {@link MAX_COLLECTED_ERRORS}: the library spread
 * them into `push`, which overflows the stack past about 100,000 errors (an array of
 * 100,000 wrong items under an `allOf`). A non-empty list stays non-empty, so validity
 * is unchanged.
 */
export function appendErrors<T>(target: T[], source: readonly T[]): void {
  for (const error of source) {
    if (target.length >= MAX_COLLECTED_ERRORS) {
      return;
    }
    target.push(error);
  }
}
