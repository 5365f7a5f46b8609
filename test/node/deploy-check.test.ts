import { readFileSync } from "node:fs";
import { describe, it } from "vitest";
import { unstable_readConfig } from "wrangler";
import { checkConfig, EXPECTED } from "../../scripts/lib/deploy-expectations.mjs";

const root = new URL("../../", import.meta.url).pathname;
const readConfig = () => unstable_readConfig({ config: `${root}wrangler.toml` }, { hideWarnings: true });

describe("npm run deploy:check", () => {
  it("knows every binding the code declares in Env (env.d.ts)", ({ expect }) => {
    const envBlock = /interface Env \{([\s\S]*?)\n\}/.exec(readFileSync(`${root}env.d.ts`, "utf8"))?.[1] ?? "";
    const names = [...envBlock.matchAll(/^ {2}([A-Z][A-Z0-9_]*)\??:/gm)].map((match) => match[1]);
    expect(names.length).toBeGreaterThan(10);
    expect(names.filter((name) => name !== undefined && !(name in EXPECTED))).toEqual([]);
  });

  it("passes on the repository's wrangler.toml", ({ expect }) => {
    expect(checkConfig(readConfig()).filter((line) => !line.ok)).toEqual([]);
  });

  it("names a missing binding, a secret in [vars] and a local-only var", ({ expect }) => {
    const config = readConfig();
    const broken = {
      ...config,
      d1_databases: [],
      vars: { ...config.vars, JOURNAL_SIGNING_KEY: "oops", CONTAINER_MODE: "local" },
    };
    expect(
      checkConfig(broken)
        .filter((line) => !line.ok)
        .map((line) => line.what.split(":")[0]),
    ).toEqual(["RUN_INDEX", "JOURNAL_SIGNING_KEY", "CONTAINER_MODE"]);
  });
});
