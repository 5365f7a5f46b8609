/**
 * The engines under JSON Schema validation: ECMAScript patterns translated to RE2
 * (lib/expr/regex-syntax.ts) read as V8 reads them, the replaced format checks
 * (lib/json-schema-formats.ts) answering as the library's, and validation charging the
 * work budget of the scope it runs in.
 */
import { Validator, format as libraryFormats } from "@cfworker/json-schema";
import { describe, it } from "vitest";
import { checkEcmaPatternSyntax, compileEcmaPattern, compileIRegexp } from "../../lib/expr/regex-syntax.ts";
import { compileRe2, compileWorkAfter, matchWork, type Regex } from "../../lib/expr/regex.ts";
import { WorkBudget, withWorkBudget } from "../../lib/expr/work-budget.ts";
import { isRegex, isUrl } from "../../lib/json-schema-formats.ts";
import {
  EngineJsonSchemaValidator,
  MAX_SCHEMA_VALIDATION_STEPS,
  SCHEMA_STEPS_PER_WORK_UNIT,
  validateJson,
} from "../../lib/json-schema.ts";

function compiled(pattern: string): Regex {
  const result = compileEcmaPattern(pattern);
  if (!result.ok) {
    throw new Error(`${pattern}: ${result.message}`);
  }
  return result.regex;
}

/**
 * A deterministic generator (xorshift32), so every run tests the same strings. (A linear
 * congruential one computed in doubles loses the product's low bits: it answered 0 to
 * nearly every `random(8)`.)
 */
function makeRandom(seed: number): (below: number) => number {
  let state = seed;
  return (below) => {
    state ^= state << 13;
    state ^= state >>> 17;
    state ^= state << 5;
    return (state >>> 0) % below;
  };
}

const PATTERNS = [
  "^(a|aa)+$",
  "^[a-z0-9-]+$",
  "\\d{3}-\\d{4}",
  "^\\w+@\\w+\\.com$",
  "\\bfoo\\b",
  "\\Bo",
  "^$",
  "a|b|",
  "^(?:[A-Z][a-z]*)(?: [A-Z][a-z]*)*$",
  "^\\p{L}+$",
  "^\\p{Letter}+$",
  "\\P{L}",
  "^\\p{Script=Greek}+$",
  "[\\p{Lu}\\d]",
  "[^\\P{L}]",
  "^[\\s\\S]*$",
  ".",
  "^.$",
  "^..$",
  "[^]",
  "[]",
  "^[\\D]+$",
  "[a\\W]",
  "\\u{1F600}",
  "\\uD83D\\uDE00",
  "^[\\uD83D\\uDE00-\\uD83D\\uDE4F]$",
  "\\x41",
  "\\cJ",
  "\\0",
  "[\\b]",
  "[\\-]",
  "[a-]",
  "[-a]",
  "[a-b-c]",
  "\\/",
  "a{2,3}?",
  "a{02}",
  "(?<year>\\d{4})-(?<m>\\d\\d)",
  "^(?:\\+?1[-. ]?)?\\(?([0-9]{3})\\)?[-. ]?([0-9]{3})[-. ]?([0-9]{4})$",
  "^[a-zA-Z0-9._%+-]+@[a-zA-Z0-9.-]+\\.[a-zA-Z]{2,}$",
  "^v?(0|[1-9]\\d*)\\.(0|[1-9]\\d*)\\.(0|[1-9]\\d*)(?:-((?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*)(?:\\.(?:0|[1-9]\\d*|\\d*[a-zA-Z-][0-9a-zA-Z-]*))*))?(?:\\+([0-9a-zA-Z-]+(?:\\.[0-9a-zA-Z-]+)*))?$",
  "^\\S+$",
  "\\s",
  "^[^\\s]+$",
  "(a*)*b",
  "(|a)+c",
  "x*",
  "^\\$\\{[a-z]+\\}$",
  "\\.",
  "^[\\w.-]+$",
  "a\\b",
  "\\b",
  "^\\B$",
  "\\u2028",
  "[\\u0000-\\u001F]",
  "\\\\p\\{L\\}",
];
const ALPHABET = [
  "a",
  "b",
  "c",
  "aa",
  "A",
  "Z",
  "0",
  "9",
  "-",
  ".",
  "_",
  "@",
  " ",
  "\t",
  "\n",
  "\r",
  "\u2028",
  "\u00a0",
  "\ufeff",
  "é",
  "Ω",
  "α",
  "😀",
  "\ud800",
  "\ude00",
  "$",
  "{",
  "}",
  "+",
  "(",
  ")",
  "x",
  "foo",
  "\b",
  "\0",
  "/",
  "1",
  "2",
  "3",
  "\v",
  "\u3000",
  "\\",
  "p{L}",
  "\u1680",
];

describe("ECMAScript patterns on RE2", () => {
  it(`agree with V8 (the u flag, RegExp.prototype.test) on ${PATTERNS.length} patterns × 2,000 generated strings`, ({
    expect,
  }) => {
    const random = makeRandom(3);
    const mismatches: string[] = [];
    for (const pattern of PATTERNS) {
      const regex = compiled(pattern);
      // The same program (`(?:)` appended changes nothing it matches) with no DFA state allowed: the NFA fallback.
      const onNfa = compileRe2(`${regex.regex.pattern()}(?:)`);
      onNfa.regex.re2().dfa.stateLimit = 0;
      const v8 = new RegExp(pattern, "u");
      for (let i = 0; i < 2_000; i += 1) {
        const text = Array.from({ length: random(8) }, () => ALPHABET[random(ALPHABET.length)]).join("");
        if (v8.test(text) !== regex.regex.test(text) || v8.test(text) !== onNfa.regex.test(text)) {
          mismatches.push(`${JSON.stringify(pattern)} on ${JSON.stringify(text)}`);
        }
      }
    }
    expect(mismatches).toEqual([]);
  });

  it("read \\s, \\S, ., \\w and \\d as V8 does on every BMP code point and a sample of the others", ({ expect }) => {
    const classes = ["^\\s$", "^\\S$", "^.$", "^[\\W\\d]$", "^\\w$"].map((pattern) => ({
      pattern,
      regex: compiled(pattern),
      v8: new RegExp(pattern, "u"),
    }));
    const differing: string[] = [];
    for (let point = 0; point <= 0x10ffff; point += point < 0x10000 ? 1 : 251) {
      const char = String.fromCodePoint(point);
      for (const { pattern, regex, v8 } of classes) {
        if (v8.test(char) !== regex.regex.test(char)) {
          differing.push(`${pattern} U+${point.toString(16)}`);
        }
      }
    }
    expect(differing).toEqual([]);
  });

  it("refuse lookaround, backreferences and modifiers as unsupported, and what V8 refuses as invalid with its message", ({
    expect,
  }) => {
    const refusal = (pattern: string) => {
      const result = compileEcmaPattern(pattern);
      return result.ok ? "ok" : `${result.reason}: ${result.message}`;
    };
    for (const pattern of ["(?=a)", "(?!a)", "(?<=a)b", "(?<!a)b"]) {
      expect(refusal(pattern)).toMatch(/^unsupported: lookaround/);
    }
    expect(refusal("(a)\\1")).toMatch(/^unsupported: a backreference/);
    expect(refusal("(?<n>a)\\k<n>")).toMatch(/^unsupported: a named backreference/);
    // V8 reads inline modifiers in some versions and refuses them in others: either way they do not run.
    expect(refusal("(?i:a)")).toMatch(/^(unsupported: an inline modifier group|invalid: )/);
    expect(refusal("(")).toMatch(
      /^invalid: not a valid ECMAScript regular expression: Invalid regular expression: \/\(\/u: Unterminated group/,
    );
    expect(refusal("\\-")).toMatch(/^invalid: /);
    expect(refusal("]")).toMatch(/^invalid: /);
    expect(refusal("\\p{NotAProperty}")).toBe(
      "invalid: not a valid ECMAScript regular expression: \\p{NotAProperty} names no Unicode property of characters",
    );
    expect(refusal("x".repeat(4_097))).toMatch(/^too_large: the pattern is longer than 4096 characters/);
    expect(refusal("(a{100}){101}")).toMatch(/^too_large: /);
    expect(refusal("a{20000}")).toMatch(/^too_large: /);
  });

  it("map \\p{…} names onto RE2's tables as V8 reads them, and refuse as unsupported the names RE2 has no table for", ({
    expect,
  }) => {
    const names = ["L", "Letter", "gc=Lu", "General_Category=Cased_Letter", "LC", "C", "Other", "Cn", "Cs", "Co", "Nd"];
    const mapped = [...names, "Any", "ASCII", "Assigned", "sc=Latin", "Script=Han", "Script=Greek"];
    const differing: string[] = [];
    for (const name of mapped) {
      for (const pattern of [`^\\p{${name}}$`, `^\\P{${name}}$`, `^[^\\P{${name}}x]$`]) {
        const regex = compiled(pattern);
        const v8 = new RegExp(pattern, "u");
        for (let point = 0; point <= 0x10ffff; point += point < 0x10000 ? 7 : 997) {
          const char = String.fromCodePoint(point);
          if (v8.test(char) !== regex.regex.test(char)) {
            differing.push(`${pattern} U+${point.toString(16)}`);
          }
        }
      }
    }
    expect(differing.slice(0, 20)).toEqual([]);
    for (const name of ["Script_Extensions=Greek", "scx=Grek", "sc=Grek", "Emoji", "Alphabetic", "White_Space"]) {
      const result = compileEcmaPattern(`\\p{${name}}`);
      expect(result.ok ? "ok" : `${result.reason}: ${result.message}`, name).toMatch(/^unsupported: \\p\{/);
    }
  });

  it("check syntax as V8 does, \\p{…} escapes included, without V8 building their character sets", ({ expect }) => {
    const cases = [
      "\\p{L}",
      "[\\p{L}]",
      "[\\p{L}-z]",
      "[a-\\p{L}]",
      "\\p{L}*",
      "\\p{Script=Greek}",
      "\\p{sc=Grek}",
      "\\p{General_Category=Letter}",
      "\\p{RGI_Emoji}",
      "\\p{Foo}",
      "\\p{L",
      "\\p",
      "\\\\p{L}",
      "\\\\\\p{L}",
      "[\\P{Lu}\\d]",
      "a{2}\\p{N}{3}",
      "\\p{}",
      "\\p{ASCII}",
      "\\P{Any}",
    ];
    for (const pattern of cases) {
      let v8 = true;
      try {
        new RegExp(pattern, "u");
      } catch {
        v8 = false;
      }
      expect(checkEcmaPatternSyntax(pattern) === undefined, pattern).toBe(v8);
    }
  });

  it("run a program whose DFA gives up in time linear in input × instructions (RE2JS's own fallback took 52 s in Node)", async ({
    expect,
  }) => {
    const random = makeRandom(11);
    const text = `cd${Array.from({ length: 20_000 }, () => (random(65_536) < 32_768 ? "a" : "b")).join("")}`;
    const regex = compileRe2("[ab]*a[ab]{20}(?:[ab]*[ab]*){100}c");
    await new Promise((resolve) => setTimeout(resolve, 0));
    const started = Date.now();
    expect(regex.regex.test(text)).toBe(false);
    expect(regex.regex.testExact(text)).toBe(false);
    await new Promise((resolve) => setTimeout(resolve, 0));
    const ms = Date.now() - started;
    console.log(
      `[ab]*a[ab]{20}(?:[ab]*[ab]*){100}c, ${regex.instructions} instructions, 20,002 characters twice: ${ms} ms`,
    );
    expect(ms).toBeLessThan(10_000);
  });

  it("charge ^(a|aa)+$ linearly in the input: the work at 100,000 characters is 100 times that at 1,000", ({
    expect,
  }) => {
    const regex = compiled("^(a|aa)+$");
    const workFor = (length: number) => {
      const text = `${"a".repeat(length)}b`;
      expect(regex.regex.test(text)).toBe(false);
      return matchWork(regex, text);
    };
    const small = workFor(1_000);
    const large = workFor(100_000);
    expect(large).toBe(100_002 * regex.instructions);
    expect(large / small).toBeLessThan(101);
    expect(large / small).toBeGreaterThan(99);
  });

  it("charge a class of 600 \\p{…} by its ranges when compiled, and match it as one instruction (I-Regexp too)", ({
    expect,
  }) => {
    const classOf600 = `[${"\\p{Lu}".repeat(600)}]`;
    const ecma = compiled(classOf600);
    expect(ecma.regex.test("0".repeat(2_000))).toBe(false);
    const iregexp = compileIRegexp(classOf600);
    if (!iregexp.ok) {
      throw new Error(iregexp.message);
    }
    expect(iregexp.regex.regex.test("0".repeat(2_000))).toBe(false);
    for (const regex of [ecma, iregexp.regex]) {
      // Lu is some 650 ranges: the class is searched by halves, never tested 600 times a character.
      expect(regex.instructions).toBeLessThan(10);
      expect(compileWorkAfter(regex)).toBeGreaterThan(1_000);
    }
  });
});

/** The library's own check of a format (its table is typed as possibly missing any name). */
function libraryFormat(name: string): (value: string) => boolean {
  const check = libraryFormats[name];
  if (check === undefined) {
    throw new Error(`the library has no format ${name}`);
  }
  return check;
}

describe("format checks", () => {
  it("answer url as the library does on 100,000 generated short strings", ({ expect }) => {
    const random = makeRandom(5);
    const tokens = [
      "a",
      "1",
      "/",
      ":",
      "@",
      "%",
      ".",
      "-",
      "?",
      "#",
      " ",
      "0",
      "é",
      "a@",
      "com",
      ".com",
      "10.0.0.1",
      "8.8.8.8",
      "1.2.3.4",
      ":80",
      "//",
      "A",
      "x.io",
      "\u00a1",
    ];
    const schemes = ["http://", "https://", "ftp://", "HTTP://", "", "mailto:"];
    const differing: string[] = [];
    for (let i = 0; i < 100_000; i += 1) {
      const text =
        schemes[random(schemes.length)] +
        Array.from({ length: random(6) }, () => tokens[random(tokens.length)]).join("");
      // The library's own check backtracks exponentially: only short strings can be compared with it.
      if (text.length <= 22 && isUrl(text) !== libraryFormat("url")(text)) {
        differing.push(text);
      }
    }
    expect(differing).toEqual([]);
  });

  it("answer regex as the library does", ({ expect }) => {
    for (const text of [
      "^a+$",
      "(",
      "\\p{L}+",
      "\\p{Foo}",
      "a\\Z",
      "[\\p{L}-z]",
      "(?<n>x)\\k<n>",
      "(?=a)",
      "\\\\Z",
      "x{2,1}",
    ]) {
      expect(isRegex(text), text).toBe(libraryFormat("regex")(text));
    }
  });
});

describe("validation and budgets", () => {
  it("reports the first duplicate of uniqueItems as the library does", ({ expect }) => {
    const random = makeRandom(7);
    const values = [
      0,
      1,
      -0,
      1.5,
      "1",
      "a",
      true,
      false,
      null,
      [],
      [1],
      [1, 2],
      [2, 1],
      {},
      { a: 1 },
      { b: 1 },
      { a: 1, b: [2] },
      { b: [2], a: 1 },
    ];
    const library = new Validator({ uniqueItems: true }, "2020-12", false);
    for (let i = 0; i < 2_000; i += 1) {
      const items = Array.from({ length: random(7) }, () => values[random(values.length)]);
      const ours = validateJson({ uniqueItems: true }, items).map((problem) => problem.message);
      const theirs = library.validate(items).errors.map((error) => error.error);
      expect(ours, JSON.stringify(items)).toEqual(theirs);
    }
  });

  it("charges a validation to the work budget of the scope it runs in", ({ expect }) => {
    const budget = new WorkBudget(10_000_000, "task");
    const items = Array.from({ length: 10_000 }, (_, i) => i);
    const problems = withWorkBudget(budget, () =>
      validateJson({ type: "array", items: { type: "integer" } }, items, "input"),
    );
    expect(problems).toEqual([]);
    // 10,001 subschema applications of 30 steps each, ten steps a unit, plus the evaluation's base cost.
    expect(budget.spent).toBeGreaterThanOrEqual((10_001 * 30) / SCHEMA_STEPS_PER_WORK_UNIT);
    expect(budget.spent).toBeLessThan((10_001 * 40) / SCHEMA_STEPS_PER_WORK_UNIT);
  });

  it("stops at what the scope has left, with the scope's reason, and at once when the scope is spent", ({ expect }) => {
    const budget = new WorkBudget(10_000, "task");
    const items = Array.from({ length: 10_000 }, (_, i) => i);
    const [stopped] = withWorkBudget(budget, () =>
      validateJson({ type: "array", items: { type: "integer" } }, items, "input"),
    );
    expect(stopped).toMatchObject({
      path: "input",
      code: "schema.budget_exceeded",
      message: expect.stringContaining("work budget of this task"),
    });
    const [refused] = withWorkBudget(budget, () => validateJson({ type: "string" }, "x", "input"));
    expect(refused).toMatchObject({ path: "input", code: "schema.budget_exceeded" });
  });

  it("checks MCP tools' output schemas (chosen by their server) with the same engine: linear patterns, lookahead refused", ({
    expect,
  }) => {
    const validator = new EngineJsonSchemaValidator();
    const check = validator.getValidator<{ s: string }>({
      type: "object",
      properties: { s: { type: "string", pattern: "^(a|aa)+$" } },
    });
    expect(check({ s: "aaaa" })).toEqual({ valid: true, data: { s: "aaaa" }, errorMessage: undefined });
    expect(check({ s: `${"a".repeat(100_000)}b` })).toEqual({
      valid: false,
      data: undefined,
      errorMessage: "s: String does not match pattern. (schema.pattern)",
    });
    const lookahead = validator.getValidator({ type: "string", pattern: "^(?!x)" });
    expect(lookahead("y")).toMatchObject({
      valid: false,
      errorMessage: expect.stringContaining("schema.unsupported_pattern"),
    });
  });

  it(`stops a validation outside any scope at its own ${MAX_SCHEMA_VALIDATION_STEPS} steps`, ({ expect }) => {
    const [stopped] = validateJson({ type: "string", pattern: "[ab]*a[ab]{250}[cd]" }, "ab".repeat(400_000), "input");
    expect(stopped).toMatchObject({
      path: "input",
      code: "schema.budget_exceeded",
      message: expect.stringContaining(`budget of ${MAX_SCHEMA_VALIDATION_STEPS} steps`),
    });
  });
});
