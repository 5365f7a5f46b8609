import type { celEnv } from "@bufbuild/cel";
import { activeCelMeter, CEL_REGEX_WORK_PER_COST_UNIT, MAX_CEL_REGEX_CHARS, shallowUnits } from "./cel-budget.ts";
import { compileRe2, compileWorkAfter, compileWorkBefore, matchWork } from "./regex.ts";

// ───────────────────────────── regex (CEL `matches`) ─────────────────────────────

/** The regex engine option of `celEnv` (the library does not export its type). */
type Re2Option = NonNullable<NonNullable<Parameters<typeof celEnv>[0]>["re2"]>;

const toUnits = (work: number) => Math.ceil(work / CEL_REGEX_WORK_PER_COST_UNIT);

/**
 * The engine's RE2 (`regex.ts`) for `matches`, charged by input length × program size.
 * Compiling is charged too, once per pattern in an evaluation ({@link CelMeter.regexes}),
 * hit or miss in the isolate's cache, so the charge does not depend on what the isolate
 * ran before and a pattern list longer than the cache cannot recompile for free.
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
      meter?.charge(1 + shallowUnits(pattern) + toUnits(compileWorkBefore(pattern.length)));
      compiled = compileRe2(pattern);
      meter?.charge(toUnits(compileWorkAfter(compiled)));
      meter?.regexes.set(pattern, compiled);
    }
    const regex = compiled;
    return {
      test(text) {
        activeCelMeter()?.charge(toUnits(matchWork(regex, text)));
        return regex.regex.test(text);
      },
    };
  },
};
