import { setBounded } from "../bounded-cache.ts";
import type { celEnv } from "@bufbuild/cel";
import { RE2JS } from "@bufbuild/re2";
import {
  activeCelMeter,
  CEL_REGEX_STEPS_PER_COST_UNIT,
  type CompiledRe2,
  MAX_CEL_REGEX_CHARS,
  shallowUnits,
} from "./cel-budget.ts";

// ───────────────────────────── regex (CEL `matches`) ─────────────────────────────

/** The regex engine option of `celEnv` (the library does not export its type). */
type Re2Option = NonNullable<NonNullable<Parameters<typeof celEnv>[0]>["re2"]>;

/**
 * RE2 for `matches`, charged by input length × program size. Compiling is charged too,
 * once per pattern in an evaluation ({@link CelMeter.regexes}), hit or miss in the
 * isolate's cache, so the charge does not depend on what the isolate ran before and a
 * pattern list longer than the cache cannot recompile for free.
 */
export const METERED_RE2: Re2Option = {
  compile(pattern) {
    const meter = activeCelMeter();
    if (pattern.length > MAX_CEL_REGEX_CHARS) {
      const reason = `matches() pattern is longer than ${MAX_CEL_REGEX_CHARS} characters`;
      if (meter === undefined) {
        throw new Error(reason);
      }
      meter.stop(reason);
    }
    let compiled = meter?.regexes.get(pattern);
    if (compiled === undefined) {
      // The source length is known before compiling: a quadratic literal is refused before it runs.
      meter?.charge(
        1 + shallowUnits(pattern) + Math.ceil(pattern.length ** 2 / RE2_COMPILE_CHARS_SQUARED_PER_COST_UNIT),
      );
      compiled = compileRe2(pattern);
      meter?.charge(compiled.compileUnits);
      meter?.regexes.set(pattern, compiled);
    }
    const { regex, instructions } = compiled;
    return {
      test(text) {
        activeCelMeter()?.charge(Math.ceil(((text.length + 1) * instructions) / CEL_REGEX_STEPS_PER_COST_UNIT));
        return regex.test(text);
      },
    };
  },
};

/**
 * `@bufbuild/re2` compiles a literal in time quadratic in its length: 1,020 characters
 * took 6.5 ms in workerd, about 29,000 cost units' worth. Charged as length² / this.
 */
const RE2_COMPILE_CHARS_SQUARED_PER_COST_UNIT = 36;

/**
 * Program instructions and the rune ranges of their character classes, per cost unit of
 * compiling: `[\p{L}\p{N}]{500}` (18 characters) copies a class of about 1,300 ranges 500
 * times, and took 9.7 ms.
 */
const RE2_PROGRAM_SIZE_PER_COMPILE_UNIT = 10;

const RE2_CACHE_LIMIT = 100;

const re2Cache = new Map<string, CompiledRe2>();

function compileRe2(pattern: string): CompiledRe2 {
  const hit = re2Cache.get(pattern);
  if (hit !== undefined) {
    return hit;
  }
  const regex = RE2JS.compile(pattern);
  const program = regex.re2().prog;
  let size = 0;
  for (const inst of program.inst) {
    size += 1 + inst.runes.length;
  }
  const compiled = {
    regex,
    instructions: program.numInst(),
    compileUnits: Math.ceil(size / RE2_PROGRAM_SIZE_PER_COMPILE_UNIT),
  };
  setBounded(re2Cache, pattern, compiled, RE2_CACHE_LIMIT);
  return compiled;
}
