import { readFileSync } from "node:fs";
import { describe, it } from "vitest";

const read = (path: string) => readFileSync(new URL(`../../${path}`, import.meta.url), "utf8");

describe("the docs' complete example", () => {
  it("is examples/user-report.yaml, verbatim (the e2e suite runs that file)", ({ expect }) => {
    const docs = read("docs/definitions.md");
    const section = docs.slice(docs.indexOf("## A complete example"));
    const block = /```yaml\n([\s\S]*?)```/.exec(section)?.[1];
    expect(block).toBe(read("examples/user-report.yaml"));
  });
});
