import { EngineError } from "../lib/errors.ts";
import { compileCel, evalCelBool } from "../lib/expr/cel.ts";
import type { Json } from "../schemas/common.ts";
import type { EventRecord } from "../schemas/events.ts";

/**
 * A wait's `match` at the hub: a pre-filter that keeps events a wait would
 * reject from costing it a delivery. The run checks the match again, and its
 * check decides; so whenever the hub cannot tell (the expression fails on this
 * event, the work budget of the hub's call is spent, the wait's input was too
 * large to keep), the event is a candidate and is delivered.
 */

/** The largest wait `input` (compact JSON, UTF-8) a hub keeps; a wait with a larger one is offered every event of its names. */
export const MAX_WAIT_INPUT_BYTES = 16_384;

/** The `event` variable of a match: the same shape at the hub and in the run. */
export interface EventVariable {
  id: string;
  name: string;
  data: Json;
  received_at: number;
}

/** The variables a match is evaluated with: `event` (an {@link EventVariable}) and the wait's `input`. */
export function matchVariables(event: EventRecord, input: Json | undefined): Record<string, unknown> {
  const variable: EventVariable = {
    id: event.event_id,
    name: event.name,
    data: event.data,
    received_at: event.received_at,
  };
  return { event: variable, input };
}

/**
 * Checks a match when a wait registers: CEL that does not compile is refused
 * (`event.invalid_match`), never stored to fail on every event.
 */
export function checkMatch(match: string): void {
  const compiled = compileCel(match);
  if (!compiled.ok) {
    throw EngineError.terminal("event.invalid_match", compiled.message, [
      { path: "match", message: compiled.message, code: "event.invalid_match" },
    ]);
  }
}

/** What a hub keeps of a wait for matching. `input` is undefined when the wait had none or it was not kept. */
export interface StoredMatch {
  match: string | null;
  input: Json | undefined;
  inputKept: boolean;
}

/** Whether a wait is offered `event`: unless its match says false, it is. */
export function isCandidate(wait: StoredMatch, event: EventRecord): boolean {
  if (wait.match === null) {
    return true;
  }
  if (!wait.inputKept) {
    const compiled = compileCel(wait.match);
    if (!compiled.ok || compiled.program.variables.includes("input")) {
      return true;
    }
  }
  try {
    return evalCelBool(wait.match, matchVariables(event, wait.input));
  } catch {
    return true; // not the hub's to decide: the run's own check reports what is wrong
  }
}

/** A wait's input as the hub stores it: its JSON text, or null (with `kept: false`) when it is larger than the cap. */
export function inputToStore(input: Json | undefined): { text: string | null; kept: boolean } {
  if (input === undefined) {
    return { text: null, kept: true };
  }
  const text = JSON.stringify(input);
  // Every UTF-16 unit takes at least one UTF-8 byte: a longer text is over the cap without encoding it.
  if (text.length > MAX_WAIT_INPUT_BYTES || new TextEncoder().encode(text).byteLength > MAX_WAIT_INPUT_BYTES) {
    return { text: null, kept: false };
  }
  return { text, kept: true };
}
