import type { ErrorDetail } from "../lib/errors.ts";
import { compileCel } from "../lib/expr/cel.ts";
import { compileJsonPath } from "../lib/expr/jsonpath.ts";
import { concatPartsOf, isComputed, isComputedSource, optionalPathOf } from "../lib/expr/mapping.ts";
import { compileTemplate } from "../lib/expr/template.ts";
import { NODE_RUN_FIELDS, STEP_RUN_FIELDS } from "../lib/expr/run-scope.ts";
import { checkJsonSchema } from "../lib/json-schema.ts";
import {
  CREDENTIAL_VALUE_PATTERN,
  isCredentialHeader,
  parseReference,
  SECRET_REF_PATTERN,
  type InputMapping,
  type OutputMapping,
} from "../schemas/common.ts";
import type { DefinitionKind } from "../schemas/definitions.ts";

/**
 * What registration needs to know about definitions already stored: whether
 * `id` (any version) or `id@version` exists, and what the latest or that
 * version says (unparsed: a check parses what it reads).
 */
export interface DefinitionLookup {
  exists(kind: DefinitionKind, id: string, version: number | undefined): boolean;
  read(kind: DefinitionKind, id: string, version: number | undefined): unknown;
}

/** Records one problem at its dotted path in the bundle. */
export type Report = (path: string, message: string, code: string) => void;

/**
 * What every check of a definition needs: how to look references up, where
 * to report a problem, and the problems so far (JSON Schema checks add their
 * own details; a check may look at them to skip work that depends on a valid schema).
 */
export interface CheckContext {
  lookup: DefinitionLookup;
  report: Report;
  problems: ErrorDetail[];
}

export function checkReference(
  kind: DefinitionKind,
  ref: string,
  path: string,
  lookup: DefinitionLookup,
  report: Report,
): void {
  const parsed = parseReference(ref);
  if (!parsed) {
    report(path, `"${ref}" is not a reference ("id" or "id@version")`, "definition.bad_reference");
    return;
  }
  if (!lookup.exists(kind, parsed.id, parsed.version)) {
    const what =
      parsed.version === undefined
        ? `no ${singular(kind)} "${parsed.id}"`
        : `no version ${parsed.version} of ${singular(kind)} "${parsed.id}"`;
    report(path, `${what} is registered or in this bundle`, "definition.unknown_reference");
  }
}

function singular(kind: DefinitionKind): string {
  return kind === "mcp_servers" ? "mcp server" : kind.slice(0, -1);
}

/**
 * The variables a CEL expression sees, by where it runs (docs/definitions.md,
 * "What each source sees"), and the fields of `run` there ("The run
 * variable"): an expression that reads any other variable, or selects any
 * other field of `run`, is rejected at registration, since at run time it
 * could only fail.
 */
export const CEL_SCOPES = {
  /** A node's `when`, `repeat.until` and `input_mapping`: the run context. */
  run: { variables: ["input", "state", "output", "run"], run: NODE_RUN_FIELDS },
  /** A foreach node's `when` and `input_mapping`: the run context and the item. */
  foreachItem: { variables: ["input", "state", "output", "item", "index", "run"], run: NODE_RUN_FIELDS },
  /** A node's `output_mapping`: the callee's output. */
  nodeOutput: { variables: ["output", "run"], run: NODE_RUN_FIELDS },
  /** A step's `condition.if` and `input_mapping`: the task context. */
  task: { variables: ["input", "state", "output", "run"], run: STEP_RUN_FIELDS },
  /** A step's `output_mapping`: the callee's output. */
  calleeOutput: { variables: ["output", "run"], run: STEP_RUN_FIELDS },
  /** A `context` or `metric` action's expressions: the action input. */
  actionInput: { variables: ["input", "run"], run: STEP_RUN_FIELDS },
  /** An `event` action's `match`: the event and the step input. */
  eventMatch: { variables: ["event", "input"], run: [] },
  /** A schedule's `input`: the slot (`schedule.id`, `schedule.version`, `schedule.scheduled_at`). */
  schedule: { variables: ["schedule"], run: [] },
  /** A workflow trigger's `if` and `input`: the event. */
  trigger: { variables: ["event"], run: [] },
  /** A webhook's `event` fields: the delivery's headers and parsed body. */
  webhook: { variables: ["headers", "body"], run: [] },
  /** A limit's `key` (on a workflow, an action or a model): the run's or the step's input. */
  limitKey: { variables: ["input"], run: [] },
  /** An undo's `input_mapping`: the original call's input and output. */
  undo: { variables: ["input", "output", "run"], run: STEP_RUN_FIELDS },
} as const satisfies Record<string, { variables: readonly string[]; run: readonly string[] }>;

/** The variables one CEL context binds, and the fields of its `run`. */
export type CelScope = (typeof CEL_SCOPES)[keyof typeof CEL_SCOPES];

export function checkMappings(
  mapping: InputMapping | OutputMapping | undefined,
  path: string,
  report: Report,
  scope: CelScope,
): void {
  for (const [key, source] of Object.entries(mapping ?? {})) {
    checkSource(source, `${path}.${key}`, report, scope);
  }
}

/**
 * A JSON value whose leaves may be sources (an http action's `body`, `buildValue`): each
 * source is checked as a mapping's, wherever it sits; the rest is literal.
 */
export function checkSourceLeaves(shape: unknown, path: string, report: Report, scope: CelScope): void {
  if (isComputedSource(shape)) {
    checkSource(shape, path, report, scope);
  } else if (shape !== null && typeof shape === "object") {
    for (const [key, member] of Object.entries(shape)) {
      checkSourceLeaves(member, `${path}.${key}`, report, scope);
    }
  }
}

/** One mapping source: a `concat`'s parts are sources too, checked the same way. */
function checkSource(source: unknown, at: string, report: Report, scope: CelScope): void {
  const optional = optionalPathOf(source);
  const parts = concatPartsOf(source);
  if (typeof source === "string" && source.startsWith("$")) {
    checkJsonPath(source, at, report);
  } else if (optional !== undefined) {
    checkJsonPath(optional.path, `${at}.path`, report);
  } else if (isComputed(source, "expr")) {
    checkCel(source.expr, `${at}.expr`, report, scope);
  } else if (isComputed(source, "template")) {
    checkTemplate(source.template, `${at}.template`, report);
  } else if (parts !== undefined) {
    parts.forEach((part, index) => checkSource(part, `${at}.concat.${index}`, report, scope));
  }
}

export function checkCel(source: string | undefined, path: string, report: Report, scope: CelScope): void {
  if (source === undefined) {
    return;
  }
  const compiled = compileCel(source);
  if (!compiled.ok) {
    report(path, `CEL does not parse: ${compiled.message}`, "definition.invalid_cel");
    return;
  }
  const bound: readonly string[] = scope.variables;
  for (const name of compiled.program.variables.filter((variable) => !bound.includes(variable))) {
    report(
      path,
      `CEL reads the variable "${name}", which is not bound here; the variables here are ${bound.join(", ")}`,
      "definition.invalid_cel",
    );
  }
  const fields: readonly string[] = scope.run;
  for (const field of compiled.program.runFields.filter((name) => !fields.includes(name))) {
    report(
      path,
      `run has no field "${field}" here; its fields here are ${fields.join(", ")}`,
      "definition.invalid_cel",
    );
  }
}

export function checkJsonPath(source: string, path: string, report: Report): void {
  const compiled = compileJsonPath(source);
  if (!compiled.ok) {
    report(path, `JSONPath is not valid: ${compiled.message}`, "definition.invalid_jsonpath");
  }
}

export function checkTemplate(source: string | undefined, path: string, report: Report): void {
  if (source === undefined) {
    return;
  }
  const compiled = compileTemplate(source);
  if (!compiled.ok) {
    const why = compiled.code === "template.too_deep" ? "Handlebars nests too deep" : "Handlebars does not parse";
    report(
      path,
      `${why}: ${compiled.message}`,
      compiled.code === "template.too_deep" ? "definition.template_too_deep" : "definition.invalid_template",
    );
  }
}

export function checkSchema(schema: unknown, path: string, problems: ErrorDetail[]): void {
  if (schema !== undefined) {
    problems.push(...checkJsonSchema(schema, path));
  }
}

export function checkSecret(value: string | undefined, path: string, report: Report): void {
  if (value !== undefined && !SECRET_REF_PATTERN.test(value)) {
    report(
      path,
      'credentials must be written "$env:NAME" and set as a Worker secret, never literal',
      "definition.literal_secret",
    );
  }
}

export function checkHeaders(
  headers: Record<string, string> | undefined,
  path: string,
  report: Report,
  templated: boolean,
): void {
  for (const [name, value] of Object.entries(headers ?? {})) {
    if (isCredentialHeader(name) && !CREDENTIAL_VALUE_PATTERN.test(value)) {
      report(
        `${path}.${name}`,
        `the "${name}" header carries a credential: write it as "$env:NAME" (or "Bearer $env:NAME"), never literal`,
        "definition.literal_secret",
      );
    } else if (templated) {
      checkTemplate(value, `${path}.${name}`, report);
    }
  }
}
