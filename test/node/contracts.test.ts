import { existsSync, readdirSync, readFileSync, statSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Validator, type Schema } from "@cfworker/json-schema";
import { validate as validateOpenApi } from "@readme/openapi-parser";
import { describe, expect, it } from "vitest";
import { parse as parseYaml } from "yaml";
import { DEFINITION_KINDS, DefinitionBundle } from "../../schemas/index.ts";
import { generateContracts } from "../../src/contracts/generate.ts";

/**
 * The machine-readable contracts (docs/api.md "Machine-readable contracts"):
 * generated from schemas/ and src/contracts/routes.ts, committed, and checked
 * here so they cannot drift, and checked for what they are for.
 */
const root = fileURLToPath(new URL("../../", import.meta.url));
const read = (path: string) => readFileSync(`${root}${path}`, "utf8");

describe("the generated contracts", () => {
  it("are committed exactly as `npm run schemas` writes them", ({ expect }) => {
    for (const [path, content] of Object.entries(generateContracts())) {
      const committed = existsSync(`${root}${path}`) ? read(path) : "";
      expect(committed === content, `${path} is stale: run \`npm run schemas\` and commit it`).toBe(true);
    }
  });
});

/** Whether a parsed document is a definition bundle: an object whose keys are all kinds. */
function isBundle(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    !Array.isArray(value) &&
    Object.keys(value).length > 0 &&
    Object.keys(value).every((key) => (DEFINITION_KINDS as readonly string[]).includes(key))
  );
}

/** The bundles the docs show as valid: ```json / ```yaml blocks and `<<'EOF'` bodies that are bundles. */
function docBundles(): [string, unknown][] {
  const found: [string, unknown][] = [];
  const docs = ["README.md", ...readdirSync(`${root}docs`).map((name) => `docs/${name}`)];
  for (const path of docs) {
    const text = read(path);
    const blocks = [
      ...[...text.matchAll(/```(json|yaml)\n([\s\S]*?)```/g)].map(([, lang = "", body = ""]) => ({ lang, body })),
      ...[...text.matchAll(/<<'EOF'\n([\s\S]*?)\nEOF/g)].map(([, body = ""]) => ({ lang: "json", body })),
    ];
    for (const { lang, body } of blocks) {
      const parsed = parseBlock(lang, body);
      if (isBundle(parsed)) {
        found.push([`${path}: ${body.slice(0, 40).replaceAll("\n", " ")}…`, parsed]);
      }
    }
  }
  return found;
}

function parseBlock(lang: string, body: string): unknown {
  try {
    return lang === "yaml" ? (parseYaml(body) as unknown) : (JSON.parse(body) as unknown);
  } catch {
    return undefined; // fragments and annotated excerpts: not a bundle
  }
}

/** Whether a parsed file means to be a bundle: an object with at least one kind (a typo'd other key included). */
function namesAKind(value: unknown): boolean {
  return (
    typeof value === "object" &&
    value !== null &&
    Object.keys(value).some((key) => (DEFINITION_KINDS as readonly string[]).includes(key))
  );
}

/** Every YAML or JSON file under examples/ (when there is one) that names a kind (not run inputs, not configs). */
function exampleBundles(dir = "examples"): [string, unknown][] {
  if (!existsSync(`${root}${dir}`)) {
    return [];
  }
  return readdirSync(`${root}${dir}`).flatMap((name): [string, unknown][] => {
    const path = `${dir}/${name}`;
    if (statSync(`${root}${path}`).isDirectory()) {
      return exampleBundles(path);
    }
    const parsed: unknown = /\.ya?ml$/.test(name)
      ? parseYaml(read(path))
      : name.endsWith(".json")
        ? JSON.parse(read(path))
        : undefined;
    return namesAKind(parsed) ? [[path, parsed]] : [];
  });
}

describe("the JSON Schema of a definition bundle", () => {
  const schema = JSON.parse(read("schemas/json/definitions.schema.json")) as Schema;
  const check = (bundle: unknown) => new Validator(schema, "2020-12", false).validate(bundle);

  it("accepts every bundle the docs and examples show, as the server does", ({ expect }) => {
    const bundles = [...docBundles(), ...exampleBundles()];
    expect(bundles.length).toBeGreaterThanOrEqual(3);
    // The header docs/definitions.md shows for yaml-language-server, on a bundle that must validate.
    expect(bundles.map(([where]) => where)).toContainEqual(
      expect.stringMatching(/^docs\/definitions\.md: # yaml-language-server: \$schema=/),
    );
    for (const [where, bundle] of bundles) {
      expect(DefinitionBundle.safeParse(bundle).success, `zod rejects ${where}`).toBe(true);
      expect(check(bundle).errors, where).toEqual([]);
    }
  });

  it("rejects a typo'd field at any depth, and a wrong kind of value", ({ expect }) => {
    const step = { ref: "s", action: { kind: "context", implementation: { updates: [{ path: "v", expr: "1" }] } } };
    const workflow = { id: "w", nodes: { a: { task: { steps: [step] } } } };
    expect(check({ workflows: [workflow] }).valid).toBe(true);
    const typos = [
      { workflow: [workflow] },
      { workflows: [{ ...workflow, node: workflow.nodes }] },
      { workflows: [{ ...workflow, nodes: { a: { task: { steps: [step] }, depends_onn: [] } } }] },
      { workflows: [{ ...workflow, nodes: { a: { task: { steps: [{ ...step, output_maping: {} }] } } } }] },
      {
        actions: [
          { id: "x", kind: "http", implementation: { method: "GET", url_template: "https://e.x", header: {} } },
        ],
      },
      { models: [{ id: "m", provider: "openai", model_id: "gpt", apikey: "$env:KEY" }] },
    ];
    for (const bundle of typos) {
      expect(check(bundle).valid, JSON.stringify(bundle)).toBe(false);
      expect(DefinitionBundle.safeParse(bundle).success).toBe(false);
    }
    expect(check({ workflows: [{ ...workflow, id: "Upper" }] }).valid).toBe(false);
    expect(check({ actions: [{ id: "x", kind: "smtp", implementation: {} }] }).valid).toBe(false);
  });
});

describe("the OpenAPI document", () => {
  it("passes a standard OpenAPI 3.1 validator", async () => {
    const document = JSON.parse(read("schemas/json/openapi.json")) as Record<string, unknown>;
    const result = await validateOpenApi(structuredClone(document) as never);
    expect(result.valid ? [] : result.errors, "the OpenAPI document is invalid").toEqual([]);
    expect(document.openapi).toBe("3.1.0");
  });
});
