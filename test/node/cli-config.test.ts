import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, describe, it } from "vitest";
import { CliError } from "../../cli/api.ts";
import { resolveTarget } from "../../cli/config.ts";

/** Where the CLI sends its requests: flags, then TRELLIS_URL, then the dev server on PORT (docs/cli.md). */

// A folder without .dev.vars, so no token is read from the repository's.
const cwd = mkdtempSync(join(tmpdir(), "trellis-cli-config-"));
afterAll(() => rmSync(cwd, { recursive: true, force: true }));

const urlOf = (flags: { url?: string }, env: Record<string, string>) => resolveTarget(flags, env, cwd).url;

describe("the CLI's target", () => {
  it("is the dev server on port 8787 with neither TRELLIS_URL nor PORT", ({ expect }) => {
    expect(urlOf({}, {})).toBe("http://127.0.0.1:8787");
  });

  it("is the dev server on PORT when TRELLIS_URL is unset, as npm run dev serves it", ({ expect }) => {
    expect(urlOf({}, { PORT: "9123" })).toBe("http://127.0.0.1:9123");
  });

  it("prefers TRELLIS_URL to PORT, and --url to both", ({ expect }) => {
    const env = { PORT: "9123", TRELLIS_URL: "http://example.test:1/" };
    expect(urlOf({}, env)).toBe("http://example.test:1");
    expect(urlOf({ url: "http://flag.test:2" }, env)).toBe("http://flag.test:2");
  });

  it("takes a URL ending in /v1 without it, since every path it sends starts with /v1", ({ expect }) => {
    for (const url of ["http://example.test:1/v1", "http://example.test:1/v1/", "http://example.test:1/"]) {
      expect(urlOf({ url }, {}), url).toBe("http://example.test:1");
    }
    expect(urlOf({}, { TRELLIS_URL: "https://example.test/trellis/v1" })).toBe("https://example.test/trellis");
  });

  it("refuses a PORT that is not a port number, naming it", ({ expect }) => {
    const thrown = (() => {
      try {
        return urlOf({}, { PORT: "eighty" });
      } catch (error) {
        return error;
      }
    })();
    expect(thrown).toBeInstanceOf(CliError);
    expect(thrown instanceof CliError ? [thrown.code, thrown.message] : []).toEqual([
      "cli.invalid_port",
      'PORT is "eighty", not a port number (1–65535); or set TRELLIS_URL',
    ]);
  });
});
