/**
 * The work budget of a scope: every expression evaluated inside one coordinator event
 * (`decide`) or one task attempt (`runTask`) draws from one budget, whatever its kind.
 * Each evaluation has its own limit, but a definition decides how many evaluations one
 * event makes (a foreach evaluates its `when` once per item, up to 10,000), and workerd
 * ends an event past its CPU limit only for the same event to come again. With a budget
 * per scope the evaluation that passes it fails with `expr.budget_exceeded` (not
 * retryable), and the event completes and decides the same way every time: the budget
 * counts work, never time. Units, charges and margins: docs/definitions.md ("The budget
 * of a scope").
 *
 * The scope travels with the code that runs in it (`AsyncLocalStorage`), so a task's
 * actions, which run across `await`s alongside other tasks of the same executor call,
 * charge their own task's budget. Outside any scope (a definition checked at
 * registration) only the per-evaluation limits apply.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { EngineError } from "../errors.ts";

/** Work units one coordinator event (one `decide`) may spend on expressions: about 2.5 s of CPU at worst, of 30 s. */
export const MAX_EVENT_WORK_UNITS = 10_000_000;

/**
 * Work units one task attempt may spend on expressions, over all its steps. A task's
 * timeout does not bound this: workerd's clock stands still while code runs without I/O.
 */
export const MAX_TASK_WORK_UNITS = 10_000_000;

/** What the scope charges for each evaluation besides what its meter counted (its fixed cost, which no meter sees). */
export const EVALUATION_BASE_WORK_UNITS = 10;

/** What compiling a source costs the scope, the first time the scope meets it: this much... */
export const COMPILE_BASE_WORK_UNITS = 200;

/** ...plus this much per character (parsing and planning measure 0.3–2 µs a character). */
export const COMPILE_WORK_UNITS_PER_CHAR = 5;

/** JSONPath steps (a regex work unit is seven; a visited node is ten) per work unit. */
export const JSONPATH_STEPS_PER_WORK_UNIT = 10;

/** Work units per template render step. */
export const WORK_UNITS_PER_TEMPLATE_STEP = 1;

/** Counts an evaluation's steps (JSONPath, JSON Schema, a template rendering) against its limit. */
export class StepMeter {
  spent = 0;
  readonly limit: number;
  /** The message of the error once the limit is passed. */
  readonly limitMessage: string;
  readonly code: string;
  constructor(limit: number, limitMessage: string, code = "expr.budget_exceeded") {
    this.limit = limit;
    this.limitMessage = limitMessage;
    this.code = code;
  }
  /** @throws EngineError `code` once the limit is passed. */
  charge(steps: number): void {
    this.spent += steps;
    if (this.spent > this.limit) {
      throw new EngineError(this.code, this.limitMessage);
    }
  }
}

/** A kind of compiled program a scope remembers by source, one per expression language. */
export class CompiledKind<T> {
  /** Never read: it ties the kind to the type of its programs. */
  declare readonly program: T;
  readonly name: string;
  constructor(name: string) {
    this.name = name;
  }
}

/** The budget of one scope: a limit, what is spent, and the programs compiled in it. */
export class WorkBudget {
  spent = 0;
  readonly #compiled = new Map<CompiledKind<unknown>, Map<string, unknown>>();

  readonly limit: number;
  /** What the scope is, for messages (`coordinator event`, `task`). */
  readonly scope: string;
  constructor(limit: number, scope: string) {
    this.limit = limit;
    this.scope = scope;
  }

  /** Units left, never negative. */
  get remaining(): number {
    return Math.max(0, this.limit - this.spent);
  }

  /** Why an evaluation the scope stopped was stopped (after "CEL evaluation", "template rendering"…). */
  get exceededReason(): string {
    return `exceeded the work budget of this ${this.scope} (${this.limit} units, shared by every expression it evaluates)`;
  }

  /** Adds `units`; never throws (the next evaluation finds the budget spent). */
  spend(units: number): void {
    this.spent += units;
  }

  /**
   * The program of `source`, compiled once in this scope and charged the first time:
   * the same charge whether or not the isolate's cache already had it (so a retry in a
   * fresh isolate decides the same way), and a cache that thrashes (a definition with
   * more sources than it keeps) compiles each source at most once per scope.
   */
  compileOnce<T>(kind: CompiledKind<T>, source: string, compile: (source: string) => T): T {
    const programs = this.#compiled.get(kind) ?? new Map<string, unknown>();
    this.#compiled.set(kind, programs);
    if (programs.has(source)) {
      // Only `compile` results of this kind are stored under it.
      return programs.get(source) as T;
    }
    this.spend(COMPILE_BASE_WORK_UNITS + source.length * COMPILE_WORK_UNITS_PER_CHAR);
    const program = compile(source);
    programs.set(source, program);
    return program;
  }
}

const scopes = new AsyncLocalStorage<WorkBudget>();

/** Runs `work` (sync or async) with `budget` as the scope of every expression it evaluates. */
export function withWorkBudget<T>(budget: WorkBudget, work: () => T): T {
  return scopes.run(budget, work);
}

/** The budget of the scope running now, if any. */
export function currentWorkBudget(): WorkBudget | undefined {
  return scopes.getStore();
}

/** {@link WorkBudget.compileOnce} in the current scope, or just `compile` outside any. */
export function compileInScope<T>(kind: CompiledKind<T>, source: string, compile: (source: string) => T): T {
  const budget = scopes.getStore();
  return budget === undefined ? compile(source) : budget.compileOnce(kind, source, compile);
}

/** What one evaluation may spend, in its own unit, and how it pays. */
export interface EvaluationAllowance {
  /** The most the evaluation may spend. */
  readonly limit: number;
  /** Set when the scope's remainder, not the evaluation's own limit, sets {@link limit}: why it stops there. */
  readonly scopeReason: string | undefined;
  /** Charges the scope what the evaluation spent (at most `limit + 1`) plus its base cost. */
  settle(spent: number): void;
}

/**
 * The allowance of an evaluation whose own limit is `ownLimit`, counted in a unit of
 * which `perWorkUnit` make a work unit.
 *
 * @throws EngineError `expr.budget_exceeded` when the scope is spent already (what
 *   `exceeded` makes of the scope's reason: the evaluation's own message).
 */
export function evaluationAllowance(
  ownLimit: number,
  perWorkUnit: number,
  exceeded: (reason: string) => EngineError,
): EvaluationAllowance {
  const budget = scopes.getStore();
  if (budget === undefined) {
    return { limit: ownLimit, scopeReason: undefined, settle: () => undefined };
  }
  const left = budget.remaining - EVALUATION_BASE_WORK_UNITS;
  if (left <= 0) {
    budget.spend(EVALUATION_BASE_WORK_UNITS);
    throw exceeded(budget.exceededReason);
  }
  const scoped = left * perWorkUnit < ownLimit;
  const limit = scoped ? left * perWorkUnit : ownLimit;
  return {
    limit,
    scopeReason: scoped ? budget.exceededReason : undefined,
    settle: (spent) => budget.spend(EVALUATION_BASE_WORK_UNITS + Math.ceil(Math.min(spent, limit + 1) / perWorkUnit)),
  };
}
