import { EngineError, ensureEngineError } from "../lib/errors.ts";
import { evalCel } from "../lib/expr/cel.ts";
import type { Json } from "../schemas/common.ts";
import { MAX_LIMIT_KEY_CHARS } from "../schemas/limits.ts";

/**
 * The key of a limit use: its CEL over `input` (a run's input for a workflow's
 * limit, a step's input for an action's or model's), as a string. Without a
 * `key` every call shares one budget (the empty key). A string, number or bool
 * is a key; anything else fails with `limit.invalid_key`, and a key longer than
 * MAX_LIMIT_KEY_CHARS with `limit.key_too_long`: neither is ever truncated
 * into another key's budget.
 *
 * @throws EngineError `limit.invalid_key` (also when the CEL fails), `limit.key_too_long`.
 */
export function limitKeyOf(source: string | undefined, input: Json): string {
  if (source === undefined) {
    return "";
  }
  let value: unknown;
  try {
    value = evalCel(source, { input });
  } catch (thrown) {
    const cause = ensureEngineError(thrown);
    throw EngineError.terminal("limit.invalid_key", `the limit key "${source}" did not evaluate: ${cause.message}`);
  }
  if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
    const got = value === null ? "null" : Array.isArray(value) ? "a list" : typeof value;
    throw EngineError.terminal("limit.invalid_key", `the limit key "${source}" gave ${got}, not a string or number`);
  }
  const key = String(value);
  if (key.length > MAX_LIMIT_KEY_CHARS) {
    throw EngineError.terminal(
      "limit.key_too_long",
      `the limit key "${source}" gave ${key.length} characters, more than ${MAX_LIMIT_KEY_CHARS}`,
    );
  }
  return key;
}
