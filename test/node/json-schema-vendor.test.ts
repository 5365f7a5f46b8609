/**
 * lib/vendor/cfworker-json-schema/validate.js is @cfworker/json-schema's validate.js with
 * the listed edits and nothing else (scripts/vendor-json-schema.ts): it cannot drift from
 * the installed package unnoticed.
 */
import { readFileSync } from "node:fs";
import { describe, it } from "vitest";
import {
  EDITS,
  UPSTREAM_PACKAGE_PATH,
  UPSTREAM_PATH,
  VENDORED_PATH,
  VENDORED_VERSION,
  vendorValidate,
} from "../../scripts/vendor-json-schema.ts";

const upstream = readFileSync(UPSTREAM_PATH, "utf8");
const version = (JSON.parse(readFileSync(UPSTREAM_PACKAGE_PATH, "utf8")) as { version: string }).version;

describe("the vendored JSON Schema validator", () => {
  it("is exactly what the vendoring script makes of the installed package (run `node scripts/vendor-json-schema.ts` after an upgrade)", ({
    expect,
  }) => {
    expect(version).toBe(VENDORED_VERSION);
    expect(readFileSync(VENDORED_PATH, "utf8")).toBe(vendorValidate(upstream, version));
  });

  it("keeps no RegExp and no spread of error lists of the original", ({ expect }) => {
    const vendored = readFileSync(VENDORED_PATH, "utf8");
    expect(vendored).not.toMatch(/new RegExp|\.\.\.\w+\.errors/);
    expect(vendored).toContain("compilePattern(pattern)");
    expect(vendored).toContain("compilePattern($pattern)");
  });

  it("refuses to vendor another version, or an upstream where an edit no longer applies exactly", ({ expect }) => {
    expect(() => vendorValidate(upstream, "4.2.0")).toThrow(/review its validate.js changes/);
    const moved = upstream.replace(
      "const regex = new RegExp(pattern, 'u');",
      "const regex = new RegExp(pattern, 'v');",
    );
    expect(() => vendorValidate(moved, version)).toThrow(/patternProperties keys run on the linear-time engine/);
    expect(EDITS.length).toBeGreaterThan(0);
  });
});
