import type { JsonSchemaObject } from "./json-schema.ts";

/**
 * Plain TypeScript types from the JSON Schemas of the OpenAPI components, for
 * client/types.ts: the shallow types a caller's `tsc` checks quickly (no zod,
 * no generic inference). Covers what zod emits for our schemas; anything else
 * throws, so a new construct is noticed when `npm run schemas` runs.
 * test/workers/client-types.test.ts checks that each type is the zod one.
 * `named` gives the type of a component outright (`JsonValue`: the recursive
 * `Json`, which JSON Schema only knows as "anything").
 */
export function typeScriptOf(
  components: Record<string, JsonSchemaObject>,
  header: string,
  named: Record<string, string> = {},
): string {
  const declarations = Object.entries(components).map(([name, schema]) => {
    const doc =
      typeof schema.description === "string" && schema.description !== "" ? docComment(schema.description) : "";
    return `${doc}export type ${name} = ${named[name] ?? typeOf(schema, "")};\n`;
  });
  const index = Object.keys(components).map((name) => `  ${name}: ${name};`);
  return `${header}\n${declarations.join("\n")}\n/** Every type above by its name. */\nexport interface Components {\n${index.join("\n")}\n}\n`;
}

function docComment(text: string): string {
  return `/** ${text.replaceAll("*/", "*\\/")} */\n`;
}

/** The TypeScript type of one schema, indented by `indent` where it spans lines. */
function typeOf(schema: JsonSchemaObject, indent: string): string {
  if (typeof schema.$ref === "string") {
    return schema.$ref.slice(schema.$ref.lastIndexOf("/") + 1);
  }
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) {
    return union(alternatives.map((member) => typeOf(member as JsonSchemaObject, indent)));
  }
  if (schema.const !== undefined) {
    return JSON.stringify(schema.const);
  }
  if (schema.enum) {
    return union(schema.enum.map((value) => JSON.stringify(value)));
  }
  if (Array.isArray(schema.type)) {
    return union(schema.type.map((type) => typeOf({ ...schema, type }, indent)));
  }
  switch (schema.type) {
    case undefined:
      return isAnything(schema) ? "unknown" : unsupported(schema);
    case "string":
    case "boolean":
    case "null":
      return schema.type;
    case "number":
    case "integer":
      return "number";
    case "array":
      return `${wrap(typeOf((schema.items ?? {}) as JsonSchemaObject, indent))}[]`;
    case "object":
      return objectOf(schema, indent);
    default:
      return unsupported(schema);
  }
}

/** Keys that do not change a schema's TypeScript type (assertions TypeScript cannot state). */
const ANNOTATIONS = new Set([
  "description",
  "title",
  "minLength",
  "maxLength",
  "pattern",
  "format",
  "minimum",
  "maximum",
]);

/** `{}` with only annotations: any value. */
function isAnything(schema: JsonSchemaObject): boolean {
  return Object.keys(schema).every((key) => ANNOTATIONS.has(key));
}

function objectOf(schema: JsonSchemaObject, indent: string): string {
  const inner = `${indent}  `;
  const required = new Set(schema.required ?? []);
  const members = Object.entries(schema.properties ?? {}).map(([key, property]) => {
    const doc =
      typeof property === "object" && typeof property.description === "string" && !property.$ref
        ? `${inner}${docComment(property.description)}`
        : "";
    const name = /^[A-Za-z_$][A-Za-z0-9_$]*$/.test(key) ? key : JSON.stringify(key);
    return `${doc}${inner}${name}${required.has(key) ? "" : "?"}: ${typeOf(property as JsonSchemaObject, inner)};`;
  });
  const rest = schema.additionalProperties;
  if (rest !== undefined && rest !== false) {
    members.push(`${inner}[key: string]: ${rest === true ? "unknown" : typeOf(rest, inner)};`);
  }
  return members.length === 0 ? "{}" : `{\n${members.join("\n")}\n${indent}}`;
}

function union(members: string[]): string {
  return [...new Set(members)].join(" | ");
}

/** A union inside an array needs parentheses: `(A | B)[]`. */
function wrap(type: string): string {
  return type.includes(" | ") || type.includes("\n") ? `(${type})` : type;
}

function unsupported(schema: JsonSchemaObject): never {
  throw new Error(`no TypeScript type for the JSON Schema ${JSON.stringify(schema).slice(0, 200)}`);
}
