/**
 * Properties of the ingress limits themselves (lib/json-limits.ts), checked
 * directly on values: sizes are the exact UTF-8 size of the JSON text, every
 * lone surrogate is found at its path, the depth bound is exact, and no value
 * (deep, cyclic, shared) makes the walk overflow or run long.
 */
import fc from "fast-check";
import { describe, expect, it } from "vitest";
import { EngineError } from "../../lib/errors.ts";
import { checkBodyLimits, jsonTextBytes, MAX_BODY_BYTES, MAX_BODY_DEPTH } from "../../lib/json-limits.ts";

const SEED = 20261124;

function refusal(value: unknown, basePath?: string): { code: string; paths: string[] } | null {
  try {
    checkBodyLimits(value, basePath);
    return null;
  } catch (error) {
    if (!(error instanceof EngineError)) {
      throw error;
    }
    return { code: error.code, paths: (error.details ?? []).map((detail) => detail.path) };
  }
}

/** Arrays nested `levels` deep around `leaf`, built without recursion. */
function nested(levels: number, leaf: unknown = 0): unknown {
  let value = leaf;
  for (let level = 0; level < levels; level++) {
    value = [value];
  }
  return value;
}

const anyUnit = fc.oneof(
  fc.string({ unit: "binary", minLength: 1, maxLength: 1 }),
  fc.integer({ min: 0, max: 0xffff }).map((code) => String.fromCharCode(code)),
);

describe("json limits", () => {
  it("counts a string's JSON text exactly: quotes, escapes and UTF-8 bytes", () => {
    fc.assert(
      fc.property(fc.string({ unit: anyUnit, maxLength: 40 }), (text) => {
        expect(jsonTextBytes(text)).toBe(new TextEncoder().encode(JSON.stringify(text)).byteLength);
      }),
      { seed: SEED, numRuns: 2_000 },
    );
  });

  it("accepts well-formed JSON within the limits, and sizes it exactly at the 1 MiB boundary", () => {
    const wellFormed = fc.jsonValue({ maxDepth: 6 }).filter((value) => !JSON.stringify(value).includes('"__proto__"'));
    fc.assert(
      fc.property(wellFormed, (value) => {
        expect(refusal(value)).toBeNull();
      }),
      { seed: SEED, numRuns: 500 },
    );
    // {"a":"xxx…"}: 8 bytes around the string's content.
    expect(refusal({ a: "x".repeat(MAX_BODY_BYTES - 8) })).toBeNull();
    expect(refusal({ a: "x".repeat(MAX_BODY_BYTES - 7) })?.code).toBe("request.too_large");
    expect(refusal({ a: "é".repeat((MAX_BODY_BYTES - 8) / 2) })).toBeNull();
    expect(refusal({ a: `${"é".repeat((MAX_BODY_BYTES - 8) / 2)}x` })?.code).toBe("request.too_large");
  });

  it("finds every lone surrogate and __proto__ key at its path", () => {
    const located = fc.tuple(
      fc.jsonValue({ maxDepth: 4 }),
      fc.array(fc.nat(), { minLength: 1, maxLength: 6 }),
      fc.constantFrom("\ud800", "\udbff", "\udc00", "\udfff"),
      fc.constantFrom("value", "key", "proto"),
    );
    fc.assert(
      fc.property(located, ([base, choices, lone, where]) => {
        // Walk down `base` by the choices, then plant the problem there.
        const root: Record<string, unknown> = { body: structuredClone(base) };
        let parent: Record<string, unknown> = root;
        let key = "body";
        const path: string[] = [];
        for (const choice of choices) {
          const current = parent[key];
          if (typeof current !== "object" || current === null) {
            break;
          }
          const keys = Object.keys(current);
          if (keys.length === 0) {
            break;
          }
          parent = current as Record<string, unknown>;
          key = keys[choice % keys.length] as string;
          path.push(key);
        }
        const planted =
          where === "value" ? `a${lone}b` : Object.fromEntries([[where === "key" ? `k${lone}` : "__proto__", 1]]);
        Object.defineProperty(parent, key, { value: planted, enumerable: true, writable: true, configurable: true });
        const lonePath = [
          ...path,
          ...(where === "key" ? [`k\\u${lone.charCodeAt(0).toString(16)}`] : where === "proto" ? ["__proto__"] : []),
        ].join(".");
        const found = refusal(root.body, "input");
        expect(found?.code).toBe(where === "proto" ? "request.reserved_key" : "request.invalid_text");
        expect(found?.paths).toContain(["input", lonePath].filter((part) => part.length > 0).join("."));
      }),
      { seed: SEED, numRuns: 1_000 },
    );
  });

  it(`bounds nesting at exactly ${MAX_BODY_DEPTH} levels, at any depth without recursion, and ends on cycles and shared values`, () => {
    expect(refusal(nested(MAX_BODY_DEPTH))).toBeNull();
    expect(refusal(nested(MAX_BODY_DEPTH + 1))).toEqual({
      code: "request.too_deep",
      paths: [Array(MAX_BODY_DEPTH).fill("0").join(".")],
    });
    expect(refusal({ input: nested(MAX_BODY_DEPTH - 1) })).toBeNull();
    expect(refusal({ input: nested(MAX_BODY_DEPTH) })?.code).toBe("request.too_deep");
    expect(refusal(nested(1_000_000))?.code).toBe("request.too_deep");
    const cyclic: Record<string, unknown> = {};
    cyclic.self = cyclic;
    expect(refusal(cyclic)?.code).toBe("request.too_deep");
    let shared: unknown[] = [1];
    for (let level = 0; level < 60; level++) {
      shared = [shared, shared];
    }
    expect(refusal(shared)?.code).toBe("request.too_large");
    // Large arrays and binary data are sized before anything is queued or enumerated.
    const holey: number[] = [];
    holey.length = MAX_BODY_BYTES + 1;
    expect(refusal({ input: holey })?.code).toBe("request.too_large");
    expect(refusal({ input: new Uint8Array(2 * MAX_BODY_BYTES) })?.code).toBe("request.too_large");
    expect(refusal({ input: new Uint8Array(16) })).toBeNull();
    // Many problems: the first 20 are listed, the message counts them all.
    const many = { many: Array.from({ length: 100 }, () => "\ud800") };
    expect(refusal(many)?.paths).toHaveLength(20);
    expect(() => checkBodyLimits(many)).toThrow("(and 99 more)");
  });
});
