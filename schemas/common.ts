import { z } from "zod";

/** `^[a-z][a-z0-9_-]{0,62}$`: the id of every definition (docs/definitions.md, "Ids, versions and references"). */
export const DEFINITION_ID_PATTERN = /^[a-z][a-z0-9_-]{0,62}$/;

/** A definition id. */
export const DefinitionId = z
  .string()
  .regex(DEFINITION_ID_PATTERN, "must match ^[a-z][a-z0-9_-]{0,62}$ (lowercase letter first)");
export type DefinitionId = z.infer<typeof DefinitionId>;

/** `"id"` (latest at run start) or `"id@3"` (pinned). */
export const REFERENCE_PATTERN = /^([a-z][a-z0-9_-]{0,62})(?:@([1-9][0-9]{0,8}))?$/;
export const Reference = z.string().regex(REFERENCE_PATTERN, 'must be "id" or "id@<version>"');
export type Reference = z.infer<typeof Reference>;

/** Splits a reference into its id and pinned version (undefined for "latest"). */
export function parseReference(ref: string): { id: string; version: number | undefined } | undefined {
  const match = REFERENCE_PATTERN.exec(ref);
  if (!match?.[1]) {
    return undefined;
  }
  return { id: match[1], version: match[2] === undefined ? undefined : Number(match[2]) };
}

/**
 * A child workflow chosen at run time (docs/definitions.md, "Choosing work at
 * run time"): `from` (a JSONPath over the context, like a mapping source)
 * selects a workflow id, or `id@n`, which must be one of `allowed`.
 */
export const WorkflowChoice = z.strictObject({
  from: z.string().startsWith("$", "must be a JSONPath starting with $"),
  allowed: z.array(Reference).min(1).max(100),
});
export type WorkflowChoice = z.infer<typeof WorkflowChoice>;

/** Any JSON value: the one JSON type of the code base (its checking schema is {@link JsonValue}). */
export type Json = string | number | boolean | null | Json[] | { [key: string]: Json };

/**
 * Any JSON value: strings, finite numbers, booleans, null, arrays and plain
 * objects, nested. One walk over the value with a path kept only for the
 * error (zod's own `z.json()` is a recursive union that tries every branch
 * at every node: this runs on every task payload, result and journal read).
 */
export const JsonValue = z.custom<Json>().superRefine((value, ctx) => {
  const problem = firstNonJson(value);
  if (problem) {
    ctx.addIssue({ code: "custom", message: problem.message, path: problem.path });
  }
});

/** Where `value` stops being JSON (a path into it, and why), or null when it is JSON throughout. */
export function firstNonJson(value: unknown): { path: (string | number)[]; message: string } | null {
  const problem = walkJson(value, new Set());
  if (problem) {
    problem.path.reverse(); // built while unwinding, innermost key first
  }
  return problem;
}

function walkJson(value: unknown, ancestors: Set<object>): { path: (string | number)[]; message: string } | null {
  switch (typeof value) {
    case "string":
    case "boolean":
      return null;
    case "number":
      return Number.isFinite(value) ? null : { path: [], message: `expected a JSON value, got ${String(value)}` };
    case "object":
      break;
    default:
      return { path: [], message: `expected a JSON value, got ${typeof value}` };
  }
  if (value === null) {
    return null;
  }
  if (ancestors.has(value)) {
    return { path: [], message: "expected a JSON value, got a cyclic structure" };
  }
  ancestors.add(value);
  if (Array.isArray(value)) {
    for (let index = 0; index < value.length; index++) {
      const problem = walkJson(value[index], ancestors);
      if (problem) {
        problem.path.push(index);
        return problem;
      }
    }
  } else {
    const prototype: unknown = Object.getPrototypeOf(value);
    if (prototype !== Object.prototype && prototype !== null) {
      return { path: [], message: `expected a JSON value, got ${Object.prototype.toString.call(value).slice(8, -1)}` };
    }
    for (const key in value) {
      if (Object.hasOwn(value, key)) {
        const problem = walkJson((value as Record<string, unknown>)[key], ancestors);
        if (problem) {
          problem.path.push(key);
          return problem;
        }
      }
    }
  }
  ancestors.delete(value);
  return null;
}
export type JsonObject = { [key: string]: Json };
export const JsonObject = z.record(z.string(), JsonValue);

/**
 * A JSON Schema (an object or a boolean). Its validity as a JSON Schema is
 * checked when a definition is registered, not by zod.
 */
export const JsonSchema = z.union([z.boolean(), z.record(z.string(), JsonValue)]);
export type JsonSchema = z.infer<typeof JsonSchema>;

/**
 * A plan's capability allowlist (docs/plans.md): registered actions (`id`,
 * `id@n`), `tool:<name>`, `mcp:<server>/<tool>` (or `mcp:<server>/*`).
 */
export const PlanTools = z.array(z.string().min(1).max(200)).max(500);

/** High-risk plan steps (ids) whose approval gates are turned off (docs/plans.md, "Approvals"). */
export const ApprovedSteps = z.array(z.string().min(1).max(60)).max(500);

/** A CEL expression. Whether it parses is checked at registration. */
export const CelSource = z.string().min(1, "must be a non-empty CEL expression");

/**
 * Where a mapped value comes from (docs/definitions.md, "Mappings"):
 * - a string starting with `$` is a JSONPath (RFC 9535);
 * - `{ "expr": "<CEL>" }` computes a value;
 * - `{ "template": "<Handlebars>" }` renders a string;
 * - any other JSON value is a literal.
 */
export const MappingSource = JsonValue;
export type MappingSource = z.infer<typeof MappingSource>;

/**
 * Names a mapping may not write: JavaScript gives them meaning on every
 * object (`obj["__proto__"] = v` replaces the prototype), so a field or a path
 * segment with one of them would act on the object instead of naming data.
 */
export const RESERVED_KEYS: ReadonlySet<string> = new Set(["__proto__", "constructor", "prototype"]);
const RESERVED_MESSAGE = `must not be ${[...RESERVED_KEYS].map((key) => `"${key}"`).join(", ")} (reserved)`;

/** A dotted target path that starts with `state.` or `output.`. */
export const TARGET_PATH_PATTERN = /^(state|output)(\.[A-Za-z0-9_-]+)+$/;
export const TargetPath = z
  .string()
  .regex(TARGET_PATH_PATTERN, 'must be a dotted path starting with "state." or "output."')
  .refine((path) => !path.split(".").some((segment) => RESERVED_KEYS.has(segment)), {
    message: `a segment of the target path ${RESERVED_MESSAGE}`,
  });

/** A field of an input mapping. */
const MappingField = z
  .string()
  .min(1)
  .refine((field) => !RESERVED_KEYS.has(field), { message: `an input_mapping field ${RESERVED_MESSAGE}` });

/** `{ "<field>": <source> }`: builds the callee's input from the caller's context. */
export const InputMapping = z.record(MappingField, MappingSource);
export type InputMapping = z.infer<typeof InputMapping>;

/** `{ "<target path>": <source> }`: writes the callee's output into the caller's context. */
export const OutputMapping = z.record(TargetPath, MappingSource);
export type OutputMapping = z.infer<typeof OutputMapping>;

/** Defaults of a retry policy (documented in docs/definitions.md). */
export const RETRY_DEFAULTS = {
  max_attempts: 1,
  initial_delay_ms: 500,
  backoff_coefficient: 2,
  max_delay_ms: 60_000,
  jitter: true,
} as const;

/**
 * Exponential backoff. Cross-field rules are checked where the policy is
 * declared, so a run never discovers a bad policy halfway.
 */
export const RetryPolicy = z
  .strictObject({
    max_attempts: z.number().int().min(1).max(100).optional(),
    initial_delay_ms: z.number().int().min(0).max(86_400_000).optional(),
    backoff_coefficient: z.number().min(1).max(100).optional(),
    max_delay_ms: z.number().int().min(0).max(86_400_000).optional(),
    jitter: z.boolean().optional(),
  })
  .check((ctx) => {
    const initial = ctx.value.initial_delay_ms ?? RETRY_DEFAULTS.initial_delay_ms;
    const max = ctx.value.max_delay_ms ?? Math.max(initial, RETRY_DEFAULTS.max_delay_ms);
    if (max < initial) {
      ctx.issues.push({
        code: "custom",
        input: ctx.value,
        path: ["max_delay_ms"],
        message: "max_delay_ms cannot be less than initial_delay_ms",
      });
    }
  });
export type RetryPolicy = z.infer<typeof RetryPolicy>;

/** Milliseconds, bounded to a day for a step and a year for a run. */
export const TimeoutMs = z.number().int().min(1).max(86_400_000);

/** `$env:NAME`: a secret resolved from the Worker's environment at call time. */
export const SECRET_REF_PATTERN = /^\$env:([A-Z_][A-Z0-9_]*)$/;

/** A credential header value: `$env:NAME`, or a scheme word then `$env:NAME` (`Bearer $env:TOKEN`). */
export const CREDENTIAL_VALUE_PATTERN = /^(?:[A-Za-z][A-Za-z0-9-]* )?\$env:[A-Z_][A-Z0-9_]*$/;

/** Header names that carry credentials and so must use `$env:` (docs/definitions.md, "Secrets"). */
export function isCredentialHeader(name: string): boolean {
  const lower = name.toLowerCase();
  return (
    lower === "authorization" || lower === "proxy-authorization" || lower.endsWith("-key") || lower.endsWith("-token")
  );
}

/** Free text allowed on every definition for humans; ignored by the engine. */
export const Description = z.string().max(4000).optional();
