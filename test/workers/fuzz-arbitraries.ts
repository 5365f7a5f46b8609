/**
 * Generators of hostile input for the API fuzz suite (fuzz.test.ts): strings
 * with lone surrogates, NULs and odd Unicode, hostile keys, JSON values with
 * markers for very deep nesting and unrepresentable numbers, mutated
 * definition bundles, hostile URL path segments and query strings, and the
 * bodies and content types they travel in.
 */
import fc from "fast-check";
import { stringify as yamlStringify } from "yaml";

/** Characters that have broken parsers, encoders, signers and path splitters somewhere. */
const HOSTILE_CHARS = [
  "\ud800",
  "\udbff",
  "\udc00",
  "\udfff", // lone surrogates
  "\u0000",
  "\u0001",
  "\u0008",
  "\u001b",
  "\u001f",
  "\u007f",
  "\u0085",
  "\u00a0",
  "\u2028",
  "\u2029",
  "\u202e",
  "\u200b",
  "\u200d",
  "\u2060",
  "\ufeff",
  "\ufffd",
  "\uffff",
  "\ufdd0",
  "😀",
  "👩‍👩‍👧",
  "🏳️‍🌈",
  "e\u0301",
  "\u0301",
  "𝟘",
  "ß",
  "İ",
  "ﬃ",
  "Ⅻ",
  "٣",
  "\u0663",
  "\\",
  '"',
  "'",
  "`",
  "$",
  "{",
  "}",
  "[",
  "]",
  "(",
  ")",
  "<",
  ">",
  "&",
  "%",
  ".",
  "/",
  "@",
  ":",
  "#",
  "?",
  "=",
  "*",
  "|",
  ";",
  "\n",
  "\r",
  "\t",
  " ",
];

/** Strings the engine gives a meaning to: ids, references, JSONPath, CEL, templates, secrets, reserved names. */
const SPECIAL_STRINGS = [
  "",
  " ",
  "a",
  "__proto__",
  "constructor",
  "prototype",
  "toString",
  "hasOwnProperty",
  "valueOf",
  "$",
  "$.",
  "$..*",
  "$.input",
  "$.state.__proto__",
  "$[?match(@, '(a|aa)+')]",
  "$..[?search(@, '(x+x+)+y')]",
  "$env:JOURNAL_SIGNING_KEY",
  "$env:API_TOKENS",
  "$env:SHELL_SERVER_TOKEN",
  "$env:LLM_API_KEY",
  "Bearer $env:MCP_TOKEN",
  "{{#each this}}{{this}}{{/each}}",
  "{{constructor.constructor}}",
  "{{lookup this '__proto__'}}",
  "{{> partial}}",
  "{{#if}}",
  "input.n + 1",
  "1/0",
  "'😀'.substring(0, 1)",
  "size(input)",
  "input.__proto__",
  "[1,2,3].map(x, x * x)",
  "run_00000000000000000000000000000000",
  "run_ffffffffffffffffffffffffffffffff",
  "gate_1",
  "gate_0",
  "gate_-1",
  "a@1",
  "a@0",
  "a@999999999",
  "a@1e3",
  "workflows",
  "tasks",
  "mcp-servers",
  "mcp_servers",
  "state.__proto__.x",
  "output.constructor.prototype",
  "state.a.b",
  "output.",
  "null",
  "true",
  "0",
  "-0",
  "1e309",
  "NaN",
  "Infinity",
  "0x10",
  "9007199254740993",
  "http://127.0.0.1:1/",
  "file:///etc/passwd",
  "javascript:alert(1)",
  "tool:git_commit",
  "mcp:server/tool",
  "sha256:" + "0".repeat(64),
  "a[$(touch PWNED)]",
  "$(( 1 + 1 ))",
  "`id`",
  "; rm -rf /",
  "%00",
  "..",
  "../..",
  "%2e%2e%2f",
];

/** One code unit or character: hostile, ASCII, any UTF-16 unit (lone surrogates included) or any code point. */
const unit = fc.oneof(
  { weight: 4, arbitrary: fc.constantFrom(...HOSTILE_CHARS) },
  { weight: 4, arbitrary: fc.string({ unit: "grapheme-ascii", minLength: 1, maxLength: 1 }) },
  { weight: 1, arbitrary: fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)) },
  { weight: 1, arbitrary: fc.string({ unit: "binary", minLength: 1, maxLength: 1 }) },
);

/** A marker (private-use delimiters) that {@link bodyText} and {@link materialize} turn into arrays nested `n` deep. */
export function deepMarker(levels: number): string {
  return `\ue000DEEP:${levels}\ue000`;
}

/** A marker that {@link bodyText} turns into a raw JSON number literal (`1e400` parses to Infinity). */
function numberMarker(literal: string): string {
  return `\ue000NUM:${literal}\ue000`;
}

const longString = fc
  .tuple(fc.constantFrom(1_000, 70_000, 400_000), fc.constantFrom("x", "😀", "\ud800", "{{", "$.", "\u0000", "é"))
  .map(([count, piece]) => piece.repeat(count));

/** A hostile string: mostly short and strange, sometimes special, sometimes long. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { weight: 16, arbitrary: fc.string({ unit, maxLength: 16 }) },
  { weight: 8, arbitrary: fc.constantFrom(...SPECIAL_STRINGS) },
  { weight: 1, arbitrary: longString },
);

/** Expressions, paths and templates, valid and not, for the places a definition holds them. */
export const hostileExpression: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: hostileString },
  {
    weight: 4,
    arbitrary: fc.constantFrom(
      "input",
      "input.n + 1",
      "input.n * 1000000000000",
      "size(input.items)",
      "input.items.map(x, x)",
      "input.items.filter(x, x > 1)",
      "'😀 smile'.substring(0, 1)",
      "'abc'.indexOf('c')",
      "'x'.repeat(10)",
      "string(input)",
      "int('9223372036854775808')",
      "9223372036854775807 + 1",
      "1.0 / 0.0",
      "dyn(input).missing",
      "input.__proto__",
      "has(input.n) ? input.n : 0",
      "[1,2,3].exists(x, x > 2)",
      "{'a': input}",
      "'a'.matches('(a|aa)+$')",
      "input.s.replace('a', 'bb')",
      "timestamp('2020-01-01T00:00:00Z')",
      "duration('1s')",
      "$",
      "$.input",
      "$..*",
      "$.input.items[*]",
      "$.input.items[-1:0:-1]",
      "$[?match(@, '(a|aa)+')]",
      "$..[?search(@, '.*.*.*=.*')]",
      "$['__proto__']",
      "$.input[?@.n > 1]",
      "{{input}}",
      "{{#each input}}{{@key}}={{this}}{{/each}}",
      "{{#if input}}{{else}}{{/if}}",
      "{{lookup input 'constructor'}}",
      "{{{input}}}",
      "{{> x}}",
      "{{#with input}}{{n}}{{/with}}",
      "{{#each (lookup this 'items')}}{{#each ../items}}{{/each}}{{/each}}",
    ),
  },
);

/** Object keys: reserved names, JSON Schema and engine keywords, and hostile strings. */
export const hostileKey: fc.Arbitrary<string> = fc.oneof(
  { weight: 3, arbitrary: fc.string({ unit, maxLength: 8 }) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "__proto__",
      "constructor",
      "prototype",
      "",
      "a.b",
      "$",
      "input",
      "state",
      "output",
      "item",
      "index",
      "type",
      "$ref",
      "$defs",
      "items",
      "properties",
      "patternProperties",
      "propertyNames",
      "additionalProperties",
      "dependentSchemas",
      "if",
      "then",
      "required",
      "pattern",
      "format",
      "const",
      "enum",
      "id",
      "kind",
      "nodes",
      "steps",
      "task",
      "workflow",
      "response",
      "reason",
      "mode",
      "version",
      "idempotency_key",
    ),
  },
);

const hostileNumber: fc.Arbitrary<number | string> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.constantFrom(0, -0, 1, -1, 1.5, 2 ** 31, 2 ** 53, 2 ** 53 + 2, 1e21, 1e308, -1e308, 5e-324, 0.1 + 0.2),
  fc.constantFrom("1e400", "-1e400", "123456789012345678901234567890", "1E-400", "-0.0").map(numberMarker),
);

const scalar: fc.Arbitrary<unknown> = fc.oneof(
  { weight: 12, arbitrary: hostileString },
  { weight: 6, arbitrary: hostileNumber },
  { weight: 3, arbitrary: fc.constantFrom(true, false, null) },
  { weight: 1, arbitrary: fc.constantFrom(62, 63, 64, 65, 200, 3_000, 20_000).map(deepMarker) },
);

/** Objects are built with `Object.fromEntries`, so a `__proto__` key is an own member as `JSON.parse` makes it. */
const valueTree = fc.letrec<{ value: unknown; array: unknown[]; object: Record<string, unknown> }>((tie) => ({
  value: fc.oneof({ depthSize: "small" }, scalar, tie("array"), tie("object")),
  array: fc.array(tie("value"), { maxLength: 4 }),
  object: fc.array(fc.tuple(hostileKey, tie("value")), { maxLength: 4 }).map((entries) => Object.fromEntries(entries)),
}));

/** Any hostile JSON value (before {@link bodyText} or {@link materialize}). */
export const hostileJson: fc.Arbitrary<unknown> = valueTree.value;

/** Regular expressions as JSON Schema `pattern`s and `patternProperties` keys: valid, invalid, Unicode-dependent. */
const hostileRegex: fc.Arbitrary<string> = fc.oneof(
  { weight: 2, arbitrary: fc.string({ unit, maxLength: 6 }) },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      "",
      "^a",
      "a+",
      "[a-z]",
      "\\p{Lu}",
      "\\d",
      "(?<n>a)\\k<n>",
      "(?=a)",
      "(?<!a)b",
      ".",
      "^$",
      "\\u{1F600}",
      "[\\ud800]",
      "\\",
      "(",
      "[",
      "a{2,1}",
      "*",
      "(?",
      "\\c",
      "\\1(a)",
      "[z-a]",
    ),
  },
);

/** Mostly a well-formed value (`valid`), sometimes any hostile one. */
const mostly = <T>(valid: fc.Arbitrary<T>, hostile: fc.Arbitrary<unknown>): fc.Arbitrary<unknown> =>
  fc.oneof({ weight: 5, arbitrary: valid }, { weight: 1, arbitrary: hostile });

/**
 * JSON Schemas made of the standard keywords, mostly well-formed so that they
 * register and then validate real input (at run start, at gates), with
 * hostile regular expressions, references, formats and values among them.
 */
export const hostileSchema: fc.Arbitrary<unknown> = fc.letrec<{ schema: unknown }>((tie) => ({
  schema: fc.oneof(
    { depthSize: "small", withCrossShrink: true },
    { weight: 1, arbitrary: fc.boolean() },
    {
      weight: 6,
      arbitrary: fc
        .array(
          fc.oneof(
            fc.tuple(
              fc.constant("type"),
              mostly(
                fc.oneof(
                  fc.constantFrom("object", "array", "string", "number", "integer", "boolean", "null"),
                  fc.array(fc.constantFrom("string", "null", "integer", "object"), { minLength: 1, maxLength: 3 }),
                ),
                hostileString,
              ),
            ),
            fc.tuple(fc.constant("pattern"), hostileRegex),
            fc.tuple(
              fc.constant("patternProperties"),
              fc
                .array(fc.tuple(hostileRegex, tie("schema")), { minLength: 1, maxLength: 2 })
                .map((entries) => Object.fromEntries(entries)),
            ),
            fc.tuple(
              fc.constantFrom("properties", "$defs", "dependentSchemas"),
              fc
                .array(
                  fc.tuple(
                    mostly(fc.constantFrom("n", "items", "s", "a", "ok", "token"), hostileKey) as fc.Arbitrary<string>,
                    tie("schema"),
                  ),
                  { maxLength: 3 },
                )
                .map((entries) => Object.fromEntries(entries)),
            ),
            fc.tuple(
              fc.constantFrom(
                "items",
                "additionalProperties",
                "propertyNames",
                "not",
                "if",
                "then",
                "else",
                "contains",
                "unevaluatedProperties",
              ),
              tie("schema"),
            ),
            fc.tuple(
              fc.constantFrom("allOf", "anyOf", "oneOf", "prefixItems"),
              fc.array(tie("schema"), { minLength: 1, maxLength: 3 }),
            ),
            fc.tuple(
              fc.constantFrom("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties"),
              mostly(fc.nat(5), hostileNumber),
            ),
            fc.tuple(
              fc.constantFrom("minimum", "maximum", "multipleOf", "exclusiveMinimum", "exclusiveMaximum"),
              mostly(fc.constantFrom(0, 1, 0.1, 1e-300, 2 ** 53, -1e308), hostileNumber),
            ),
            fc.tuple(
              fc.constant("required"),
              fc.array(mostly(fc.constantFrom("n", "items", "s"), hostileKey), { maxLength: 3 }),
            ),
            fc.tuple(
              fc.constantFrom("enum", "const", "default", "examples"),
              mostly(fc.array(fc.jsonValue({ maxDepth: 2 }), { minLength: 1, maxLength: 3 }), hostileJson),
            ),
            fc.tuple(
              fc.constantFrom("$ref", "$dynamicRef"),
              mostly(
                fc.constantFrom(
                  "#",
                  "#/$defs/a",
                  "#/properties/n",
                  "#/nope",
                  "#a",
                  "https://json-schema.org/draft/2020-12/schema",
                  "urn:x",
                  "#/$defs/%25",
                ),
                hostileString,
              ),
            ),
            fc.tuple(
              fc.constantFrom("$id", "$anchor", "$schema"),
              mostly(
                fc.constantFrom(
                  "a",
                  "urn:x",
                  "https://example.com/s",
                  "https://json-schema.org/draft/2020-12/schema",
                  "http://json-schema.org/draft-07/schema#",
                ),
                hostileString,
              ),
            ),
            fc.tuple(
              fc.constant("format"),
              mostly(
                fc.constantFrom(
                  "date-time",
                  "date",
                  "time",
                  "duration",
                  "email",
                  "idn-email",
                  "hostname",
                  "ipv4",
                  "ipv6",
                  "uri",
                  "uri-reference",
                  "iri",
                  "uuid",
                  "regex",
                  "json-pointer",
                  "relative-json-pointer",
                  "uri-template",
                ),
                hostileString,
              ),
            ),
          ),
          { maxLength: 4 },
        )
        .map((entries) => Object.fromEntries(entries)),
    },
  ),
})).schema;

/** Bundles that pass registration when left alone (ids made unique by `suffix`); mutation makes them hostile. */
export function definitionCorpus(suffix: string, httpTarget: string): Record<string, unknown>[] {
  const id = (name: string) => `fz-${name}-${suffix}`;
  const context = (path: string, expr: string) => ({ kind: "context", implementation: { updates: [{ path, expr }] } });
  return [
    {
      workflows: [
        {
          id: id("wf"),
          description: "fuzz corpus",
          input_schema: { type: "object", properties: { n: { type: "integer" }, items: { type: "array" } } },
          output_schema: { type: "object" },
          max_parallel: 4,
          fail_fast: true,
          timeout_ms: 60_000,
          nodes: {
            first: {
              task: {
                steps: [
                  {
                    ref: "s",
                    action: context("n", "input.n + 1"),
                    input_mapping: { n: "$.input.n" },
                    output_mapping: { "state.n": "$.n" },
                    condition: { if: "true", else: "skip" },
                    on_failure: "continue",
                  },
                ],
              },
            },
            fan: {
              depends_on: ["first"],
              when: "size(input.items) > 0",
              foreach: { items: "$.input.items", max_parallel: 2 },
              input_mapping: { item: "$.item", all: "$.input.items[*]" },
              task: {
                steps: [
                  {
                    ref: "t",
                    action: context("x", "input.item"),
                    output_mapping: { "output.x": { template: "{{item}}" } },
                  },
                ],
              },
              output_mapping: { "output.fanned": "$.x" },
              retry: { max_attempts: 2, initial_delay_ms: 10 },
              on_failure: "continue",
            },
            again: { depends_on: ["first"], repeat: { until: "true", max_iterations: 2 }, task: id("task") },
          },
        },
      ],
      tasks: [
        {
          id: id("task"),
          input_schema: {},
          steps: [{ ref: "c", action: id("ctx"), input_mapping: { v: { expr: "1 + 1" } } }],
        },
      ],
      actions: [
        {
          id: id("ctx"),
          kind: "context",
          requires: { type: "object" },
          produces: { type: "object" },
          risk: "low",
          implementation: { updates: [{ path: "a.b", expr: "'x'" }] },
        },
      ],
    },
    {
      actions: [
        {
          id: id("http"),
          kind: "http",
          execution: { timeout_ms: 1000, retry_policy: { max_attempts: 2 } },
          implementation: {
            method: "POST",
            url_template: `${httpTarget}/echo/{{id}}`,
            headers: { "x-api-key": "$env:LLM_API_KEY" },
            body_template: '{"v": "{{v}}"}',
            response: "json",
          },
        },
        {
          id: id("human"),
          kind: "human",
          implementation: {
            prompt_template: "Answer {{q}}",
            input_schema: { type: "object", required: ["ok"] },
            timeout_ms: 1000,
            on_timeout: { default: { ok: false } },
          },
        },
        {
          id: id("shell"),
          kind: "shell",
          implementation: {
            command_template: "echo {{name}}",
            working_dir: "src",
            env: { NAME: "{{name}}" },
            ok_exit_codes: [0, 1],
          },
        },
        { id: id("tool"), kind: "tool", implementation: { tool: "read_file" } },
        {
          id: id("metric"),
          kind: "metric",
          implementation: { metric_name: "m", value: { expr: "1" }, dimensions: { a: "b" } },
        },
        {
          id: id("vector"),
          kind: "vector",
          implementation: { index: "default", query_template: "{{q}}", top_k: 3, filter: { a: 1 } },
        },
        {
          id: id("llm"),
          kind: "llm",
          implementation: {
            prompt: { messages: [{ role: "user", template: "{{q}}" }], produces: { type: "object" } },
            model: {
              provider: "openai-compatible",
              model_id: "m",
              base_url: "http://127.0.0.1:1/v1",
              api_key: "$env:LLM_API_KEY",
            },
          },
        },
        { id: id("mcp"), kind: "mcp", implementation: { server: id("srv"), tool: "echo" } },
        { id: id("sub"), kind: "workflow", implementation: { workflow: id("wf"), on_failure: "return" } },
      ],
      mcp_servers: [
        {
          id: id("srv"),
          url: "http://127.0.0.1:1/mcp",
          headers: { authorization: "Bearer $env:MCP_TOKEN" },
          allowed_tools: ["echo"],
        },
      ],
      prompts: [{ id: id("prompt"), messages: [{ role: "system", template: "You are {{name}}" }] }],
      models: [
        {
          id: id("model"),
          provider: "anthropic",
          model_id: "claude",
          api_key: "$env:LLM_API_KEY",
          pricing: { input_per_mtok: 1, output_per_mtok: 2 },
        },
      ],
    },
    {
      workflows: [
        {
          id: id("res"),
          tools: ["tool:read_file", `mcp:${id("srv")}/echo`],
          resources: { dev: { type: "container" } },
          nodes: {
            a: {
              task: { steps: [{ ref: "r", action: { kind: "tool", implementation: { tool: "read_file" } } }] },
              resource_bindings: { container: "dev" },
            },
            b: { workflow: id("wf"), depends_on: ["a"], input_mapping: { n: 1 } },
          },
        },
      ],
    },
  ];
}

/**
 * Workflows whose actions only compute (context actions, expressions, paths,
 * templates): safe to run however their strings are mutated, since no string
 * mutation can turn a `context` action into one that calls out.
 */
export function computeCorpus(suffix: string): Record<string, unknown>[] {
  const update = (path: string, expr: string) => ({ kind: "context", implementation: { updates: [{ path, expr }] } });
  return [
    {
      workflows: [
        {
          id: `fz-compute-${suffix}`,
          input_schema: { type: "object" },
          output_schema: { type: "object" },
          max_parallel: 3,
          timeout_ms: 20_000,
          nodes: {
            first: {
              when: "has(input.n) || true",
              input_mapping: {
                n: "$.input.n",
                all: "$..*",
                text: { template: "{{#each input}}{{@key}}{{/each}}" },
                sum: { expr: "1 + 1" },
              },
              task: {
                steps: [
                  {
                    ref: "a",
                    action: update("n", "input.n"),
                    condition: { if: "true", else: "skip" },
                    output_mapping: { "output.n": "$.n", "state.seen": { template: "{{n}}" } },
                    on_failure: "continue",
                  },
                ],
              },
              output_mapping: { "output.first": "$.n" },
              timeout_ms: 5_000,
            },
            fan: {
              depends_on: ["first"],
              foreach: { items: "$.input.items", max_parallel: 2 },
              input_mapping: { item: "$.item", index: { expr: "index" } },
              task: {
                steps: [
                  {
                    ref: "b",
                    action: update("x", "input.item"),
                    output_mapping: { "output.x": "$.x" },
                    on_failure: "continue",
                  },
                ],
              },
              output_mapping: { "output.fanned": "$.x" },
              on_failure: "continue",
            },
            loop: {
              depends_on: ["first"],
              repeat: { until: "true", max_iterations: 3 },
              task: { steps: [{ ref: "c", action: update("y", "'z'"), input_mapping: { v: "$.state" } }] },
              on_failure: "continue",
            },
          },
        },
      ],
    },
  ];
}

/** One change to a bundle: at a position among its paths, replace the value, delete it, or add a member. */
export interface Mutation {
  at: number;
  /** `text` replaces a string with another string (an expression, path or template where the string was one); `number` a number. */
  op: "replace" | "delete" | "add" | "text" | "number" | "schema";
  key: string;
  value: unknown;
  text: string;
  number: unknown;
  schema: unknown;
}

export const mutation: fc.Arbitrary<Mutation> = fc.record(
  {
    at: fc.nat(),
    op: fc.constantFrom("replace", "delete", "add", "text", "text", "text", "number", "schema", "schema"),
    key: hostileKey,
    value: hostileJson,
    text: hostileExpression,
    number: hostileNumber,
    schema: hostileSchema,
  },
  { noNullPrototype: true },
);

/** Where a definition holds a JSON Schema. */
const SCHEMA_FIELDS: ReadonlySet<string> = new Set(["input_schema", "output_schema", "requires", "produces"]);

/** `base` (not changed) with the mutations applied, each at a path picked among the current ones. */
export function mutate(base: unknown, mutations: readonly Mutation[]): unknown {
  const root = { value: structuredClone(base) as unknown };
  for (const change of mutations) {
    const all = containersOf(root);
    const kind = change.op === "text" ? "string" : change.op === "number" ? "number" : null;
    const containers =
      change.op === "schema"
        ? all.filter(([, key]) => SCHEMA_FIELDS.has(key))
        : kind === null
          ? all
          : all.filter(([parent, key]) => typeof parent[key] === kind);
    const picked = containers[change.at % Math.max(containers.length, 1)];
    if (!picked) {
      continue;
    }
    const [parent, key] = picked;
    if (change.op === "add") {
      const target = parent[key];
      if (typeof target === "object" && target !== null && !Array.isArray(target)) {
        Object.defineProperty(target, change.key, {
          value: change.value,
          enumerable: true,
          writable: true,
          configurable: true,
        });
        continue;
      }
    }
    if (change.op === "delete" && parent !== root) {
      if (Array.isArray(parent)) {
        parent.splice(Number(key), 1);
      } else {
        delete parent[key];
      }
      continue;
    }
    const value =
      { text: change.text, number: change.number, schema: change.schema }[change.op as string] ?? change.value;
    Object.defineProperty(parent, key, { value, enumerable: true, writable: true, configurable: true });
  }
  return root.value;
}

/** Every (container, key) pair in the value, iteratively. */
function containersOf(root: { value: unknown }): [Record<string, unknown>, string][] {
  const found: [Record<string, unknown>, string][] = [];
  const stack: [Record<string, unknown>, string][] = [[root as Record<string, unknown>, "value"]];
  for (let item = stack.pop(); item !== undefined; item = stack.pop()) {
    found.push(item);
    const value = item[0][item[1]];
    if (typeof value === "object" && value !== null) {
      for (const key of Object.keys(value)) {
        stack.push([value as Record<string, unknown>, key]);
      }
    }
  }
  return found;
}

/** How a body travels: JSON (compact, pretty, with a BOM), YAML, or raw text; under which content type. */
export interface BodyEncoding {
  format: "json" | "json-pretty" | "json-bom" | "yaml" | "truncated" | "raw";
  contentType: string | null;
  raw: string;
}

export const bodyEncoding: fc.Arbitrary<BodyEncoding> = fc.record(
  {
    format: fc.oneof(
      { weight: 12, arbitrary: fc.constant("json" as const) },
      { weight: 6, arbitrary: fc.constantFrom("json-pretty", "json-bom", "yaml", "yaml", "truncated", "raw") },
    ),
    contentType: fc.oneof(
      { weight: 6, arbitrary: fc.constant("application/json") },
      {
        weight: 4,
        arbitrary: fc.constantFrom(
          "application/yaml",
          "text/yaml",
          "application/x-yaml",
          "text/plain",
          "application/x-www-form-urlencoded",
          "multipart/form-data; boundary=x",
          "application/json; charset=utf-16",
          "application/yaml; charset=latin1",
          "*/*",
          "",
          null,
        ),
      },
    ),
    raw: fc.oneof(
      fc.string({ unit, maxLength: 40 }),
      fc.constantFrom(
        "{",
        "[",
        '{"a":',
        "null",
        "--- !!js/function 'x'",
        "a: &a [*a]",
        "? [a, b]\n: c",
        "a: !!binary aGk=",
        "%YAML 1.1\n---\na: 1",
        "a: 1\n---\nb: 2",
        "\ufeff{}",
        "{}\u0000",
        "[1,]",
        "{'a':1}",
        "a: b: c",
      ),
    ),
  },
  { noNullPrototype: true },
);

/** The text of a body: the markers expanded (deep nesting, raw number literals) in JSON forms. */
export function bodyText(value: unknown, encoding: BodyEncoding): string {
  if (encoding.format === "raw") {
    return encoding.raw;
  }
  if (encoding.format === "yaml") {
    try {
      return yamlStringify(value);
    } catch {
      return encoding.raw;
    }
  }
  const json = expandMarkers(JSON.stringify(value, null, encoding.format === "json-pretty" ? 2 : undefined) ?? "null");
  if (encoding.format === "truncated") {
    return json.slice(0, Math.max(0, json.length - 1 - (encoding.raw.length % 5)));
  }
  return encoding.format === "json-bom" ? `\ufeff${json}` : json;
}

function expandMarkers(json: string): string {
  return json
    .replace(
      /"\ue000DEEP:(\d+)\ue000"/g,
      (_, levels: string) => `${"[".repeat(Number(levels))}0${"]".repeat(Number(levels))}`,
    )
    .replace(/"\ue000NUM:([^\ue000]+)\ue000"/g, (_, literal: string) => literal);
}

/** The value with deep markers made real (for RPC, which carries values, not text); iterative at any depth. */
export function materialize(value: unknown, maxLevels = Number.POSITIVE_INFINITY): unknown {
  if (typeof value === "string") {
    const deep = /^\ue000DEEP:(\d+)\ue000$/.exec(value);
    if (deep) {
      let nested: unknown = 0;
      for (let level = 0; level < Math.min(Number(deep[1]), maxLevels); level++) {
        nested = [nested];
      }
      return nested;
    }
    const number = /^\ue000NUM:(.+)\ue000$/.exec(value);
    return number ? Number(number[1]) : value;
  }
  if (Array.isArray(value)) {
    return value.map((member) => materialize(member, maxLevels));
  }
  if (typeof value === "object" && value !== null) {
    return Object.fromEntries(Object.entries(value).map(([key, member]) => [key, materialize(member, maxLevels)]));
  }
  return value;
}

/** A URL path segment: hostile text percent-encoded (lone surrogates as invalid UTF-8), or raw odd encodings. */
export const pathSegment: fc.Arbitrary<string> = fc.oneof(
  { weight: 4, arbitrary: hostileString.filter((text) => text.length < 2_000).map(percentEncode) },
  {
    weight: 2,
    arbitrary: fc.constantFrom(
      "%",
      "%E0%A4%A",
      "%00",
      "%ED%A0%80",
      "%C0%AF",
      "%2F",
      "..",
      "%2e%2e",
      ".",
      "%20",
      "+",
      "~",
      "%FF%FE",
      "a%00b",
      "%25",
      "%u0041",
      ";a=b",
      "a?b",
      "%23",
    ),
  },
  {
    weight: 1,
    arbitrary: fc.constantFrom(
      "x".repeat(8_000),
      "run_" + "f".repeat(32),
      "gate_1",
      "workflows",
      "mcp-servers",
      "versions",
      "1",
      "0",
      "-1",
      "1e3",
      "9".repeat(30),
    ),
  },
);

/** A query string: hostile keys and values, repeated keys, odd encodings. */
export const queryString: fc.Arbitrary<string> = fc.oneof(
  fc.constant(""),
  fc
    .array(
      fc.tuple(
        fc.constantFrom("after", "cursor", "limit", "workflow", "status", "x", "__proto__", "after[]"),
        fc.oneof(pathSegment, fc.constantFrom("0", "-1", "1.5", "1e400", "NaN", "99999999999999999999", "")),
      ),
      { minLength: 1, maxLength: 3 },
    )
    .map((pairs) => `?${pairs.map(([key, value]) => `${key}=${value}`).join("&")}`),
);

/** Percent-encodes UTF-8 bytes; a lone surrogate becomes the (invalid) 3-byte sequence it would have in CESU-8. */
export function percentEncode(text: string): string {
  let out = "";
  for (const char of text) {
    const code = char.codePointAt(0) ?? 0;
    if (/^[A-Za-z0-9_.~-]$/.test(char)) {
      out += char;
    } else if (code >= 0xd800 && code <= 0xdfff) {
      out +=
        `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`.toUpperCase();
    } else {
      out += [...new TextEncoder().encode(char)]
        .map((byte) => `%${byte.toString(16).padStart(2, "0").toUpperCase()}`)
        .join("");
    }
  }
  return out;
}
