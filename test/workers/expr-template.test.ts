import { describe, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import {
  MAX_TEMPLATE_NESTING_DEPTH,
  MAX_TEMPLATE_RENDER_STEPS,
  TEMPLATE_CACHE_LIMIT,
  compileTemplate,
  renderTemplate,
  type RenderOptions,
} from "../../lib/expr/template.ts";

/** The error code a render throws, or `undefined` when it renders. */
function errorCode(source: string, data: unknown = {}, options?: RenderOptions): string | undefined {
  try {
    renderTemplate(source, data, options);
    return undefined;
  } catch (thrown) {
    return thrown instanceof EngineError ? thrown.code : `not an EngineError: ${String(thrown)}`;
  }
}

function compileMessage(source: string): string {
  const compiled = compileTemplate(source);
  return compiled.ok ? "(compiled)" : compiled.message;
}

describe("paths", () => {
  const data = {
    user: { "name": "Ada", "weird key": { x: "w" }, "tags": ["a", "b"] },
    title: "T",
    items: [{ name: "one" }, { name: "two" }],
  };

  it("renders dotted and slashed paths, this and literal segments", ({ expect }) => {
    expect(renderTemplate("{{user.name}} {{user/name}} {{this.title}} {{./title}}", data)).toBe("Ada Ada T T");
    expect(renderTemplate("{{user.[weird key].x}}", data)).toBe("w");
    expect(renderTemplate("{{user.tags.[1]}} {{user.tags.[0]}}", data)).toBe("b a");
    expect(renderTemplate("{{#with title}}{{this}}{{.}}{{/with}}", data)).toBe("TT");
  });

  it("renders missing paths as nothing without failing", ({ expect }) => {
    expect(renderTemplate("[{{nope}}][{{nope.deeper.still}}][{{user.nope}}]", data)).toBe("[][][]");
  });

  it("reaches parent contexts with ../ and the root with @root", ({ expect }) => {
    expect(renderTemplate("{{#each items}}{{../title}}-{{name}} {{/each}}", data)).toBe("T-one T-two ");
    expect(renderTemplate("{{#each items}}{{#with this}}{{@root.title}}{{../title}}{{/with}}{{/each}}", data)).toBe(
      "TTTT",
    );
    // As in Handlebars, a block that keeps the same context adds no ../ level.
    expect(renderTemplate("{{#each items}}{{#if name}}{{../title}}{{/if}}{{/each}}", data)).toBe("TT");
  });

  it("treats a bare helper name as data, so fields called length or json keep working", ({ expect }) => {
    expect(renderTemplate("{{length}} {{json}} {{default}}", { length: 3, json: "j", default: "d" })).toBe("3 j d");
  });
});

describe("values", () => {
  it("renders strings as-is, numbers and booleans via String and null or undefined as nothing", ({ expect }) => {
    expect(
      renderTemplate("{{s}}|{{n}}|{{z}}|{{t}}|{{f}}|{{nul}}|{{u}}", {
        s: "x",
        n: 1.5,
        z: 0,
        t: true,
        f: false,
        nul: null,
      }),
    ).toBe("x|1.5|0|true|false||");
  });

  it("renders arrays comma-joined as Handlebars does and objects as JSON", ({ expect }) => {
    expect(renderTemplate("{{xs}}", { xs: [1, "a", null, true] })).toBe("1,a,,true");
    expect(renderTemplate("{{o}}", { o: { a: 1, b: [1, 2] } })).toBe('{"a":1,"b":[1,2]}');
    expect(renderTemplate("{{xs}}", { xs: [{ a: 1 }, [2, 3]] })).toBe('{"a":1},2,3');
  });
});

describe("blocks", () => {
  it("chooses between if, else if and else", ({ expect }) => {
    const source = "{{#if a}}A{{else if b}}B{{else if (eq c 3)}}C{{else}}none{{/if}}";
    expect(renderTemplate(source, { a: 1, b: 1 })).toBe("A");
    expect(renderTemplate(source, { b: "yes" })).toBe("B");
    expect(renderTemplate(source, { c: 3 })).toBe("C");
    expect(renderTemplate(source, {})).toBe("none");
  });

  it("treats empty arrays, zero and empty strings as false like Handlebars, and zero as true with includeZero", ({
    expect,
  }) => {
    const source = "{{#if v}}y{{else}}n{{/if}}";
    expect([[], 0, "", null, false].map((v) => renderTemplate(source, { v }))).toEqual(["n", "n", "n", "n", "n"]);
    expect([[0], 1, "0", {}].map((v) => renderTemplate(source, { v }))).toEqual(["y", "y", "y", "y"]);
    expect(renderTemplate("{{#if v includeZero=true}}y{{else}}n{{/if}}", { v: 0 })).toBe("y");
    expect(renderTemplate("{{#unless v}}empty{{else}}full{{/unless}}", { v: [] })).toBe("empty");
  });

  it("iterates arrays with @index, @first and @last", ({ expect }) => {
    const source = "{{#each xs}}{{@index}}:{{this}}{{#if @first}}(first){{/if}}{{#unless @last}}, {{/unless}}{{/each}}";
    expect(renderTemplate(source, { xs: ["a", "b", "c"] })).toBe("0:a(first), 1:b, 2:c");
  });

  it("iterates objects with @key and renders else for empty collections", ({ expect }) => {
    expect(
      renderTemplate("{{#each o}}{{@key}}={{this}}{{#unless @last}}&{{/unless}}{{/each}}", { o: { a: 1, b: 2 } }),
    ).toBe("a=1&b=2");
    expect(renderTemplate("{{#each o}}x{{else}}empty{{/each}}", { o: {} })).toBe("empty");
    expect(renderTemplate("{{#each xs}}x{{else}}empty{{/each}}", { xs: [] })).toBe("empty");
    expect(renderTemplate("{{#each xs}}x{{else}}empty{{/each}}", { xs: "not a list" })).toBe("empty");
  });

  it("reaches the outer loop's index with @../index", ({ expect }) => {
    const source = "{{#each rows}}{{#each this}}{{@../index}}.{{@index}}={{this}};{{/each}}{{/each}}";
    expect(renderTemplate(source, { rows: [["a", "b"], ["c"]] })).toBe("0.0=a;0.1=b;1.0=c;");
  });

  it("binds block params on each and with", ({ expect }) => {
    expect(renderTemplate("{{#each xs as |item i|}}{{i}}={{item.n}} {{/each}}", { xs: [{ n: "a" }, { n: "b" }] })).toBe(
      "0=a 1=b ",
    );
    expect(renderTemplate("{{#each o as |value key|}}{{key}}:{{value}} {{/each}}", { o: { x: 1 } })).toBe("x:1 ");
    expect(
      renderTemplate("{{#each outer as |o|}}{{#each o.inner as |i|}}{{o.name}}{{i}} {{/each}}{{/each}}", {
        outer: [{ name: "A", inner: [1, 2] }],
      }),
    ).toBe("A1 A2 ");
    expect(renderTemplate("{{#with user as |u|}}{{u.name}}{{/with}}", { user: { name: "Ada" } })).toBe("Ada");
  });

  it("lets a block param shadow a helper of the same name", ({ expect }) => {
    expect(renderTemplate("{{#each xs as |json|}}{{json}}{{/each}}", { xs: ["a", "b"] })).toBe("ab");
  });

  it("changes context with with and renders else for empty values", ({ expect }) => {
    expect(renderTemplate("{{#with user}}{{name}}{{else}}none{{/with}}", { user: { name: "Ada" } })).toBe("Ada");
    expect(renderTemplate("{{#with user}}{{name}}{{else}}none{{/with}}", {})).toBe("none");
  });

  it("renders Mustache-style sections and inverted sections over data", ({ expect }) => {
    expect(renderTemplate("{{#xs}}[{{this}}]{{/xs}}", { xs: [1, 2] })).toBe("[1][2]");
    expect(renderTemplate("{{#user}}{{name}}{{/user}}", { user: { name: "Ada" } })).toBe("Ada");
    expect(renderTemplate("{{#flag}}on{{else}}off{{/flag}}", { flag: false })).toBe("off");
    expect(renderTemplate("{{^xs}}none{{/xs}}", { xs: [] })).toBe("none");
  });

  it("uses comparison helpers as blocks", ({ expect }) => {
    expect(renderTemplate('{{#eq status "ok"}}fine{{else}}bad{{/eq}}', { status: "ok" })).toBe("fine");
    expect(renderTemplate("{{#and a b}}both{{else}}not both{{/and}}", { a: 1, b: 0 })).toBe("not both");
  });

  it("emits raw blocks verbatim", ({ expect }) => {
    expect(renderTemplate("{{{{raw}}}}{{not rendered}} {{#if}}{{{{/raw}}}}!", {})).toBe("{{not rendered}} {{#if}}!");
  });

  it("renders comments as nothing", ({ expect }) => {
    expect(renderTemplate("a{{! short }}b{{!-- long }} --}}c", {})).toBe("abc");
  });
});

describe("whitespace", () => {
  it("strips whitespace next to ~ as Handlebars does", ({ expect }) => {
    expect(renderTemplate("a  {{~x~}}  b", { x: "X" })).toBe("aXb");
    expect(renderTemplate("{{#each xs ~}}\n  {{this}}\n{{~/each}}", { xs: ["a", "b"] })).toBe("ab");
    expect(renderTemplate("{{#if a~}} x {{~else~}} y {{~/if}}", { a: false })).toBe("y");
  });

  it("removes standalone block, else and comment lines", ({ expect }) => {
    const source = "list:\n{{#each xs}}\n  - {{this}}\n{{/each}}\n{{! note }}\nend\n";
    expect(renderTemplate(source, { xs: ["a", "b"] })).toBe("list:\n  - a\n  - b\nend\n");
    const ifElse = "{{#if ok}}\nyes\n{{else}}\nno\n{{/if}}\n";
    expect(renderTemplate(ifElse, { ok: true })).toBe("yes\n");
    expect(renderTemplate(ifElse, { ok: false })).toBe("no\n");
  });

  it("keeps a line that has content besides the tag", ({ expect }) => {
    expect(renderTemplate("a {{#if t}}b{{/if}}\nc", { t: true })).toBe("a b\nc");
  });
});

describe("helpers", () => {
  it("serialises JSON with an optional indent", ({ expect }) => {
    expect(renderTemplate("{{json o}}", { o: { a: [1, "x"] } })).toBe('{"a":[1,"x"]}');
    expect(renderTemplate("{{json o 2}}", { o: { a: 1 } })).toBe('{\n  "a": 1\n}');
    expect(renderTemplate("{{json s}}|{{json missing}}", { s: 'q"' })).toBe('"q\\""|null');
  });

  it("compares with eq, ne, lt, gt, lte and gte", ({ expect }) => {
    const data = { a: 1, b: 2, s: "x" };
    expect(
      renderTemplate("{{eq a 1}} {{eq a '1'}} {{ne a b}} {{lt a b}} {{gt a b}} {{lte a 1}} {{gte b 3}}", data),
    ).toBe("true false true true false true false");
    expect(renderTemplate("{{lt s 5}} {{lt 'a' 'b'}}", data)).toBe("false true");
  });

  it("combines with and, or and not", ({ expect }) => {
    expect(renderTemplate("{{and a b}} {{or a z}} {{not z}} {{not (or z z)}}", { a: 1, b: "x", z: 0 })).toBe(
      "true true true true",
    );
  });

  it("falls back with default and builds strings with concat and the case helpers", ({ expect }) => {
    const data = { empty: "", name: " Ada ", n: 0 };
    expect(renderTemplate("{{default missing empty 'fb'}}|{{default n 'x'}}", data)).toBe("fb|0");
    expect(renderTemplate("{{concat 'a' n '-' missing 'b'}}", data)).toBe("a0-b");
    expect(renderTemplate("[{{trim name}}] {{uppercase name}} {{lowercase 'MiX'}}", data)).toBe("[Ada]  ADA  mix");
  });

  it("joins arrays and measures lengths", ({ expect }) => {
    const data = { xs: ["a", "b"], o: { a: 1, b: 2, c: 3 }, s: "héllo" };
    expect(renderTemplate("{{join xs}}|{{join xs '/'}}", data)).toBe("a, b|a/b");
    expect(renderTemplate("{{length xs}} {{length o}} {{length s}} {{length missing}}", data)).toBe("2 3 5 0");
  });

  it("looks up properties by computed key", ({ expect }) => {
    const data = { map: { a: "A" }, key: "a", xs: ["x", "y"], users: { u1: { name: "Ada" } }, id: "u1" };
    expect(
      renderTemplate("{{lookup map key}} {{lookup xs 1}} {{#with (lookup users id)}}{{name}}{{/with}}", data),
    ).toBe("A y Ada");
  });

  it("encodes URL components and treats log as a no-op", ({ expect }) => {
    expect(renderTemplate("{{urlencode q}}", { q: "a b&c/é" })).toBe("a%20b%26c%2F%C3%A9");
    expect(renderTemplate("a{{log 'x' level='warn'}}b", {})).toBe("ab");
  });

  it("reads sub-expression results by path", ({ expect }) => {
    expect(renderTemplate("{{(lookup users id).name}}", { users: { u: { name: "Ada" } }, id: "u" })).toBe("Ada");
  });
});

describe("escaping", () => {
  const data = { x: `<a href="q">&'=\`</a>`, q: "a b/c?d=e&f" };

  it("leaves double and triple stashes raw by default", ({ expect }) => {
    expect(renderTemplate("{{x}}|{{{x}}}|{{&x}}", data)).toBe(`${data.x}|${data.x}|${data.x}`);
  });

  it("percent-encodes double stashes in url mode, leaves triple stashes raw and does not double-encode urlencode", ({
    expect,
  }) => {
    expect(renderTemplate("https://h/s?q={{q}}&raw={{{q}}}&u={{urlencode q}}", data, { escape: "url" })).toBe(
      "https://h/s?q=a%20b%2Fc%3Fd%3De%26f&raw=a b/c?d=e&f&u=a%20b%2Fc%3Fd%3De%26f",
    );
  });

  it("survives lone surrogates in url mode", ({ expect }) => {
    expect(renderTemplate("{{s}}", { s: "a\uD800b" }, { escape: "url" })).toBe("a%EF%BF%BDb");
  });
});

describe("partials and decorators", () => {
  /** The code rendering fails with and the compile message, for a template that must be refused. */
  function refusal(source: string): [string | undefined, string] {
    return [errorCode(source, { name: "Ada", user: { name: "Bob" }, xs: [1, 2] }), compileMessage(source)];
  }

  it("refuses partials in every form at compile time with template.invalid, since no definition field supplies one", ({
    expect,
  }) => {
    const partials = [
      "{{> greet}}",
      "{{> greet user}}",
      '{{> greet user name="Cy"}}',
      '{{> "greet"}}',
      "items:\n  {{> list}}\nend",
      "{{> constructor}}",
      "{{> toString}}",
      "{{> __proto__}}",
      "{{> @partial-block}}",
      "{{> (whichPartial)}}",
    ];
    for (const source of partials) {
      const [code, message] = refusal(source);
      expect([source, code]).toEqual([source, "template.invalid"]);
      expect(message, source).toMatch(/partials \(\{\{> name\}\}\) are not supported at line \d+, column \d+/);
    }
    expect(refusal("{{#> layout}}fallback{{/layout}}")).toEqual([
      "template.invalid",
      expect.stringMatching(/partial blocks .* are not supported/),
    ]);
  });

  it("refuses inline partials and other decorators at compile time with template.invalid", ({ expect }) => {
    const inline = '{{#*inline "row"}}[{{this}}]{{/inline}}{{#each xs}}{{> row}}{{/each}}';
    expect(refusal(inline)).toEqual(["template.invalid", expect.stringMatching(/decorators are not supported/)]);
    expect(refusal("{{#*custom}}x{{/custom}}")).toEqual([
      "template.invalid",
      expect.stringMatching(/decorators are not supported/),
    ]);
    expect(refusal("{{*decorator}}")).toEqual([
      "template.invalid",
      expect.stringMatching(/decorators .* are not supported/),
    ]);
  });
});

describe("compile-time validation", () => {
  it("rejects Handlebars that does not parse, naming the line", ({ expect }) => {
    expect(compileMessage("line one\n{{#if a}}\nx\n{{/iff}}")).toMatch(
      /does not parse at line 2: if doesn't match iff/,
    );
    expect(compileMessage("a\n{{#if x}}\nbody")).toMatch(/does not parse at line 3: the template ends before/);
    expect(compileMessage("{{#if a}}open")).toMatch(/does not parse at line 1/);
    expect(compileMessage("x {{foo}")).toMatch(/unexpected character "}"/);
  });

  it("rejects unknown helpers and calls on things that are not helpers", ({ expect }) => {
    expect(compileMessage("a\n{{shout name}}")).toMatch(/unknown helper "shout" .* at line 2, column 1/);
    expect(compileMessage("{{user.greet 'x'}}")).toMatch(/"user.greet" is not a helper/);
    expect(compileMessage("{{#each xs as |f|}}{{f 1}}{{/each}}")).toMatch(/"f" is not a helper/);
    expect(compileMessage("{{x (nope 1)}}")).toMatch(/unknown helper "x"/);
    expect(compileMessage("{{this.x 1}}")).toMatch(/"this.x" is not a helper/);
    expect(compileMessage("{{uppercase (nope 1)}}")).toMatch(/unknown helper "nope"/);
  });

  it("rejects helpers used the wrong way", ({ expect }) => {
    expect(compileMessage("{{if a}}")).toMatch(/"if" is a block helper/);
    expect(compileMessage("{{#each}}x{{/each}}")).toMatch(/"each" takes exactly 1 argument, got 0/);
    expect(compileMessage("{{#json a}}x{{/json}}")).toMatch(/"json" cannot open a block/);
    expect(compileMessage("{{eq a}}")).toMatch(/"eq" takes exactly 2 arguments, got 1/);
    expect(compileMessage("{{json a bogus=1}}")).toMatch(/takes no hash argument "bogus"/);
    expect(compileMessage("{{#if a as |x|}}{{/if}}")).toMatch(/block params .* only supported on #each and #with/);
    expect(compileMessage("{{#with a as |x y|}}{{/with}}")).toMatch(/at most 1 block param/);
  });

  it("rejects unsupported features clearly", ({ expect }) => {
    expect(compileMessage("{{*decorator}}")).toMatch(/decorators/);
    expect(compileMessage("{{#*custom}}x{{/custom}}")).toMatch(/decorators are not supported/);
    expect(compileMessage("{{#> layout}}fallback{{/layout}}")).toMatch(/partial blocks/);
    expect(compileMessage("{{> @partial-block}}")).toMatch(/partials .* are not supported/);
    expect(compileMessage("{{> (whichPartial)}}")).toMatch(/partials .* are not supported/);
    expect(compileMessage("{{a=1}}")).toMatch(/hash literals/);
  });

  it("throws template.invalid from renderTemplate for a template that does not compile", ({ expect }) => {
    expect(errorCode("{{#if}}", {})).toBe("template.invalid");
    expect(errorCode("{{nope 1}}", {})).toBe("template.invalid");
  });

  it("throws template.render_failed for data that cannot be rendered", ({ expect }) => {
    const cyclic: Record<string, unknown> = { a: 1 };
    cyclic.self = cyclic;
    expect(errorCode("{{json c}}", { c: cyclic })).toBe("template.render_failed");
  });
});

describe("cache", () => {
  it("parses a template once and reuses it", ({ expect }) => {
    const first = compileTemplate("cached {{x}}");
    const second = compileTemplate("cached {{x}}");
    expect(first.ok && second.ok && first.template === second.template).toBe(true);
    expect(first.ok && first.template.render({ x: 1 })).toBe("cached 1");
  });

  it("drops the least recently used template beyond the limit", ({ expect }) => {
    const kept = compileTemplate("kept {{x}}");
    const dropped = compileTemplate("dropped {{x}}");
    for (let index = 0; index < TEMPLATE_CACHE_LIMIT; index += 1) {
      compileTemplate(`filler ${index} {{x}}`);
      if (index % 100 === 0) {
        compileTemplate("kept {{x}}"); // touching it keeps it recent
      }
    }
    const keptAgain = compileTemplate("kept {{x}}");
    const droppedAgain = compileTemplate("dropped {{x}}");
    expect(kept.ok && keptAgain.ok && kept.template === keptAgain.template).toBe(true);
    expect(dropped.ok && droppedAgain.ok && dropped.template !== droppedAgain.template).toBe(true);
  });
});

/** `{{#if a}}` `depth` times around `x`. */
function nestedIfs(depth: number): string {
  return `${"{{#if a}}".repeat(depth)}x${"{{/if}}".repeat(depth)}`;
}

describe("budgets: nesting depth", () => {
  it("refuses 4,000 nested #if (64 KB) with template.too_deep before parsing (3-6 s to fail before), and caches the refusal", ({
    expect,
  }) => {
    const source = nestedIfs(4_000);
    expect(source.length).toBe(64_001);
    const first = compileTemplate(source);
    expect(first.ok).toBe(false);
    if (!first.ok) {
      expect(first.code).toBe("template.too_deep");
      expect(first.message).toMatch(/nests deeper than 64/);
    }
    expect(compileTemplate(source)).toBe(first);
    expect(errorCode(source, { a: true })).toBe("template.too_deep");
  });

  it("accepts nesting up to the limit and refuses one level more", ({ expect }) => {
    expect(renderTemplate(nestedIfs(MAX_TEMPLATE_NESTING_DEPTH), { a: true })).toBe("x");
    expect(errorCode(nestedIfs(MAX_TEMPLATE_NESTING_DEPTH + 1), { a: true })).toBe("template.too_deep");
    expect(renderTemplate("{{#if a}}x{{/if}}".repeat(5_000), { a: true })).toBe("x".repeat(5_000));
  });

  it("counts chained else sections and sub-expression parentheses", ({ expect }) => {
    const chain = `{{#if a}}x${"{{else if b}}y".repeat(MAX_TEMPLATE_NESTING_DEPTH)}{{/if}}`;
    expect(compileTemplate(chain).ok).toBe(false);
    const sexpr = `{{x ${"(not ".repeat(MAX_TEMPLATE_NESTING_DEPTH + 1)}a${")".repeat(MAX_TEMPLATE_NESTING_DEPTH + 1)}}}`;
    const compiled = compileTemplate(sexpr);
    expect(compiled.ok).toBe(false);
    if (!compiled.ok) {
      expect(compiled.code).toBe("template.too_deep");
    }
    expect(renderTemplate("{{#if (and (eq a 1) (or (not b) (eq c 2)))}}yes{{/if}}", { a: 1, c: 2 })).toBe("yes");
  });

  it("reads blocks the way the parser does: closers in raw blocks, comments and escapes do not hide openers", ({
    expect,
  }) => {
    const hiding = ["{{{{raw}}}}{{/if}}{{{{/raw}}}}", "{{!-- {{/if}} --}}", "{{! {{/if}} }}", "\\{{/if}}"];
    for (const hide of hiding) {
      const source = `${`{{#if a}}${hide}`.repeat(MAX_TEMPLATE_NESTING_DEPTH + 1)}x${"{{/if}}".repeat(MAX_TEMPLATE_NESTING_DEPTH + 1)}`;
      const compiled = compileTemplate(source);
      expect(compiled.ok, hide).toBe(false);
      if (!compiled.ok) {
        expect(compiled.code, hide).toBe("template.too_deep");
      }
    }
  });
});

describe("budgets: render steps", () => {
  const l = Array.from({ length: 1_000 }, (_, i) => i);

  it("stops nested #each that would run a billion iterations within the output cap", ({ expect }) => {
    const source = "{{#each l}}{{#each ../l}}{{#each ../../l}}{{/each}}{{/each}}{{/each}}";
    let error: unknown;
    try {
      renderTemplate(source, { l });
    } catch (thrown) {
      error = thrown;
    }
    expect(error).toBeInstanceOf(EngineError);
    expect((error as EngineError).code).toBe("template.budget_exceeded");
    expect((error as EngineError).retryable).toBe(false);
    expect((error as EngineError).message).toContain(`${MAX_TEMPLATE_RENDER_STEPS}`);
  });

  it("charges helper calls by the text they return", ({ expect }) => {
    const big = { items: Array.from({ length: 2_000 }, (_, i) => ({ id: i, name: `item ${i}` })) };
    // json of ~60 KB per iteration is ~3,000 steps: 1,000 iterations would pass the budget three times though the output stays empty.
    expect(errorCode("{{#each l}}{{#if (eq (json ../big) '')}}x{{/if}}{{/each}}", { l, big })).toBe(
      "template.budget_exceeded",
    );
  });

  it("renders 10,000 items with a few statements each, and starts every rendering with a full budget", ({ expect }) => {
    const items = Array.from({ length: 10_000 }, (_, i) => ({ n: i }));
    const source = "{{#each items}}{{#if @first}}[{{/if}}{{n}}{{#unless @last}},{{/unless}}{{/each}}]";
    const text = renderTemplate(source, { items });
    expect(JSON.parse(text)).toHaveLength(10_000);
    expect(renderTemplate(source, { items })).toBe(text);
  });
});

describe("a mustache followed by a closing brace", () => {
  const data = { title: 'He said "ship it"', tags: ["a"], note: "n}" };

  it("reads {{json title}}} as the mustache and the text }, as JSON needs", ({ expect }) => {
    expect(renderTemplate('{"title": {{json title}}}', data)).toBe('{"title": "He said \\"ship it\\""}');
    expect(renderTemplate('{"a": {"b": {{json tags}}}}', data)).toBe('{"a": {"b": ["a"]}}');
    expect(renderTemplate('{"a": {"b": {"c": {{json tags}}}}}', data)).toBe('{"a": {"b": {"c": ["a"]}}}');
    expect(renderTemplate("{{{note}}}}", data)).toBe("n}}");
    expect(renderTemplate('{{#each tags}}{"t": {{json this}}}{{/each}}', data)).toBe('{"t": "a"}');
    expect(renderTemplate('{{#if note}}{"n": {{json note}}}{{else}}{}{{/if}}}', data)).toBe('{"n": "n}"}}');
    expect(renderTemplate('{{json "}}}"}}}', data)).toBe('"}}}"}');
  });

  it("leaves what parsed before unchanged: triple-stashes, raw blocks, spaced braces", ({ expect }) => {
    expect(renderTemplate('{"title": {{json title}} }', data)).toBe('{"title": "He said \\"ship it\\"" }');
    expect(renderTemplate("{{{note}}}", data)).toBe("n}");
    expect(renderTemplate("{{{{raw}}}} {{x}}} {{{{/raw}}}}", data)).toBe(" {{x}}} ");
    expect(renderTemplate("{{~json tags~}}}", data)).toBe('["a"]}');
  });

  it("compiles in bounded time when the braces would open a raw block the lexer never closes", ({ expect }) => {
    // `}}}}` after `{{x` put Handlebars' lexer in its raw-block state, where measuring the
    // template's nesting read the end of input forever.
    expect(compileTemplate('{"a": {"b": {{json x}}}}').ok).toBe(true);
    expect(compileMessage("{{{{raw}}}} never closed")).toMatch(/does not parse/);
  });

  it("says how to write it when a source is parsed as written", ({ expect }) => {
    expect(compileMessage("\uFDD0{{json x}}}")).toMatch(/write \{\{json x\}\} \} with a space/);
  });
});

describe("security", () => {
  const prototypeNames = Object.getOwnPropertyNames(Object.prototype).sort();

  function expectPrototypesUntouched(
    expect: (value: unknown) => { toBe(v: unknown): void; toEqual(v: unknown): void },
  ): void {
    expect(Object.getOwnPropertyNames(Object.prototype).sort()).toEqual(prototypeNames);
    expect(({} as Record<string, unknown>).polluted).toBe(undefined);
    expect(({} as Record<string, unknown>).isAdmin).toBe(undefined);
  }

  it("resolves prototype members to nothing, for paths, lookup, each and with", ({ expect }) => {
    const data = { name: "s", items: [1], user: { name: "Ada" } };
    const payloads = [
      "{{constructor}}",
      "{{constructor.name}}",
      "{{constructor.constructor}}",
      "{{__proto__}}",
      "{{__proto__.polluted}}",
      "{{user.__proto__.constructor}}",
      "{{prototype}}",
      "{{toString}}",
      "{{valueOf}}",
      "{{hasOwnProperty}}",
      "{{__defineGetter__}}",
      "{{__lookupGetter__}}",
      "{{name.constructor.name}}",
      "{{name.length}}",
      "{{items.constructor}}",
      "{{items.map}}",
      "{{lookup this '__proto__'}}",
      "{{lookup this 'constructor'}}",
      "{{lookup (lookup this 'constructor') 'prototype'}}",
      "{{lookup (lookup user 'constructor') 'name'}}",
      "{{#each __proto__}}x{{/each}}",
      "{{#each constructor}}x{{/each}}",
      "{{#with __proto__}}x{{/with}}",
      "{{#with constructor}}{{name}}{{/with}}",
      "{{#__proto__}}x{{/__proto__}}",
      "{{#constructor}}{{name}}{{/constructor}}",
      "{{#with user as |u|}}{{u.constructor.name}}{{/with}}",
      '{{#with "s" as |string|}}{{#with string.constructor}}{{name}}x{{/with}}{{string.sub}}{{/with}}',
      '{{#with (lookup this "__proto__")}}{{polluted}}{{/with}}',
    ];
    for (const payload of payloads) {
      expect([payload, renderTemplate(payload, data)]).toEqual([payload, ""]);
    }
    expectPrototypesUntouched(expect);
  });

  it("refuses own __proto__ keys from JSON.parse and iterates only ordinary keys", ({ expect }) => {
    const data: unknown = JSON.parse('{"__proto__": {"polluted": "yes"}, "a": 1}');
    expect(renderTemplate("[{{__proto__.polluted}}][{{#each this}}{{@key}}{{/each}}][{{length this}}]", data)).toBe(
      "[][a][1]",
    );
    expectPrototypesUntouched(expect);
  });

  it("rejects the known Handlebars RCE payloads at compile time", ({ expect }) => {
    const rce = [
      '{{#with "s" as |string|}}',
      '  {{#with "e"}}',
      "    {{#with split as |conslist|}}",
      "      {{this.pop}}",
      '      {{this.push (lookup string.sub "constructor")}}',
      "      {{this.pop}}",
      "      {{#with string.split as |codelist|}}",
      "        {{this.pop}}",
      '        {{this.push "return JSON.stringify(process.env);"}}',
      "        {{this.pop}}",
      "        {{#each conslist}}",
      "          {{#with (string.sub.apply 0 codelist)}}",
      "            {{this}}",
      "          {{/with}}",
      "        {{/each}}",
      "      {{/with}}",
      "    {{/with}}",
      "  {{/with}}",
      "{{/with}}",
    ].join("\n");
    const payloads = [
      rce,
      '{{constructor.constructor "return process"}}',
      "{{#with this as |obj|}}{{#with (obj.constructor.keys '1') as |arr|}}{{arr.pop}}{{/with}}{{/with}}",
      '{{__defineGetter__ "polluted" this.toString}}',
      "{{#with __proto__}}{{__defineSetter__ 'x' 1}}{{/with}}",
      '{{lookup this "__proto__" "polluted"}}',
      "{{#blockHelperMissing this}}x{{/blockHelperMissing}}",
      "{{helperMissing 'x'}}",
    ];
    for (const payload of payloads) {
      expect([payload.slice(0, 40), errorCode(payload, { split: [] })]).toEqual([
        payload.slice(0, 40),
        "template.invalid",
      ]);
    }
    expectPrototypesUntouched(expect);
  });

  it("never calls a function, getter or toJSON found in data", ({ expect }) => {
    let calls = 0;
    const spy = (): string => {
      calls += 1;
      return "called";
    };
    const data = {
      fn: spy,
      obj: { toJSON: spy, a: 1 },
      list: [spy],
      get getter(): string {
        return spy();
      },
    };
    const templates = [
      "{{fn}}",
      "{{{fn}}}",
      "{{fn.name}}",
      "{{#fn}}x{{/fn}}",
      "{{#if fn}}x{{/if}}",
      "{{#with fn}}x{{/with}}",
      "{{#each fn}}x{{/each}}",
      "{{lookup this 'fn'}}",
      "{{getter}}",
      "{{json obj}}",
      "{{obj}}",
      "{{json this}}",
      "{{list}}",
      "{{#each list}}{{this}}{{/each}}",
    ];
    const rendered = templates.map((source) => renderTemplate(source, data));
    expect(calls).toBe(0);
    expect(rendered).toEqual([
      "",
      "",
      "",
      "",
      "",
      "",
      "",
      "",
      "",
      '{"a":1}',
      '{"a":1}',
      '{"obj":{"a":1},"list":[null]}',
      "",
      "",
    ]);
  });

  it("keeps helpers out of reach of data", ({ expect }) => {
    let calls = 0;
    const data = { eq: "data-eq", shout: () => (calls += 1), helpers: { eq: () => (calls += 1) } };
    expect(renderTemplate("{{eq}} {{helpers.eq}}", data)).toBe("data-eq ");
    expect(errorCode("{{shout 'x'}}", data)).toBe("template.invalid");
    expect(errorCode("{{helpers.eq 1 1}}", data)).toBe("template.invalid");
    expect(calls).toBe(0);
  });

  it("renders without generating code while new Function is disabled", ({ expect }) => {
    expect(() => new Function("return 1")).toThrow(/disallowed/);
    expect(renderTemplate("{{#each xs as |x|}}{{uppercase x}}{{/each}}", { xs: ["a", "b"] })).toBe("AB");
  });
});
