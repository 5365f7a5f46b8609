import type { AST } from "@handlebars/parser";
import { EngineError } from "../errors.ts";
import { MAX_TEMPLATE_RENDER_STEPS, type TemplateCompileErrorCode, type TemplateEscape } from "./template-types.ts";
import { blockParamsOf, location } from "./template-ast.ts";
import { RUN_VARIABLE } from "./run-scope.ts";

// What a rendering carries: helper signatures, the scope frames, the step budget and partial lookup.

/** A rendering stopped by its work-budget scope (`work-budget.ts`): `expr.budget_exceeded`, as every kind of expression. */
export function scopeExceeded(reason: string): EngineError {
  return new EngineError("expr.budget_exceeded", `template rendering ${reason}`);
}

type Args = readonly unknown[];

export type HashArgs = ReadonlyMap<string, unknown>;

type BlockRenderer = (node: AST.BlockStatement, args: Args, hash: HashArgs, scope: Scope) => string;

/** A helper: arity and hash keys are checked at compile time. */
export interface HelperSpec {
  readonly min: number;
  readonly max: number;
  readonly hash?: readonly string[];
  /** Present for block helpers (`#if`, `#each`, …), usable only as blocks. */
  readonly block?: BlockRenderer;
  /** Present for value helpers, usable in mustaches and sub-expressions. */
  readonly value?: (args: Args, hash: HashArgs) => unknown;
  /** A value helper that may also open a block: the body renders when its result is truthy. */
  readonly predicate?: boolean;
  /** Block helpers that bind `as |…|` params, and how many. */
  readonly blockParams?: number;
  /** A value helper that tests its arguments (`default`): a strict rendering lets them be absent, as it does a predicate's. */
  readonly acceptsAbsent?: boolean;
}

// ───────────────────────────── render scope ─────────────────────────────

/** `this` and, through `parent`, what `../` reaches (pushed only when the context changes, as in Handlebars). */
interface ContextFrame {
  readonly value: unknown;
  readonly parent: ContextFrame | undefined;
}

/** `@index`, `@key`, `@first`, `@last` of the innermost `#each`; `parent` is what `@../` reaches. */
export interface DataFrame {
  readonly values: ReadonlyMap<string, unknown>;
  readonly parent: DataFrame | undefined;
}

/** Block params (`as |item i|`) in scope, innermost first. */
interface ParamFrame {
  readonly bindings: ReadonlyMap<string, unknown>;
  readonly parent: ParamFrame | undefined;
}

/** Inline partials (`{{#*inline}}`) visible from here, innermost first. */
interface InlineFrame {
  readonly partials: ReadonlyMap<string, AST.Program>;
  readonly parent: InlineFrame | undefined;
}

export interface RenderState {
  /** Render steps taken so far, against {@link limit}. */
  steps: number;
  /** {@link MAX_TEMPLATE_RENDER_STEPS}, or less when the work-budget scope has less left. */
  readonly limit: number;
  /** Why the rendering stops at {@link limit} when the scope, not its own budget, set it. */
  readonly scopeReason: string | undefined;
  readonly root: unknown;
  /** The reserved `run` variable (`run-scope.ts`), or undefined outside a run scope. */
  readonly run: unknown;
  readonly escape: TemplateEscape;
  readonly partials: Readonly<Record<string, string>> | undefined;
  readonly substitute: ((text: string) => string) | undefined;
  /** A `{{path}}` that selects nothing fails (`RenderOptions.strict`). */
  readonly strict: boolean;
  /** Compiles a partial's source (`template.ts`, cached and charged as every template): rendering does not import compiling. */
  readonly compilePartial: (source: string) => PartialProgram;
}

/** A compiled partial's program, or why it does not compile. */
export type PartialProgram =
  { ok: true; program: AST.Program } | { ok: false; message: string; code: TemplateCompileErrorCode };

export interface Scope {
  readonly context: ContextFrame;
  readonly data: DataFrame;
  readonly params: ParamFrame | undefined;
  readonly inline: InlineFrame | undefined;
  readonly partialDepth: number;
  readonly state: RenderState;
}

export function withContext(scope: Scope, value: unknown): Scope {
  return value === scope.context.value ? scope : { ...scope, context: { value, parent: scope.context } };
}

export function withParams(scope: Scope, program: AST.Program | undefined, values: Args): Scope {
  const names = blockParamsOf(program);
  if (names.length === 0) {
    return scope;
  }
  const bindings = new Map<string, unknown>();
  names.forEach((name, index) => bindings.set(name, values[index]));
  return { ...scope, params: { bindings, parent: scope.params } };
}

/**
 * What an unscoped path's first segment names before the data: a block param
 * in scope, else the reserved `run` variable (run-scope.ts), which the data's
 * own `run` field cannot shadow (that field is `{{this.run}}`).
 */
export function findParam(scope: Scope, name: string): { found: true; value: unknown } | { found: false } {
  for (let frame = scope.params; frame !== undefined; frame = frame.parent) {
    if (frame.bindings.has(name)) {
      return { found: true, value: frame.bindings.get(name) };
    }
  }
  const run = scope.state.run;
  return name === RUN_VARIABLE && run !== undefined ? { found: true, value: run } : { found: false };
}

export function contextAt(scope: Scope, depth: number): unknown {
  let frame: ContextFrame | undefined = scope.context;
  for (let level = 0; level < depth && frame !== undefined; level += 1) {
    frame = frame.parent;
  }
  return frame?.value;
}

export function findPartial(name: string, scope: Scope, node: AST.PartialStatement): AST.Program {
  for (let frame = scope.inline; frame !== undefined; frame = frame.parent) {
    const inline = frame.partials.get(name);
    if (inline !== undefined) {
      return inline;
    }
  }
  const partials = scope.state.partials;
  const source = partials !== undefined && Object.hasOwn(partials, name) ? partials[name] : undefined;
  if (typeof source !== "string") {
    throw new EngineError("template.render_failed", `partial "${name}" is not defined${location(node)}`);
  }
  const compiled = scope.state.compilePartial(source);
  if (!compiled.ok) {
    throw new EngineError(compiled.code, `partial "${name}": ${compiled.message}`);
  }
  return compiled.program;
}

/** A strict template's path selected nothing (`helper`: in an argument of that helper): say which, and what the data has. */
export function unresolved(path: AST.Expression, root: unknown, helper?: string): EngineError {
  const shown = path.type === "PathExpression" ? (path as AST.PathExpression).original : path.type;
  const keys =
    root !== null && typeof root === "object" && !Array.isArray(root)
      ? `its top-level keys are ${Object.keys(root).slice(0, 20).join(", ") || "none"}`
      : "it is not an object";
  const [what, fix] =
    helper === undefined
      ? [`{{${shown}}}`, `{{default ${shown} ""}}`]
      : [
          `${shown} (an argument of ${helper})`,
          `{{${helper} (default ${shown} ${helper === "json" ? "null" : '""'})}}`,
        ];
  return EngineError.terminal(
    "template.unresolved",
    `${what} selects nothing in the template's data (${keys}); mark a value that may be absent with ${fix}`,
  );
}

/**
 * In a strict rendering, a helper that renders or transforms its arguments (`json`,
 * `lowercase`, `join`, …) refuses a path argument that selects nothing, as a bare `{{path}}`
 * fails: `{{json titel}}` must not send `null`. Helpers that test a value (`default`, the
 * predicates `eq` … `not`, and the blocks `#if`, `#each`, `#with`) accept an absent one.
 */
export function requirePresent(
  helper: string,
  spec: HelperSpec,
  params: readonly AST.Expression[],
  args: Args,
  state: RenderState,
): void {
  if (!state.strict || spec.predicate === true || spec.acceptsAbsent === true) {
    return;
  }
  params.forEach((param, index) => {
    if (args[index] === undefined && param.type === "PathExpression") {
      throw unresolved(param, state.root, helper);
    }
  });
}

/**
 * @throws EngineError `template.budget_exceeded` past {@link MAX_TEMPLATE_RENDER_STEPS},
 *   `expr.budget_exceeded` past what the work-budget scope had left.
 */
export function chargeSteps(state: RenderState, steps: number): void {
  state.steps += steps;
  if (state.steps > state.limit) {
    if (state.scopeReason !== undefined) {
      throw scopeExceeded(state.scopeReason);
    }
    throw new EngineError(
      "template.budget_exceeded",
      `template rendering exceeded its budget of ${MAX_TEMPLATE_RENDER_STEPS} steps (statements, #each iterations and helper calls)`,
    );
  }
}
